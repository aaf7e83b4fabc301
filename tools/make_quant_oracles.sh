#!/bin/sh
# Regenerates the quantised references of tests/e2e/quant_oracle.py: the tiny qwen2 model made
# by `pith model gen` in each DTYPE (64-wide rows, so the K-quant mixes fall back to the 32-block
# types), and llama.cpp's logits of that file over one 12-token prompt. Needs the oracle venv of
# tools/README.md; never needed to build or test.
# Usage: tools/make_quant_oracles.sh BUILD_DIR [VENV]
set -eu
build=$1
venv=${2:-/work/oracle-venv}
out=tests/data/oracle/arch
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
tokens=1,312,943,697,361,137,785,400,512,33,640,877
for dtype in ${DTYPES:-q4_k_m q5_k_m q4_1}; do
  "$build/bin/pith" model gen --preset tiny --arch qwen2 --dtype "$dtype" --seed 5 \
    --vocab tests/data/models/tiny-f32.gguf -q -o "$tmp/qwen2-$dtype.gguf"
  "$venv/bin/python" tools/arch_oracle.py --gguf "$tmp/qwen2-$dtype.gguf" --tokens "$tokens" \
    --out "$out/qwen2-$dtype.llama-cpp.json"
done
