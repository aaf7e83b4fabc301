# The commands a newcomer runs: `make demo` and `make test` (and `make test-gpu` on a machine with
# an NVIDIA GPU). Each installs what is missing (Debian 12 packages and the pinned Python venv of
# the OpenAI SDK tests; DEPS=0 skips that), configures, builds and runs.
# SAN=1 builds with ASan + UBSan into a separate build folder, at -O1 with line tables (the
# sanitizers' recommended speed/report trade-off), without the CUDA backend (the sanitizers do
# not see into device code; its host simulation, src/engine/cuda/sim, is built and tested there)
# and without the `pith bench` suites (not part of the unit and e2e suites).

JOBS    ?= $(shell nproc)
SAN     ?= 0
DEPS    ?= 1
# Tests without a TIMEOUT of their own (the unit tests) fail after this many seconds, not ctest's
# default 25 minutes.
TEST_TIMEOUT ?= 300
# INFERLETS_FROM=DIR: copy the inferlets from build folder DIR instead of compiling them again
# (cmake/PithInferlet.cmake; CI's sanitizer step). Passed on every configure, so it never sticks.
INFERLETS_FROM ?=
ifeq ($(SAN),1)
BUILD   ?= build-san
override CMAKE_FLAGS += -DPITH_SANITIZE=ON -DPITH_CUDA=OFF -DPITH_BUILD_BENCH=OFF \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG" "-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG"
else
BUILD   ?= build
endif
GPU_BUILD ?= build-gpu
CTEST = ctest --output-on-failure -j $(JOBS) --timeout $(TEST_TIMEOUT)

# Fuzzing (docs/reliability.md): every libFuzzer target for FUZZ_SECONDS each; FUZZ_TARGET=name
# for one. (CI runs each target once per seed instead: the fuzz_corpus_* tests.)
FUZZ_SECONDS ?= 60
FUZZ_TARGET  ?= all

.PHONY: all deps configure build test demo test-gpu fuzz clean

all: build

deps:
ifeq ($(DEPS),1)
	@bash scripts/setup-deps.sh
	@bash scripts/setup-python.sh
endif

configure: deps
	@cmake -S . -B $(BUILD) $(CMAKE_FLAGS) -DPITH_INFERLETS_FROM=$(INFERLETS_FROM) >/dev/null

# TARGET=name builds one target (and what it needs) instead of all of them.
build: configure
	@cmake --build $(BUILD) -j $(JOBS) $(if $(TARGET),--target $(TARGET))

test: build
	@cd $(BUILD) && $(CTEST) $(CTEST_FLAGS)

demo: build
	@bash scripts/demo.sh $(BUILD)

# Everything GPU, on a machine with an NVIDIA GPU: the CUDA backend (FlashInfer attention when its
# headers are set up), the `gpu`-labelled tests with a missing GPU counting as a failure, then the
# e2e suite with every `pith serve` on the CUDA device (tests/e2e/pith_harness.py).
test-gpu: export PATH := $(PATH):/usr/local/cuda/bin
test-gpu: deps
	@nvidia-smi -L >/dev/null 2>&1 || { echo "make test-gpu: no NVIDIA GPU here (nvidia-smi -L failed)"; exit 1; }
	@cmake -S . -B $(GPU_BUILD) -DPITH_CUDA=ON -DPITH_FLASHINFER=AUTO $(CMAKE_FLAGS) >/dev/null
	@cmake --build $(GPU_BUILD) -j $(JOBS)
	@cd $(GPU_BUILD) && PITH_REQUIRE_GPU=1 $(CTEST) --no-tests=error -L gpu $(CTEST_FLAGS)
	@cd $(GPU_BUILD) && PITH_TEST_DEVICE=cuda $(CTEST) -L e2e $(CTEST_FLAGS)

fuzz: deps
	@bash scripts/fuzz.sh $(FUZZ_TARGET) $(FUZZ_SECONDS)

clean:
	rm -rf build build-san $(GPU_BUILD) build-fuzz build-fuzz-quick
