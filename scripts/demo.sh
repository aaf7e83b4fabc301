#!/usr/bin/env bash
# `make demo`: the end-to-end path on a bundled-tiny random-weight model — generate the model
# (real Llama 3 shapes and vocabulary, random weights), inspect it, compute logits, then run
# an example inferlet (C++ compiled to Wasm) through the whole serving stack.
# (The HTTP server arrives with `pith serve`; until then `pith run -m` serves in-process.)
set -euo pipefail
BUILD=${1:-build}
PITH="$BUILD/bin/pith"
MODEL=models/tiny-bf16.gguf

if [ ! -f "$MODEL" ]; then
  echo "== pith model gen --preset tiny --dtype bf16 -o $MODEL"
  "$PITH" model gen --preset tiny --dtype bf16 --vocab tests/data/tokenizer/ggml-vocab-llama-bpe.gguf -o "$MODEL"
fi

echo
echo "== pith model info $MODEL"
"$PITH" model info "$MODEL"

echo
echo "== pith logits -m $MODEL --prompt 'Hello, world' --top 3 --json"
"$PITH" logits -m "$MODEL" --prompt "Hello, world" --top 3 --json

echo
echo "== pith run -m $MODEL text_completion.wasm -- --prompt 'Once upon a time' --max-tokens 16"
echo "   (random weights: the text is meaningless; the path is real)"
"$PITH" run -m "$MODEL" "$BUILD/inferlets/text_completion.wasm" --no-stdin -- \
  --prompt "Once upon a time" --max-tokens 16
