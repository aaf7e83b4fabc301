#!/usr/bin/env bash
# `make demo`: the main end-to-end path that exists today, on the bundled tiny model.
set -euo pipefail
BUILD=${1:-build}
PITH="$BUILD/bin/pith"
MODEL=tests/data/models/tiny-f32.gguf

echo "== pith model info $MODEL"
"$PITH" model info "$MODEL"
