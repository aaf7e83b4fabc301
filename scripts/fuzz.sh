#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/; clang, ASan + UBSan) in build-fuzz and runs them on seed
# corpora copied from the test data: scripts/fuzz.sh [TARGET|all] [SECONDS] [JOBS]
# Findings (crash-*, leak-*, timeout-*) land in build-fuzz/findings/TARGET/. Not part of CI.
set -euo pipefail
cd "$(dirname "$0")/.."
target=${1:-all}
seconds=${2:-60}
build=build-fuzz
cmake -S . -B $build -G Ninja -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
  -DPITH_FUZZ=ON -DPITH_CUDA=OFF -DPITH_BUILD_BENCH=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
targets=(gguf chat_template)
[ "$target" != all ] && targets=("$target")
cmake --build $build -j "$(nproc)" --target "${targets[@]/#/fuzz_}"

seed() {  # seed corpora from the project's own test data (small files; GGUFs are read truncated)
  local t=$1 dir=$build/corpus/$1
  mkdir -p "$dir"
  case $t in
    gguf) cp tests/data/models/tiny-q8_0.gguf tests/data/tokenizer/ggml-vocab-phi-3.gguf "$dir"/ ;;
    chat_template) cp tests/data/templates/*.jinja "$dir"/ ;;
  esac
}
for t in "${targets[@]}"; do
  seed "$t"
  mkdir -p $build/findings/$t
  max_len=65536
  [ "$t" = chat_template ] && max_len=16384
  echo "== fuzz_$t for ${seconds}s"
  ASAN_OPTIONS=detect_leaks=1 $build/fuzz/fuzz_$t $build/corpus/$t -max_total_time="$seconds" \
    -max_len=$max_len -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix=$build/findings/$t/ 2>&1 | grep -E "^#[0-9]+.*(DONE|pulse)|stat::|ERROR|SUMMARY|Done" || true
done
