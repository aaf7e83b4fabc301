#!/bin/sh
# Regenerates tests/data/oracle/arch: for every model family, a tiny random-weight model made by
# `pith model gen` (GGUF and HF, same seed), its logits from llama.cpp (GGUF) and Hugging Face
# transformers (HF folder) over one 24-token prompt (ARCHES=... limits the families). Needs the
# oracle venv of tools/README.md;
# never needed to build or test. Usage: tools/make_arch_oracles.sh BUILD_DIR [VENV]
set -eu
build=$1
venv=${2:-/work/oracle-venv}
out=tests/data/oracle/arch
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
tokens=1,312,943,697,361,137,785,400,512,33,640,877,259,404,918,77,150,606,731,288,990,45,263,999
# Variants (variants.json): a family's tiny preset with config options changed.
variant() {  # prints "FAMILY OPTION..." of a variant name, or the name itself
  python3 -c 'import json,sys; v=json.load(open(sys.argv[1])).get(sys.argv[2]);
print(" ".join([v["arch"]] + ["--option=" + o for o in v["options"]]) if v else sys.argv[2])' \
    "$out/variants.json" "$1"
}
for arch in ${ARCHES:-llama mistral qwen2 qwen3 phi3 gemma2 gemma3 qwen2moe qwen3moe qwen35 qwen35moe gemma4 gemma4-e2b}; do
  # shellcheck disable=SC2046  # the options are single words (no spaces in variants.json)
  set -- $(variant "$arch")
  family=$1; shift
  for fmt in gguf hf; do
    "$build/bin/pith" model gen --preset tiny --arch "$family" --format "$fmt" --dtype f32 --seed 5 \
      --vocab tests/data/models/tiny-f32.gguf -q -o "$tmp/$arch.$fmt" "$@"
  done
  "$venv/bin/python" tools/arch_oracle.py --gguf "$tmp/$arch.gguf" --hf "$tmp/$arch.hf" \
    --tokens "$tokens" --out "$out/$arch.json"
done
