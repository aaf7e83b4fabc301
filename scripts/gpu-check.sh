#!/usr/bin/env bash
# Every GPU check of the CUDA backend (issue 16, docs/gpu.md) in one script.
#
#   scripts/gpu-check.sh pack [BUILD]   on the build machine: BUILD (default: build, configured
#                                       with CUDA and built) -> BUILD/gpu-pack, a sparse copy of
#                                       the build tree (pith, the GPU test binaries, inferlets,
#                                       ctest files) plus the shared libraries the GPU machine
#                                       lacks, and BUILD/gpu-pack.tar.xz of it (the binaries carry
#                                       device code for two architectures: ~115 MB, ~22 MB packed)
#   scripts/gpu-check.sh pack-bench [BUILD]
#                                       BUILD/gpu-pack-bench.tar.xz: pith, its libraries, the
#                                       inferlets and the native tier's tools only (~13 MB), for
#                                       steps 7-9 in a call that also brings llama.cpp's tarball
#   scripts/gpu-check.sh pack-llama BIN [OUT.tar.xz]
#                                       llama.cpp's CUDA build folder BIN (llama-bench,
#                                       llama-server and their shared libraries) -> one tarball
#                                       (default llama-cuda.tar.xz beside BIN), for step 8's
#                                       LLAMA_CUDA_BIN (the folder or the tarball)
#   scripts/gpu-check.sh run [PACK]     on the GPU machine, from the source tree's root: every
#                                       check; PACK is the folder or the .tar.xz (unpacked beside
#                                       it); results in PACK/results, and where $OUT is set
#                                       (the GPU machine's tool, which returns 8 files at most)
#                                       summary.txt, timing.txt and results.tar.gz of them there;
#                                       GPU_CHECKS=1,2,... runs only those steps (default all);
#                                       PITH_CUDA_ATTENTION=pith puts every server and tool on
#                                       the own attention kernel (to tell a FlashInfer fault
#                                       from the rest's)
#   scripts/gpu-check.sh slim checks|bench / unslim
#                                       what travels to the GPU machine is capped at 64 MiB, the
#                                       tracked tree included (~57 MiB, mostly tokenizer test
#                                       vocabularies): slim leaves the current branch for a
#                                       detached commit without tests/data/tokenizer (checks) or
#                                       without tests/data (bench), the files it needs packed
#                                       into .gpu/data.tar.xz (ignored; name it in carry), which
#                                       run unpacks; unslim returns to the branch
#
# run does, writing one file per check, summary.txt (PASS/FAIL/SKIP per check) and timing.txt
# (when each step began):
#   1. ctest -L gpu (CUDA backend vs the CPU engine on the same batches), and the chunked delta
#      rule's kernel time against the recurrent one's (delta-rule-gpu.txt), the own attention
#      kernel's split-K decode against one split (attention-splits-gpu.txt), the own skinny GEMV
#      against cuBLASLt on the 1B shapes (gemv-gpu.txt), the experts' prefill GEMM on tensor
#      cores against its CUDA-core tiles (moe-gemm-gpu.txt)
#   2. compute-sanitizer --tool memcheck on the GPU unit tests, racecheck on the delta rule
#   3. pith logits --device cpu vs --device cuda on the oracle models (tests/data/models) and a
#      generated llama3.2-1b-shape BF16 model (FlashInfer's attention where built, and again
#      on the own kernel): top-1 agreement and max |dlogit|
#   4. the same 1B model as a Hugging Face folder: pith (cuda) vs transformers on the GPU; then
#      the other families the backend runs (qwen2.5-0.5b, qwen3-0.6b, gemma3-1b, qwen3.5-0.8b
#      shapes, BF16):
#      CPU vs CUDA on GGUF files and CUDA vs transformers on HF folders
#   5. the e2e suite (ctest -L e2e) on the CUDA backend (--device defaults
#      to cuda when a GPU is present)
#   6. per-step GPU time vs wall time of decode at batch 1, 8 and 64 on the 1B shape (CUDA events),
#      decode CUDA graphs on and off, the own GEMV allowed or not (the A/B of each); graphs on
#      and off at batch 1 and 64 on step 4b's qwen3.5-0.8b shape (hybrid: recurrent layers);
#      /v1/embeddings on the 1B shape, a CUDA server's vectors against a CPU server's (cosine)
#   7. only when GPU_CHECKS names it: pith bench paper on the 1B shape, Fig. 8 beside the CPU
#   8. only when GPU_CHECKS names it: issue 17's model numbers: pith bench model --device cuda on
#      the 1B, 3B and 8B shapes (BF16) against the decode floor (device-to-device bandwidth
#      measured in the same run), beside llama.cpp's CUDA llama-bench on the same file when
#      LLAMA_CUDA_BIN names a folder holding it, and for the 1B shape beside transformers'
#      generate on the same weights (an HF folder) and GPU; the per-op profile (CUDA events) of
#      the 1B shape; warm launch and forward dispatch at 1 000 inferlets; Table 4 (inferlet
#      TPOT vs a fused loop, 128 concurrent) at the 3B and 8B shapes;
#      with llama-server there too, 64 and 256 concurrent OpenAI streams on both servers
#   9. only when GPU_CHECKS names it: Nsight Compute's counters on the profiled decode forwards
#      (batch 1 and 32 on the 1B shape): per kernel time, DRAM traffic and rate
#      (tools/ncu_summary.py), against the copy bandwidth measured in the same run
# Exit status: 0 when every check passed, 1 otherwise.
set -uo pipefail

die() { echo "gpu-check: $*" >&2; exit 2; }
SRC=$(cd "$(dirname "$0")/.." && pwd)

# The build machine's commands (pack, pack-bench, pack-llama, slim, unslim).
source "$SRC/scripts/gpu-pack.sh"

# ---------------------------------------------------------------------------------------------
declare -a SUMMARY=()
FAILED=0
# Which steps run: GPU_CHECKS=1,2,3,4,4b,5,6 (the default: all), so a time-limited GPU machine can
# take them in two calls.
want() { [[ ,${GPU_CHECKS:-1,2,3,4,4b,5,6}, == *,$1,* ]]; }

# When each step began (timing.txt): what a time-limited GPU machine spent where.
stamp() {
  echo "$(date -u +%T) $*" >> "$OUT/timing.txt"
  publish
}

# Where the results go back from: the GPU machine returns at most 8 files from its $OUT, so the
# checks write into their own folder and, after every step and record, the summary so far, the
# step times and one tarball of everything land in DEST (a run killed at its time limit still
# returns what it had).
publish() {
  [[ -n ${DEST:-} ]] || return 0
  printf '%s\n' "${SUMMARY[@]}" > "$DEST/summary.txt"
  cp "$OUT/timing.txt" "$DEST/timing.txt" 2> /dev/null
  tar -czf "$DEST/results.tar.gz.part" -C "$(dirname "$OUT")" "$(basename "$OUT")" 2> /dev/null &&
    mv "$DEST/results.tar.gz.part" "$DEST/results.tar.gz"
}

# Between steps too, every SECONDS: the logs so far of a step that the machine's time limit cuts
# off come back with the rest (its own part file: the two writers never share one).
publish_while_running() {
  [[ -n ${DEST:-} ]] || return 0
  # A TERM waits for a tarball being written, never for the sleep (stop_publishing).
  ( trap 'exit 0' TERM
    while :; do
      sleep "$1" &
      wait $!
      tar -czf "$DEST/results.tar.gz.bg" -C "$(dirname "$OUT")" "$(basename "$OUT")" 2> /dev/null &&
        mv "$DEST/results.tar.gz.bg" "$DEST/results.tar.gz"
    done ) &
  PUBLISHER=$!
}

stop_publishing() {
  [[ -n ${PUBLISHER:-} ]] || return 0
  kill "$PUBLISHER" 2> /dev/null
  wait "$PUBLISHER" 2> /dev/null
  rm -f "$DEST/results.tar.gz.bg"
  PUBLISHER=
}

# Whether a profiler or sanitizer's output (FILE) says the machine refused the tool itself (on
# the gVisor runtime compute-sanitizer answers "Device not supported" and ncu cannot load its
# profiling library): a check that could not run there, recorded as SKIP with the tool's words
# in REFUSAL, not as a failure of pith's code.
refused() {
  REFUSAL=$(grep -m1 -E 'Device not supported|Failed to initialize the profiler|LibraryNotLoaded|ERR_NVGPUCTRPERM' "$1") ||
    return 1
  REFUSAL="the machine refused the tool: ${REFUSAL//$'\r'/}"
}

record() {  # name status detail
  # A check running in the background (a subshell) hands its records to the parent in a file.
  if [[ -n ${RECORD_TO:-} ]]; then
    printf '%s\t%s\t%s\n' "$1" "$2" "${3//$'\n'/ }" >> "$RECORD_TO"
    return
  fi
  SUMMARY+=("$(printf '%-28s %-5s %s' "$1" "$2" "$3")")
  [[ $2 == FAIL ]] && FAILED=1
  echo "gpu-check: $1: $2 $3"
  publish
}

run() {
  local pack=${1:-build/gpu-pack}
  if [[ $pack == *.tar.xz ]]; then
    [[ -f $pack ]] || die "no $pack"
    tar -xJf "$pack" -C "$(dirname "$pack")" || die "cannot unpack $pack"
    pack=$(dirname "$pack")/gpu-pack
  fi
  pack=$(cd "$pack" && pwd) || die "no pack folder $pack (make one with: $0 pack)"
  [[ -f $pack/ORIGIN ]] || die "$pack is not a gpu-pack (no ORIGIN)"
  # A slim tree (slim above) brought its test data packed: unpack what is missing.
  if [[ -f $SRC/.gpu/data.tar.xz ]]; then
    python3 -c '
import sys, tarfile
with tarfile.open(sys.argv[1]) as t:
    try:
        t.extractall(sys.argv[2], filter="data")
    except TypeError:  # a Python without extraction filters
        t.extractall(sys.argv[2])' "$SRC/.gpu/data.tar.xz" "$SRC" ||
      die "cannot unpack $SRC/.gpu/data.tar.xz"
  fi
  # $OUT, where the GPU machine's tool collects files (at most 8 come back), becomes DEST.
  DEST=${OUT:-}
  OUT=$pack/results
  rm -rf "$OUT"
  mkdir -p "$OUT" ${DEST:+"$DEST"}
  publish_while_running "${GPU_PUBLISH_S:-60}"
  trap stop_publishing EXIT
  local work
  work=$(mktemp -d /tmp/pith-gpu-check.XXXXXX)

  # Paths inside the ctest files point at the build machine: rewrite them to this machine once.
  # shellcheck disable=SC1091
  local orig_build orig_src orig_venv
  orig_build=$(sed -n 's/^BUILD=//p' "$pack/ORIGIN")
  orig_src=$(sed -n 's/^SRC=//p' "$pack/ORIGIN")
  orig_venv=$(sed -n 's/^VENV=//p' "$pack/ORIGIN")
  local python=python3
  [[ -x /opt/torch/.venv/bin/python ]] && python=/opt/torch/.venv/bin/python
  # The SDK test's venv: the carried wheels in a folder of the pack, and an interpreter that is
  # this machine's python3 with that folder first on its path (torch's own steps never see it).
  local sdk=$pack/sdk-venv
  if [[ -d $pack/wheels && ! -x $sdk/bin/python ]]; then
    if $python -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target \
         "$pack/sdk-site" "$pack"/wheels/*.whl > "$pack/sdk-install.txt" 2>&1; then
      mkdir -p "$sdk/bin"
      printf '#!/bin/sh\nPYTHONPATH=%s${PYTHONPATH:+:$PYTHONPATH} exec %s "$@"\n' \
        "$pack/sdk-site" "$python" > "$sdk/bin/python"
      chmod +x "$sdk/bin/python"
    else
      echo "gpu-check: the SDK test's wheels did not install (see $pack/sdk-install.txt)" >&2
    fi
  fi
  local new_venv=$orig_venv
  [[ -x $sdk/bin/python ]] && new_venv=$sdk
  if [[ $orig_build != "$pack" || $orig_venv != "$new_venv" ]]; then
    local edits=(-e "s#$orig_build#$pack#g" -e "s#$orig_src#$SRC#g")
    [[ -n $orig_venv ]] && edits+=(-e "s#$orig_venv/bin/python#$new_venv/bin/python#g")
    find "$pack" \( -name CTestTestfile.cmake -o -name '*_include.cmake' -o -name '*_tests.cmake' \) \
      -exec sed -i "${edits[@]}" {} +
    sed -i -e "s#^BUILD=.*#BUILD=$pack#" -e "s#^SRC=.*#SRC=$SRC#" -e "s#^VENV=.*#VENV=$new_venv#" \
      "$pack/ORIGIN"
  fi
  # The native tier's tools: the build machine's paths where this machine has them, else the
  # packed wasm2c and wasm-rt.h and this machine's C compiler.
  local built_wasm2c built_cc
  built_wasm2c=$(sed -n 's/^WASM2C=//p' "$pack/ORIGIN")
  built_cc=$(sed -n 's/^CC=//p' "$pack/ORIGIN")
  if [[ ! -x $built_wasm2c && -x $pack/toolchain/bin/wasm2c ]]; then
    export PITH_WASM2C=$pack/toolchain/bin/wasm2c
  fi
  if [[ ! -f /usr/include/wasm-rt.h && -d $pack/toolchain/include ]]; then
    export CPATH=$pack/toolchain/include${CPATH:+:$CPATH}
  fi
  if [[ -n $built_cc && ! -x $built_cc ]]; then
    PITH_CC=$(command -v cc || command -v gcc || command -v clang) && export PITH_CC
  fi

  local cublas_dirs=/usr/local/cuda/lib64
  for d in /opt/torch/.venv/lib/python3*/site-packages/nvidia/cublas/lib; do
    [[ -d $d ]] && cublas_dirs=$cublas_dirs:$d
  done
  export LD_LIBRARY_PATH=$pack/lib:$cublas_dirs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  export PITH_TEST_DATA=$SRC/tests/data
  # As make test-gpu: a GPU test that finds no device fails instead of reporting itself skipped,
  # and every e2e server runs on the CUDA backend by name, not by auto-detection.
  export PITH_REQUIRE_GPU=1 PITH_TEST_DEVICE=cuda
  export PATH=$PATH:/usr/local/cuda/bin
  local pith=$pack/bin/pith

  { nvidia-smi; echo; git -C "$SRC" log -1 --format='commit %H %s' 2>/dev/null; date -u
    echo "PITH_CUDA_ATTENTION=${PITH_CUDA_ATTENTION:-auto}"; } > "$OUT/machine.txt" 2>&1
  if ! nvidia-smi -L > /dev/null 2>&1; then
    echo "gpu-check: no GPU here (nvidia-smi failed); nothing to check" >&2
    exit 2
  fi

  # What steps 3, 4, 4b and 6 share: the prompt and the generated Llama-3.2-1B-shape model.
  local vocab=$SRC/tests/data/tokenizer/ggml-vocab-llama-bpe.gguf
  local prompt
  prompt=$(head -c 1500 "$SRC/docs/architecture.md" | tr '\n"' '  ')
  if want 3 || want 6 || want 7 || want 8; then
    stamp "0 generate the 1B model"
    "$pith" model gen --preset llama3.2-1b --dtype bf16 --vocab "$vocab" --seed 16 -q \
      -o "$work/llama3.2-1b-bf16.gguf" > "$OUT/gen-1b.txt" 2>&1 || record gen-1b FAIL "see gen-1b.txt"
  fi

  compare_devices() {  # label model mode args...
    local label=$1 model=$2 mode=$3
    shift 3
    if "$pith" logits -m "$model" "$@" --top 50 --json --device cpu > "$OUT/logits-$label-cpu.json" \
         2> "$OUT/logits-$label-cpu.err" &&
       "$pith" logits -m "$model" "$@" --top 50 --json --device cuda > "$OUT/logits-$label-cuda.json" \
         2> "$OUT/logits-$label-cuda.err"; then
      local line
      if line=$($python "$SRC/tools/compare_logits.py" "$OUT/logits-$label-cpu.json" \
                  "$OUT/logits-$label-cuda.json" --tol-mode "$mode" --label "$label" \
                  --out "$OUT/logits-$label.result.json"); then
        record "logits-$label" PASS "$line"
      else
        record "logits-$label" FAIL "$line"
      fi
    else
      record "logits-$label" FAIL "pith logits failed, see logits-$label-*.err"
    fi
  }

  # 1. GPU unit tests.
  if want 1; then
    stamp "1 ctest -L gpu"
    # The four executables side by side (one GPU holds them all; their timings are rerun alone).
    if ctest --test-dir "$pack" -L gpu -j4 --output-on-failure > "$OUT/ctest-gpu.txt" 2>&1; then
      record ctest-gpu PASS "$(grep -E 'tests passed' "$OUT/ctest-gpu.txt" | tail -1)"
    else
      record ctest-gpu FAIL "see ctest-gpu.txt"
    fi
    # The chunked delta rule's time against the recurrent kernel's (one JSON line per case).
    if "$pack/tests/gpu/delta_rule_gpu_test" --gtest_filter='*Times*' > "$OUT/delta-rule-gpu.txt" 2>&1; then
      record delta-rule-gpu PASS "$(grep -o '"delta_rule_gpu":"[^"]*"\|"speedup":[0-9.]*' "$OUT/delta-rule-gpu.txt" | tr '\n' ' ')"
    else
      record delta-rule-gpu FAIL "see delta-rule-gpu.txt"
    fi
    # The experts' prefill GEMM on tensor cores against its CUDA-core tiles (Qwen3-30B-A3B's
    # gate/up shape, a 512-token chunk; one JSON line).
    if "$pack/tests/gpu/cuda_kernels_test" --gtest_filter='*MoeExpertGemmTiming*' > "$OUT/moe-gemm-gpu.txt" 2>&1; then
      record moe-gemm-gpu PASS "$(grep -o '"tiles_ms":[0-9.]*\|"tensor_cores_ms":[0-9.]*\|"tensor_cores_tflop_s":[0-9.]*\|"speedup":[0-9.]*' "$OUT/moe-gemm-gpu.txt" | tr '\n' ' ')"
    else
      record moe-gemm-gpu FAIL "see moe-gemm-gpu.txt"
    fi
    # The own attention kernel's decode with split-K against one split (and FlashInfer's).
    # The own GEMV's time against cuBLASLt's on the 1B shapes, cold L2 (one JSON line per shape).
    if "$pack/tests/gpu/gemm_gpu_test" --gtest_filter='*Times*' > "$OUT/gemv-gpu.txt" 2>&1; then
      record gemv-gpu PASS "$(grep -o '"gemv_gpu":"[^"]*"\|"n":[0-9]*\|"speedup":[0-9.]*' "$OUT/gemv-gpu.txt" | tr '\n' ' ')"
    else
      record gemv-gpu FAIL "see gemv-gpu.txt"
    fi
    if "$pack/tests/gpu/paged_attention_gpu_test" --gtest_filter='*Times*' > "$OUT/attention-splits-gpu.txt" 2>&1; then
      record attention-splits-gpu PASS "$(grep -o '"attention_gpu":"[^"]*"\|"speedup":[0-9.]*\|"partials_speedup":[0-9.]*' "$OUT/attention-splits-gpu.txt" | tr '\n' ' ')"
    else
      record attention-splits-gpu FAIL "see attention-splits-gpu.txt"
    fi
  fi

  # 2. memcheck on the GPU unit tests (the backend test on the tiny models only: memcheck is slow).
  if want 2; then
    stamp "2 compute-sanitizer"
    if command -v compute-sanitizer > /dev/null; then
      # The six executables side by side (each under its own sanitizer process: the wall time
      # is the slowest one's, not the sum), then the race check.
      local t filter rc
      local tests=(cuda_backend_test cuda_hybrid_test cuda_kernels_test paged_attention_gpu_test
                   delta_rule_gpu_test gemm_gpu_test)
      for t in "${tests[@]}"; do
        filter='*'
        [[ $t == cuda_backend_test ]] &&
          filter='*tiny_f32*:*tiny_bf16*:CudaTopK.*:CudaBackendStartup.*'
        [[ $t == delta_rule_gpu_test ]] && filter='*Matches*'
        [[ $t == paged_attention_gpu_test || $t == gemm_gpu_test ]] && filter='*:-*Times*'
        [[ $t == cuda_kernels_test ]] && filter='*:-*Timing*'  # the MoE timing's 0.8 GB of experts
        (compute-sanitizer --tool memcheck --error-exitcode 3 "$pack/tests/gpu/$t" \
           --gtest_filter="$filter" > "$OUT/memcheck-$t.txt" 2>&1
         echo $? > "$OUT/memcheck-$t.rc") &
      done
      # Shared-memory races of the block-phased kernels (the chunked delta rule's five phases).
      compute-sanitizer --tool racecheck --error-exitcode 3 "$pack/tests/gpu/delta_rule_gpu_test" \
        --gtest_filter='*Matches*' > "$OUT/racecheck-delta_rule.txt" 2>&1
      rc=$?
      wait
      for t in "${tests[@]}"; do
        if [[ $(cat "$OUT/memcheck-$t.rc" 2> /dev/null) == 0 ]]; then
          record "memcheck-$t" PASS "$(grep 'ERROR SUMMARY' "$OUT/memcheck-$t.txt" | tail -1)"
        elif refused "$OUT/memcheck-$t.txt"; then
          record "memcheck-$t" SKIP "$REFUSAL"
        else
          record "memcheck-$t" FAIL "exit $(cat "$OUT/memcheck-$t.rc" 2> /dev/null), see memcheck-$t.txt"
        fi
      done
      if [[ $rc != 0 ]] && refused "$OUT/racecheck-delta_rule.txt"; then
        record racecheck-delta_rule SKIP "$REFUSAL"
      elif [[ $rc == 0 ]]; then
        record racecheck-delta_rule PASS "$(grep 'RACECHECK SUMMARY' "$OUT/racecheck-delta_rule.txt" | tail -1)"
      else
        record racecheck-delta_rule FAIL "exit $rc, see racecheck-delta_rule.txt"
      fi
    else
      record memcheck FAIL "compute-sanitizer not found"
    fi
  fi

  # 3. pith logits, CPU vs CUDA.
  if want 3; then
    stamp "3 logits cpu vs cuda"
    local m
    for m in tiny-f32:f32 tiny-untied-f32:f32 tiny-bf16:bf16 tiny-q8_0:bf16; do
      local name=${m%%:*} mode=${m##*:}
      local toks
      toks=$($python -c "import json,sys; print(','.join(map(str, json.load(open(sys.argv[1]))['tokens'])))" \
               "$SRC/tests/data/oracle/$name.long.json")
      compare_devices "$name" "$SRC/tests/data/models/$name.gguf" "$mode" --tokens "$toks" --no-bos
    done
    if [[ -f $work/llama3.2-1b-bf16.gguf ]]; then
      compare_devices llama3.2-1b-bf16 "$work/llama3.2-1b-bf16.gguf" bf16 --prompt "$prompt"
      # Again on the own attention kernel (FlashInfer runs the line above where it is built).
      compare_devices llama3.2-1b-bf16-own "$work/llama3.2-1b-bf16.gguf" bf16 --prompt "$prompt" \
        --cuda-attention pith
    fi
  fi

  # 4. The HF folder of the same model: pith (cuda) vs transformers.
  if want 4; then
    stamp "4 hf vs transformers"
    if "$pith" model gen --preset llama3.2-1b --dtype bf16 --format hf --vocab "$vocab" --seed 16 -q \
         -o "$work/llama3.2-1b-hf" > "$OUT/gen-1b-hf.txt" 2>&1 &&
       "$pith" logits -m "$work/llama3.2-1b-hf" --prompt "$prompt" --top 50 --json --device cuda \
         > "$OUT/logits-hf-cuda.json" 2> "$OUT/logits-hf-cuda.err"; then
      local toks
      toks=$($python -c "import json,sys; print(','.join(map(str, json.load(open(sys.argv[1]))['tokens'])))" \
               "$OUT/logits-hf-cuda.json")
      if $python "$SRC/tools/hf_logits_reference.py" "$work/llama3.2-1b-hf" --tokens "$toks" --top 50 \
           > "$OUT/logits-hf-transformers.json" 2> "$OUT/logits-hf-transformers.err"; then
        local line
        if line=$($python "$SRC/tools/compare_logits.py" "$OUT/logits-hf-transformers.json" \
                    "$OUT/logits-hf-cuda.json" --tol-mode bf16 --label hf-vs-transformers \
                    --out "$OUT/logits-hf.result.json"); then
          record hf-vs-transformers PASS "$line"
        else
          record hf-vs-transformers FAIL "$line"
        fi
      else
        record hf-vs-transformers FAIL "transformers run failed, see logits-hf-transformers.err"
      fi
    else
      record hf-vs-transformers FAIL "gen or pith logits failed, see gen-1b-hf.txt / logits-hf-cuda.err"
    fi
  fi

  # 4b. The other families (docs/gpu.md "Families"): GGUF CPU vs CUDA, HF CUDA vs transformers,
  #     the four side by side (the GPU holds them all; their records go through files).
  family_check() {  # preset
    local preset=$1 qvocab
    qvocab=$SRC/tests/data/tokenizer/ggml-vocab-qwen2.gguf
    [[ $preset == qwen3.5-* ]] && qvocab=$SRC/tests/data/tokenizer/ggml-vocab-qwen35.gguf
    if "$pith" model gen --preset "$preset" --dtype bf16 --vocab "$qvocab" --seed 16 -q \
         -o "$work/$preset.gguf" > "$OUT/gen-$preset.txt" 2>&1; then
      compare_devices "$preset-bf16" "$work/$preset.gguf" bf16 --prompt "$prompt"
    else
      record "logits-$preset-bf16" FAIL "gen failed, see gen-$preset.txt"
    fi
    if "$pith" model gen --preset "$preset" --dtype bf16 --format hf --vocab "$qvocab" --seed 16 \
         -q -o "$work/$preset-hf" > "$OUT/gen-$preset-hf.txt" 2>&1 &&
       "$pith" logits -m "$work/$preset-hf" --prompt "$prompt" --top 50 --json --device cuda \
         > "$OUT/logits-$preset-hf-cuda.json" 2> "$OUT/logits-$preset-hf-cuda.err"; then
      local toks="" line=""
      toks=$($python -c "import json,sys; print(','.join(map(str, json.load(open(sys.argv[1]))['tokens'])))" \
               "$OUT/logits-$preset-hf-cuda.json")
      if $python "$SRC/tools/hf_logits_reference.py" "$work/$preset-hf" --tokens "$toks" --top 50 \
           > "$OUT/logits-$preset-hf-transformers.json" 2> "$OUT/logits-$preset-hf-transformers.err" &&
         line=$($python "$SRC/tools/compare_logits.py" "$OUT/logits-$preset-hf-transformers.json" \
                  "$OUT/logits-$preset-hf-cuda.json" --tol-mode bf16 --label "$preset-hf-vs-transformers" \
                  --out "$OUT/logits-$preset-hf.result.json"); then
        record "$preset-hf-vs-transformers" PASS "$line"
      else
        record "$preset-hf-vs-transformers" FAIL "${line:-transformers failed, see logits-$preset-hf-transformers.err}"
      fi
    else
      record "$preset-hf-vs-transformers" FAIL "gen or pith logits failed, see gen-$preset-hf.txt"
    fi
  }
  if want 4b; then
    stamp "4b families"
    local preset
    for preset in qwen2.5-0.5b qwen3-0.6b gemma3-1b qwen3.5-0.8b; do
      rm -f "$OUT/records-$preset.tsv"
      (RECORD_TO=$OUT/records-$preset.tsv family_check "$preset") &
    done
    wait
    for preset in qwen2.5-0.5b qwen3-0.6b gemma3-1b qwen3.5-0.8b; do
      local name status detail
      if [[ ! -f $OUT/records-$preset.tsv ]]; then
        record "family-$preset" FAIL "its check recorded nothing"
        continue
      fi
      while IFS=$'\t' read -r name status detail; do
        record "$name" "$status" "$detail"
      done < "$OUT/records-$preset.tsv"
    done
  fi

  # 5. e2e suite on the CUDA backend.
  if want 5; then
    stamp "5 ctest -L e2e"
    # Two tests build an inferlet from C++ while they run (clang-14 for wasm32-wasi and
    # wasi-libc, which the GPU machine's image lacks): left out there, and said so.
    local exclude=()
    if ! { command -v clang++-14 > /dev/null && [[ -d /usr/include/wasm32-wasi ]]; }; then
      exclude=(-LE wasm_toolchain)
      record e2e-wasm-toolchain SKIP "$(ctest --test-dir "$pack" -N -L wasm_toolchain |
        sed -n 's/.*Test *#[0-9]*: //p' | tr '\n' ' ')left out: no clang-14 / wasi-libc here"
    fi
    # Eight at a time: each server holds a 512 MiB KV pool, the GPU has room for all of them.
    if ctest --test-dir "$pack" -L e2e "${exclude[@]}" -j8 --output-on-failure \
         > "$OUT/ctest-e2e.txt" 2>&1; then
      record e2e PASS "$(grep -E 'tests passed' "$OUT/ctest-e2e.txt" | tail -1)"
    else
      record e2e FAIL "$(grep -E 'tests passed|tests failed' "$OUT/ctest-e2e.txt" | tail -1), see ctest-e2e.txt"
    fi
  fi

  # 6. Per-step GPU vs wall time at batch 1 and 64 on the 1B shape, decode CUDA graphs on and off.
  if want 6; then
    stamp "6 step timing"
    if [[ -f $work/llama3.2-1b-bf16.gguf ]] &&
       "$pack/tests/gpu/cuda_step_timing" "$work/llama3.2-1b-bf16.gguf" --batch 1,8,64 --prompt 128 \
         --steps 32 > "$OUT/step-timing.json" 2> "$OUT/step-timing.err"; then
      record step-timing PASS "$(cat "$OUT/step-timing.json")"
    else
      record step-timing FAIL "see step-timing.err"
    fi
    # The hybrid 0.8B shape (step 4b's model): its decode graphs hold the recurrent layers too.
    if [[ -f $work/qwen3.5-0.8b.gguf ]]; then
      if "$pack/tests/gpu/cuda_step_timing" "$work/qwen3.5-0.8b.gguf" --batch 1,64 --prompt 128 \
           --steps 32 --gemv 1 > "$OUT/step-timing-qwen35.json" 2> "$OUT/step-timing-qwen35.err"; then
        record step-timing-qwen35 PASS "$(cat "$OUT/step-timing-qwen35.json")"
      else
        record step-timing-qwen35 FAIL "see step-timing-qwen35.err"
      fi
    fi
    # /v1/embeddings on the GPU (the model's Hidden output beside the LM head): a CUDA server's
    # vectors for the 1B shape against a CPU server's on the same file (cosine; BF16 activations
    # on the GPU), and batched requests against one input per request.
    if [[ -f $work/llama3.2-1b-bf16.gguf ]]; then
      local eport=18171 epid
      "$pith" serve -m "$work/llama3.2-1b-bf16.gguf" --device cpu --port $eport \
        > "$OUT/embeddings-cpu-server.log" 2>&1 &
      epid=$!
      for _ in $(seq 120); do
        $python -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=2)' \
          "http://127.0.0.1:$eport/health" > /dev/null 2>&1 && break
        sleep 1
      done
      if "$pith" bench embeddings -m "$work/llama3.2-1b-bf16.gguf" --device cuda \
           --against "http://127.0.0.1:$eport" --inputs 32 --batch 8 --words 50 --rounds 1 \
           --json > "$OUT/bench-embeddings.txt" 2>&1 &&
         tail -1 "$OUT/bench-embeddings.txt" | $python -c '
import json, sys
j = json.loads(sys.stdin.read())
print("cosine vs cpu min %.5f mean %.5f; cuda batched %.1f inputs/s, one by one %.1f (%.2fx)" % (
    j["min_cosine_vs_against"], j["mean_cosine_vs_against"], j["batched_inputs_per_s"],
    j["one_by_one_inputs_per_s"], j["batched_vs_one_by_one"]))
sys.exit(0 if j["min_cosine_vs_against"] > 0.98 else 1)' > "$OUT/embeddings-summary.txt"; then
        record embeddings-cuda PASS "$(cat "$OUT/embeddings-summary.txt")"
      else
        record embeddings-cuda FAIL "$(cat "$OUT/embeddings-summary.txt" 2> /dev/null) see bench-embeddings.txt"
      fi
      kill "$epid" 2> /dev/null
      wait "$epid" 2> /dev/null
    fi
  fi

  # 7. The paper's evaluation on the GPU, Fig. 8 beside the CPU backend (not in the default
  #    set: minutes of GPU time; GPU_CHECKS=7 or ...,7).
  if want 7; then
    stamp "7 bench paper"
    if "$pith" bench paper -m "$work/llama3.2-1b-bf16.gguf" --out "$OUT/paper" --device cuda \
         --against-device cpu --runs 1 --inferlets "$pack/inferlets" > "$OUT/paper.txt" 2>&1; then
      record paper PASS "see paper/paper.json and paper/*.svg"
    else
      record paper FAIL "see paper.txt"
    fi
  fi

  # 8. Issue 17's model numbers (not in the default set: minutes of GPU time, and the 8B shape
  #    is a 16 GB file).
  if want 8; then
    stamp "8 bench model"
    local lb=()
    if [[ ${LLAMA_CUDA_BIN:-} == *.tar.xz && -f $LLAMA_CUDA_BIN ]]; then
      tar -xJf "$LLAMA_CUDA_BIN" -C "$work" && LLAMA_CUDA_BIN=$work/llama-cuda
    fi
    if [[ -n ${LLAMA_CUDA_BIN:-} && -x $LLAMA_CUDA_BIN/llama-bench ]]; then
      lb=(--llama-bench "$LLAMA_CUDA_BIN/llama-bench")
      export LD_LIBRARY_PATH=$LLAMA_CUDA_BIN:$LD_LIBRARY_PATH  # its libggml*, libllama
    fi
    local preset f extra
    for preset in llama3.2-1b llama3.2-3b llama3.1-8b; do
      f=$work/$preset-bf16.gguf
      if [[ ! -f $f ]] &&
         ! "$pith" model gen --preset "$preset" --dtype bf16 --vocab "$vocab" --seed 16 -q -o "$f"              > "$OUT/gen-$preset.txt" 2>&1; then
        record "bench-$preset" FAIL "gen failed, see gen-$preset.txt"
        continue
      fi
      extra=()
      if [[ $preset == llama3.2-1b ]]; then
        extra=(--profile --profile-context 512)
        # A Python user's baseline on the same weights: transformers' generate on the GPU.
        if [[ -d $work/llama3.2-1b-hf ]] ||
           "$pith" model gen --preset llama3.2-1b --dtype bf16 --format hf --vocab "$vocab" \
             --seed 16 -q -o "$work/llama3.2-1b-hf" > "$OUT/gen-1b-hf.txt" 2>&1; then
          extra+=(--transformers "$python" --transformers-model "$work/llama3.2-1b-hf")
        fi
      fi
      stamp "8 bench model $preset"
      if "$pith" bench model -m "$f" --device cuda --batch 1,16,64,256 --batch-steps 32 \
           "${lb[@]}" "${extra[@]}" --json > "$OUT/bench-$preset.txt" 2>&1; then
        record "bench-$preset" PASS "$(tail -1 "$OUT/bench-$preset.txt" | $python -c '
import json, sys
j = json.load(sys.stdin)
out = "tg %.0f tok/s = %.2f of the floor (%.0f GB/s), pp512 %.0f tok/s" % (
    j["tg_tok_s"], j["tg_over_floor"], j["bandwidth_gb_s"], j["pp_tok_s"])
if "llama_cpp" in j:
    out += ", vs llama.cpp: tg %.2fx pp %.2fx" % (j["tg_vs_llama_cpp"], j["pp_vs_llama_cpp"])
if "transformers" in j:
    out += ", vs transformers: tg %.2fx pp %.2fx batch %s" % (
        j["tg_vs_transformers"], j["pp_vs_transformers"],
        " ".join("%s:%.1fx" % kv for kv in j["batch_vs_transformers"].items()))
elif "transformers_error" in j:
    out += ", transformers failed (see the file)"
print(out)')"
      else
        record "bench-$preset" FAIL "see bench-$preset.txt"
      fi
      # Launch and dispatch at 1 000 inferlets on this machine (issue 17: warm launch p50 <= 1
      # ms, forward dispatch overhead <= 20 us): inferlet launches with 1 000 instances resident,
      # and the wall time outside the GPU's forwards per forward call with 1 000 concurrent
      # text-completion inferlets on the 1B shape.
      if [[ $preset == llama3.2-1b ]]; then
        stamp "8 launch and dispatch at 1000"
        if "$pith" bench launch --inferlets "$pack/inferlets" --instances 1000 --json \
             > "$OUT/launch-1000.txt" 2>&1 &&
           "$pith" bench overhead -m "$f" --device cuda --instances 1000 --decode-tokens 32 \
             --runs 1 --inferlets "$pack/inferlets" --json > "$OUT/overhead-1000.txt" 2>&1; then
          record launch-dispatch-1000 PASS "$( (tail -1 "$OUT/launch-1000.txt";
                                               tail -1 "$OUT/overhead-1000.txt") | $python -c '
import json, sys
launch, over = (json.loads(l) for l in sys.stdin.read().splitlines())
print("warm launch p50 %.3f ms (p99 %.3f), 1000 instances started in %.0f ms; forward dispatch "
      "%.1f us per call at 1000 (mean batch %.0f)" % (
    launch["warm_p50_ms"], launch["warm_p99_ms"], launch["instances_start_ms"],
    over["forward_call_us"], over["mean_batch"]))')"
        else
          record launch-dispatch-1000 FAIL "see launch-1000.txt, overhead-1000.txt"
        fi
      fi
      # Table 4 at the larger shapes (the 1B shape's is in step 7's paper run): the
      # text-completion inferlet's TPOT beside a fused C++ greedy loop, 128 concurrent.
      if [[ $preset != llama3.2-1b ]]; then
        stamp "8 table 4 $preset"
        if "$pith" bench overhead -m "$f" --device cuda --instances 128 --decode-tokens 32 \
             --runs 1 --inferlets "$pack/inferlets" --json > "$OUT/overhead-$preset.txt" 2>&1; then
          record "table4-$preset" PASS "$(tail -1 "$OUT/overhead-$preset.txt" | $python -c '
import json, sys
j = json.load(sys.stdin)
print("TPOT inferlet %.3f ms vs fused %.3f ms: %+.1f%%, forward call %.1f us" % (
    j["tpot_inferlet_ms"], j["tpot_fused_ms"], j["overhead_pct"], j["forward_call_us"]))')"
        else
          record "table4-$preset" FAIL "see overhead-$preset.txt"
        fi
      fi
      [[ $preset == llama3.2-1b ]] || rm -f "$f"
    done
    # Serving: 64 and 256 concurrent streaming completions (distinct ~256-token prompts, 256
    # generated tokens) on pith and on llama-server -np 256, interleaved, same file and GPU.
    if [[ -n ${LLAMA_CUDA_BIN:-} && -x $LLAMA_CUDA_BIN/llama-server ]]; then
      stamp "8 bench serving"
      local port=18170 lpid
      "$LLAMA_CUDA_BIN/llama-server" -m "$work/llama3.2-1b-bf16.gguf" -ngl 999 -np 256 \
        -c $((256 * 600)) --port $port > "$OUT/llama-server.log" 2>&1 &
      lpid=$!
      for _ in $(seq 120); do
        $python -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=2)' \
          "http://127.0.0.1:$port/health" > /dev/null 2>&1 && break
        sleep 1
      done
      if "$pith" bench serving -m "$work/llama3.2-1b-bf16.gguf" --device cuda --kv-memory 8G \
           --against "http://127.0.0.1:$port" --concurrency 64,256 --prompt-words 220 \
           --max-tokens 256 --rounds 1 --json > "$OUT/bench-serving.txt" 2>&1; then
        record bench-serving PASS "see bench-serving.txt"
      else
        record bench-serving FAIL "see bench-serving.txt, llama-server.log"
      fi
      kill "$lpid" 2> /dev/null
      wait "$lpid" 2> /dev/null
    fi
  fi

  # 9. Where a decode step's GPU time goes by hardware counters (issue 17's ncu profile): Nsight
  #    Compute on the profiled forwards of `pith bench model --profile` (the backend brackets
  #    them with cudaProfilerStart/Stop), at batch 1 and 32 after 512 tokens of context, each
  #    kernel's time and DRAM traffic against the copy bandwidth measured in the same run.
  if want 9; then
    stamp "9 ncu"
    local f=$work/llama3.2-1b-bf16.gguf ncu_bin case bw
    ncu_bin=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2> /dev/null | tail -1)
    if [[ -z $ncu_bin ]]; then
      record ncu SKIP "no ncu on this machine"
    elif [[ ! -f $f ]] &&
         ! "$pith" model gen --preset llama3.2-1b --dtype bf16 --vocab "$vocab" --seed 16 -q -o "$f" \
             > "$OUT/gen-1b-ncu.txt" 2>&1; then
      record ncu FAIL "gen failed, see gen-1b-ncu.txt"
    else
      for case in decode_b1 decode_b32; do
        stamp "9 ncu $case"
        if "$ncu_bin" --clock-control none --profile-from-start off --target-processes all \
             --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__throughput.avg.pct_of_peak_sustained_elapsed \
             -f -o "$OUT/ncu-$case" \
             "$pith" bench model -m "$f" --device cuda -p 16 -n 4 -r 2 --profile \
               --profile-context 512 --profile-cases "$case" --json \
             > "$OUT/ncu-$case.txt" 2>&1 &&
           "$ncu_bin" --import "$OUT/ncu-$case.ncu-rep" --csv --page raw \
             > "$OUT/ncu-$case.csv" 2>> "$OUT/ncu-$case.txt"; then
          bw=$(grep '^{' "$OUT/ncu-$case.txt" | tail -1 |
               $python -c 'import json, sys; print(json.load(sys.stdin)["bandwidth_gb_s"])')
          if $python "$SRC/tools/ncu_summary.py" "$OUT/ncu-$case.csv" --forwards 2 \
               --bandwidth-gb-s "${bw:-0}" --json "$OUT/ncu-$case.json" \
               > "$OUT/ncu-$case-summary.txt" 2>&1; then
            record "ncu-$case" PASS "$(tail -1 "$OUT/ncu-$case-summary.txt")"
          else
            record "ncu-$case" FAIL "see ncu-$case-summary.txt"
          fi
        elif refused "$OUT/ncu-$case.txt"; then
          record "ncu-$case" SKIP "$REFUSAL"
        else
          record "ncu-$case" FAIL "see ncu-$case.txt"
        fi
      done
    fi
  fi

  stamp "end"
  stop_publishing
  printf '%s\n' "${SUMMARY[@]}" | tee "$OUT/summary.txt"
  publish
  rm -rf "$work"
  exit $FAILED
}

case ${1:-} in
  slim) shift; slim "$@" ;;
  unslim) unslim ;;
  pack) shift; pack "$@" ;;
  pack-bench) shift; pack "${1:-build}" bench ;;
  pack-llama) shift; pack_llama "$@" ;;
  run) shift; run "$@" ;;
  *) echo "usage: $0 pack [BUILD] | pack-bench [BUILD] | pack-llama BIN [OUT.tar.xz] | run [PACK]" \
          "| slim checks|bench | unslim" >&2
     exit 2 ;;
esac
