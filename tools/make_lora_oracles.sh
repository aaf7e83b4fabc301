#!/bin/sh
# Regenerates tests/data/oracle/lora: for a Llama-layout family (Q/K rows permuted by the HF
# loader) and a split-half one (qwen3, with Q/K norms), a tiny random base (`pith model gen`,
# GGUF and HF, seed 5) and one random rank-4 adapter on every projection (`pith model gen-lora`,
# GGUF and PEFT, seed 11: the same values), then the logits of one 24-token prompt from llama.cpp
# with the GGUF adapter (--lora) and from transformers + PEFT with the PEFT folder. Needs the
# oracle venv of tools/README.md (plus `peft`); never needed to build or test.
# Usage: tools/make_lora_oracles.sh BUILD_DIR [VENV]
set -eu
build=$1
venv=${2:-/work/oracle-venv}
out=tests/data/oracle/lora
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$out"
tokens=1,312,943,697,361,137,785,400,512,33,640,877,259,404,918,77,150,606,731,288,990,45,263,999
for arch in ${ARCHES:-llama qwen3}; do
  for fmt in gguf hf; do
    "$build/bin/pith" model gen --preset tiny --arch "$arch" --format "$fmt" --dtype f32 --seed 5 \
      --vocab tests/data/models/tiny-f32.gguf -q -o "$tmp/$arch.$fmt"
  done
  "$build/bin/pith" model gen-lora -m "$tmp/$arch.gguf" --format gguf --rank 4 --alpha 8 \
    --std 0.05 --seed 11 -o "$tmp/$arch.lora.gguf" >/dev/null
  "$build/bin/pith" model gen-lora -m "$tmp/$arch.hf" --format peft --rank 4 --alpha 8 \
    --std 0.05 --seed 11 -o "$tmp/$arch.lora.peft" >/dev/null
  "$venv/bin/python" tools/arch_oracle.py --gguf "$tmp/$arch.gguf" --hf "$tmp/$arch.hf" \
    --lora-gguf "$tmp/$arch.lora.gguf" --lora-hf "$tmp/$arch.lora.peft" \
    --tokens "$tokens" --out "$out/$arch.json"
done
