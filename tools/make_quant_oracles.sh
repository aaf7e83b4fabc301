#!/bin/sh
# Regenerates the quantised references of tests/e2e/quant_oracle.py: tiny models made by `pith
# model gen` in each DTYPE, and llama.cpp's logits of that file over one 12-token prompt. Needs the oracle venv of
# tools/README.md; never needed to build or test.
# Usage: tools/make_quant_oracles.sh BUILD_DIR [VENV]
set -eu
build=$1
venv=${2:-/work/oracle-venv}
out=tests/data/oracle/arch
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
tokens=1,312,943,697,361,137,785,400,512,33,640,877
# NAME PRESET ARCH DTYPES: the tiny qwen2 model (64-wide rows: the K-quant mixes fall back to the
# 32-block types, IQ4_XS to IQ4_NL), tiny256 Llama (256-wide rows: the mixes' own K-quant types)
# and tiny gpt-oss (GGUF-only family: f32 and its MXFP4 file type).
while read -r name preset arch dtypes; do
  for dtype in $dtypes; do
    "$build/bin/pith" model gen --preset "$preset" --arch "$arch" --dtype "$dtype" --seed 5 \
      --vocab tests/data/models/tiny-f32.gguf -q -o "$tmp/$name-$dtype.gguf"
    "$venv/bin/python" tools/arch_oracle.py --gguf "$tmp/$name-$dtype.gguf" --tokens "$tokens" \
      --out "$out/$name-$dtype.llama-cpp.json"
  done
done <<EOF
qwen2 tiny qwen2 ${QWEN2_DTYPES-q4_k_m q5_k_m q4_1 iq4_nl iq4_xs}
llama256 tiny256 llama ${LLAMA256_DTYPES-q2_k q3_k_m q4_k_m q6_k iq4_xs}
gpt-oss tiny gpt-oss ${GPT_OSS_DTYPES-f32 mxfp4_moe}
EOF
