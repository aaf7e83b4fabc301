#!/usr/bin/env bash
# From a fresh clone on a development machine (Debian 12 with nvcc, no GPU needed) to everything
# a GPU session's calls carry (docs/gpu.md "What travels, and a session's calls"), each stage
# timed, so a session that is lent a GPU spends its minutes on the GPU, not on finding out how
# to build for it:
#   1. deps: the Debian packages, the OpenAI SDK test's venv, FlashInfer's headers (setup-*.sh);
#   2. build-cuda-fi: the CUDA backend with FlashInfer, device code for sm_90a only, every
#      target; scripts/gpu-check.sh pack (calls 1 and 2) and pack-bench (call 3) of it;
#   3. llama.cpp's CUDA build (llama-bench, llama-server) from the source the pinned PyPI sdist
#      of llama-cpp-python bundles, in build-llama-cuda/, packed as
#      build-llama-cuda/llama-cuda.tar.xz (step 8's LLAMA_CUDA_BIN); skipped when that tarball
#      exists. Only call 3 needs it: calls 1 and 2 can go while it builds.
# Should FlashInfer's results be wrong on the GPU, PITH_CUDA_ATTENTION=pith runs the same pack
# on the own attention kernel (docs/gpu.md), so no second build is needed.
#
#   scripts/gpu-prepare.sh [--no-llama] [--jobs N]
#
# Builds are incremental (ninja): after a change, running it again rebuilds what changed and
# packs again. The stage times go to stdout and to build-cuda-fi/prepare-times.txt.
set -euo pipefail

SRC=$(cd "$(dirname "$0")/.." && pwd)
cd "$SRC"
LLAMA_CPP_PYTHON=0.3.36  # bundles llama.cpp 0c1e570, the CPU anchor's tree (docs/benchmarks.md)
ARCH=90a-real            # what the GPU machines are (H100/H200); one architecture keeps packs small
LLAMA=1
JOBS=$(nproc)
while (($#)); do
  case $1 in
    --no-llama) LLAMA=0 ;;
    --jobs) JOBS=${2:?--jobs N}; shift ;;
    *) echo "usage: $0 [--no-llama] [--jobs N]" >&2; exit 2 ;;
  esac
  shift
done

export PATH=$PATH:/usr/local/cuda/bin
command -v nvcc >/dev/null || { echo "gpu-prepare: nvcc is needed (the CUDA toolkit)" >&2; exit 1; }

TIMES=()
stage() {  # name command...
  local name=$1 t0=$SECONDS
  shift
  echo "gpu-prepare: $name" >&2
  "$@" || { echo "gpu-prepare: $name failed" >&2; exit 1; }
  TIMES+=("$(printf '%-28s %5d s' "$name" $((SECONDS - t0)))")
}

deps() {
  bash scripts/setup-deps.sh && bash scripts/setup-python.sh &&
    bash scripts/setup-flashinfer.sh > /dev/null
}

build_backend() {
  cmake -S . -B build-cuda-fi -G Ninja -DCMAKE_BUILD_TYPE=Release -DPITH_CUDA=ON \
    -DPITH_FLASHINFER=ON -DCMAKE_CUDA_ARCHITECTURES="$ARCH" > /dev/null &&
    cmake --build build-cuda-fi -j "$JOBS"
}

# llama.cpp from llama-cpp-python's sdist (the registry carries the source; no other download),
# unpacked inside the build folder: a rerun after a failure finds the same source path, so
# ninja keeps what was built (about an hour of CUDA templates on 2 cores).
build_llama() {
  local src=build-llama-cuda/src dir
  if [[ ! -d $src/llama_cpp_python-$LLAMA_CPP_PYTHON ]]; then
    mkdir -p "$src" &&
      python3 -m pip download -q --disable-pip-version-check --no-deps --no-binary :all: \
        -d "$src" "llama-cpp-python==$LLAMA_CPP_PYTHON" &&
      tar -xzf "$src/llama_cpp_python-$LLAMA_CPP_PYTHON.tar.gz" -C "$src" || return 1
  fi
  dir=$PWD/$src/llama_cpp_python-$LLAMA_CPP_PYTHON/vendor/llama.cpp
  # No GPU driver here: libggml-cuda links the driver API's stub, whose libcuda.so.1 the
  # executables' link cannot find (the GPU machine has it).
  cmake -S "$dir" -B build-llama-cuda -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_CUDA=ON \
    -DCMAKE_CUDA_ARCHITECTURES=90 -DBUILD_SHARED_LIBS=ON -DLLAMA_CURL=OFF \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DGGML_NATIVE=OFF \
    -DCMAKE_EXE_LINKER_FLAGS=-Wl,--allow-shlib-undefined > /dev/null &&
    cmake --build build-llama-cuda -j "$JOBS" --target llama-bench llama-server &&
    scripts/gpu-check.sh pack-llama build-llama-cuda/bin build-llama-cuda/llama-cuda.tar.xz
}

stage deps deps
stage "build build-cuda-fi" build_backend
stage "pack build-cuda-fi" scripts/gpu-check.sh pack build-cuda-fi
stage "pack-bench build-cuda-fi" scripts/gpu-check.sh pack-bench build-cuda-fi
if ((LLAMA)) && [[ ! -f build-llama-cuda/llama-cuda.tar.xz ]]; then
  stage "llama.cpp CUDA" build_llama
fi

{
  echo "gpu-prepare at $(git rev-parse --short HEAD), $(date -u +%FT%TZ), $(nproc) cores, -j $JOBS:"
  printf '  %s\n' "${TIMES[@]}"
  for f in build-cuda-fi/gpu-pack.tar.xz build-cuda-fi/gpu-pack-bench.tar.xz \
           build-llama-cuda/llama-cuda.tar.xz; do
    [[ -f $f ]] && printf '  %-40s %s\n' "$f" "$(du -h "$f" | cut -f1)"
  done
} | tee build-cuda-fi/prepare-times.txt
echo "gpu-prepare: next, on a clean tree: scripts/gpu-check.sh slim checks, then the calls" \
     "in docs/gpu.md" >&2
