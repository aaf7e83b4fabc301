#!/bin/sh
# Regenerates tests/data/oracle/hf_v5: for every model family, the config.json transformers v5
# writes when it loads the tiny random model `pith model gen` makes (HF format, seed 5) and saves
# it again (save_pretrained). v5 renames and nests keys (rope_parameters per layer type,
# per_layer_config, num_local_experts, MinistralForCausalLM for a Mistral config); the e2e test
# tests/e2e/hf_v5_configs.py loads each beside the original and requires identical logits.
# Needs the oracle venv of tools/README.md; never needed to build or test.
# Usage: tools/make_hf_v5_configs.sh BUILD_DIR [VENV]
set -eu
build=$1
venv=${2:-/work/oracle-venv}
out=tests/data/oracle/hf_v5
mkdir -p "$out"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
variant() {  # "FAMILY OPTION..." of a variant of tests/data/oracle/arch/variants.json
  python3 -c 'import json,sys; v=json.load(open(sys.argv[1])).get(sys.argv[2]);
print(" ".join([v["arch"]] + ["--option=" + o for o in v["options"]]) if v else sys.argv[2])' \
    tests/data/oracle/arch/variants.json "$1"
}
for arch in ${ARCHES:-llama mistral qwen2 qwen3 qwen3-yarn phi3 phi3-longrope gemma2 gemma3 qwen2moe qwen3moe qwen35 qwen35moe gemma4 gemma4-e2b gemma4-moe}; do
  # shellcheck disable=SC2046  # the options are single words
  set -- $(variant "$arch")
  family=$1; shift
  "$build/bin/pith" model gen --preset tiny --arch "$family" --format hf --dtype f32 --seed 5 \
    --vocab tests/data/models/tiny-f32.gguf -q -o "$tmp/$arch" "$@"
  "$venv/bin/python" -c 'import sys, transformers
transformers.AutoModelForCausalLM.from_pretrained(sys.argv[1]).save_pretrained(sys.argv[2])' \
    "$tmp/$arch" "$tmp/$arch.v5" 2>/dev/null
  cp "$tmp/$arch.v5/config.json" "$out/$arch.config.json"
  echo "$out/$arch.config.json"
done
