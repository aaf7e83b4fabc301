#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/; clang, ASan + UBSan) in build-fuzz and runs each on its
# seed corpus: scripts/fuzz.sh [TARGET|all] [SECONDS] [--quick]
# Seeds: fuzz/corpus/TARGET (committed, small) plus files from the test data (GGUF models and
# vocabularies, chat templates) and, for wasm_module, inferlets built here: the list
# fuzz/CMakeLists.txt writes to $build/fuzz/seeds_TARGET.txt (the fuzz_corpus_* tests' inputs). The corpus grows in
# build-fuzz/corpus/TARGET. Findings (crash-*, leak-*, timeout-*, oom-*) land in
# build-fuzz/findings/TARGET/ and make the script fail. --quick: build-fuzz-quick, an -O0 build
# without debug info, a fresh corpus from the seeds only: it builds in about a third of the CPU
# time of -O1 but runs 2-37x fewer inputs per second (docs/reliability.md has the figures).
# Longer runs use the -O1 build. (CI replays the seeds in its sanitizer build instead: the
# fuzz_corpus_* tests, fuzz/CMakeLists.txt.)
# Targets run FUZZ_JOBS at a time (default: one per core; each libFuzzer process uses one).
set -euo pipefail
cd "$(dirname "$0")/.."
target=${1:-all}
seconds=${2:-60}
quick=0
[ "${3:-}" = --quick ] && quick=1
build=build-fuzz
all=(gguf safetensors hf_config tokenizer_json chat_template grammar json_schema openai_request
  http_request sse wasm_module)
targets=("${all[@]}")
[ "$target" != all ] && targets=("$target")

config=(-DCMAKE_BUILD_TYPE=RelWithDebInfo)
[ $quick = 1 ] && build=build-fuzz-quick && config=(-DCMAKE_BUILD_TYPE=Release "-DCMAKE_CXX_FLAGS_RELEASE=-O0 -DNDEBUG"
  "-DCMAKE_C_FLAGS_RELEASE=-O0 -DNDEBUG")
# A folder configured with another compiler is reconfigured from scratch (CMake would drop the
# other options while switching).
if [ -f $build/CMakeCache.txt ] && ! grep -q '^CMAKE_CXX_COMPILER:.*clang++-14$' $build/CMakeCache.txt; then
  rm -rf $build/CMakeCache.txt $build/CMakeFiles
fi
cmake -S . -B $build -G Ninja -DCMAKE_C_COMPILER=clang-14 -DCMAKE_CXX_COMPILER=clang++-14 \
  -DPITH_FUZZ=ON -DPITH_CUDA=OFF -DPITH_BUILD_BENCH=OFF "${config[@]}" >/dev/null
build_targets=("${targets[@]/#/fuzz_}")
[[ " ${targets[*]} " == *" wasm_module "* ]] && build_targets+=(inferlet_spin inferlet_traps inferlet_echo)
cmake --build $build -j "$(nproc)" --target "${build_targets[@]}"

seed() {
  local t=$1 dir=$build/corpus/$1
  [ $quick = 1 ] && rm -rf "$dir"
  mkdir -p "$dir"
  local s
  while IFS= read -r s; do
    [ -z "$s" ] && continue
    if [ -d "$s" ]; then cp "$s"/* "$dir"/; else cp "$s" "$dir"/; fi
  done <"$build/fuzz/seeds_$t.txt"
}
max_len() {
  case $1 in
    gguf | wasm_module) echo 1048576 ;;
    chat_template | tokenizer_json) echo 32768 ;;
    *) echo 16384 ;;
  esac
}

# One fuzz target, its output in $build/fuzz_TARGET.log and its exit status in .rc.
run_one() {
  local t=$1 findings=$build/findings/$1 log=$build/fuzz_$1.log rc=0
  mkdir -p "$findings"
  ASAN_OPTIONS=detect_leaks=1 $build/fuzz/fuzz_$t $build/corpus/$t -max_total_time="$seconds" \
    -max_len="$(max_len "$t")" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="$findings/" >"$log" 2>&1 || rc=$?
  echo $rc >"$build/fuzz_$t.rc"
}

# Each libFuzzer process uses one core: FUZZ_JOBS of them (default: one per core) run at once.
jobs_max=${FUZZ_JOBS:-$(nproc)}
running=0
for t in "${targets[@]}"; do
  seed "$t"
  rm -f "$build/fuzz_$t.rc"
  if [ "$running" -ge "$jobs_max" ]; then
    wait -n || true
    running=$((running - 1))
  fi
  echo "== fuzz_$t for ${seconds}s"
  run_one "$t" &
  running=$((running + 1))
done
wait || true
failed=()
for t in "${targets[@]}"; do
  echo "== fuzz_$t"
  grep -E "^#[0-9]+.*DONE|stat::(number_of_executed_units|average_exec_per_sec)|ERROR|SUMMARY" \
    "$build/fuzz_$t.log" || true
  if [ "$(cat "$build/fuzz_$t.rc" 2>/dev/null)" != 0 ]; then
    failed+=("$t")
    tail -40 "$build/fuzz_$t.log"
  fi
done
if [ ${#failed[@]} != 0 ]; then
  echo "fuzz: findings in ${failed[*]} (inputs in $build/findings/)"
  exit 1
fi
echo "fuzz: ${#targets[@]} target(s) ran ${seconds}s each without a finding"
