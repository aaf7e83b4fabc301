# The two commands a newcomer runs: `make demo` and `make test`.
# Each installs what is missing (Debian 12 packages), configures, builds and runs.
# SAN=1 builds with ASan + UBSan into a separate build folder.

JOBS    ?= $(shell nproc)
SAN     ?= 0
ifeq ($(SAN),1)
BUILD   ?= build-san
CMAKE_FLAGS += -DPITH_SANITIZE=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo
else
BUILD   ?= build
endif

.PHONY: all deps configure build test demo clean

all: build

deps:
	@bash scripts/setup-deps.sh

configure: deps
	@cmake -S . -B $(BUILD) $(CMAKE_FLAGS) >/dev/null

build: configure
	@cmake --build $(BUILD) -j $(JOBS)

test: build
	@cd $(BUILD) && ctest --output-on-failure -j $(JOBS) $(CTEST_FLAGS)

demo: build
	@bash scripts/demo.sh $(BUILD)

clean:
	rm -rf build build-san
