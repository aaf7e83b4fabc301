#!/usr/bin/env bash
# `make demo`: the end-to-end path on a bundled-tiny random-weight model (real Llama 3 shapes and
# vocabulary, random weights, so the text is meaningless but every layer is real):
#   1. generate the model if missing and inspect it,
#   2. start `pith serve` on it,
#   3. run an example inferlet (C++ compiled to Wasm) through the server with `pith run`,
#   4. send one OpenAI chat request (served by the built-in completion inferlet),
#   5. stop the server (SIGTERM: graceful shutdown).
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

PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
URL="http://127.0.0.1:$PORT"
LOG="$BUILD/demo-serve.log"
echo
echo "== pith serve -m $MODEL --port $PORT   (log: $LOG)"
"$PITH" serve -m "$MODEL" --port "$PORT" --cache-dir "$BUILD/demo-cache" --log-interval 0 >"$LOG" 2>&1 &
SERVER=$!
stop_server() {
  kill -TERM "$SERVER" 2>/dev/null || true
  wait "$SERVER" 2>/dev/null || true
}
trap stop_server EXIT
for _ in $(seq 1 600); do
  curl -sf "$URL/health" >/dev/null 2>&1 && break
  kill -0 "$SERVER" 2>/dev/null || { cat "$LOG"; exit 1; }
  sleep 0.1
done
curl -sf "$URL/health"; echo

echo
echo "== pith run --server $URL text_completion.wasm -- --prompt 'Once upon a time' --max-tokens 16"
"$PITH" run --server "$URL" "$BUILD/inferlets/text_completion.wasm" --no-stdin -- \
  --prompt "Once upon a time" --max-tokens 16

echo
echo "== POST $URL/v1/chat/completions  (OpenAI-compatible, built-in inferlet)"
curl -sf "$URL/v1/chat/completions" -H 'Content-Type: application/json' \
  -d '{"messages": [{"role": "user", "content": "Say hello."}], "max_tokens": 12, "temperature": 0}' |
  python3 -m json.tool

echo
echo "== POST $URL/v1/embeddings  (the model's final hidden state, pooled; 4 leading dimensions)"
curl -sf "$URL/v1/embeddings" -H 'Content-Type: application/json' \
  -d '{"input": ["Hello there.", "General Kenobi."], "dimensions": 4}' |
  python3 -m json.tool

echo
echo "== stopping the server (SIGTERM)"
stop_server
trap - EXIT
tail -n 3 "$LOG"
