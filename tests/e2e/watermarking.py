#!/usr/bin/env python3
"""End-to-end: the watermarking inferlet through `pith serve` on a tiny model with the real
Llama 3 vocabulary (generated here with `pith model gen --vocab`).

Usage: watermarking.py PITH VOCAB_GGUF INFERLET_DIR

For several seeds, 200 tokens sampled with the green-list watermark (gamma 0.25, delta 2) give a
detector z-score above 4, and 200 tokens sampled the same way without it give |z| < 2. The
detector runs as a separate instance (--detect) on the generated ids and must agree with the
score the generating run reported.
"""
import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pith_harness import Server  # noqa: E402

pith, vocab, inferlets = sys.argv[1], sys.argv[2], sys.argv[3]
wasm = f"{inferlets}/watermarking.wasm"
T = 200
KEY = ["--key", "4242", "--gamma", "0.25", "--delta", "2.0"]


def main():
    with tempfile.TemporaryDirectory(prefix="pith-watermark-") as tmp:
        model = os.path.join(tmp, "tiny-llama3.gguf")
        subprocess.run([pith, "model", "gen", "--preset", "tiny", "--dtype", "f32", "--vocab", vocab,
                        "--seed", "5", "-q", "-o", model], check=True, timeout=300)
        with Server(pith, model) as server:
            program = server.upload(wasm)  # starts the native build; the runs below use it
            for _ in range(600):
                if server.request("GET", f"/v1/programs/{program}")[1]["native_ready"]:
                    break
                time.sleep(0.5)

            def generate(seed, marked):
                args = ["--prompt", "A short story about the sea:", "--max-tokens", str(T), "--seed", str(seed),
                        "--temperature", "1.0"] + KEY + ([] if marked else ["--no-watermark"])
                r = server.run(wasm, args)
                assert r.ok() and len(r.messages) == 2, (r.exit, r.messages, r.logs)
                out = json.loads(r.messages[1])
                assert len(out["ids"]) == T + 1 and out["scored"] == T, out["scored"]
                d = server.run(wasm, ["--detect", "--ids", ",".join(map(str, out["ids"]))] + KEY)
                assert d.ok(), (d.exit, d.messages)
                det = json.loads(d.messages[0])
                assert det["green"] == out["green"] and abs(det["z"] - out["z"]) < 1e-3, (det, out)
                return det["z"], det["green"]

            for seed in [1, 2, 3]:
                zw, gw = generate(seed, True)
                zu, gu = generate(seed, False)
                print(f"seed {seed}: watermarked z = {zw:.2f} ({gw}/{T} green), plain z = {zu:.2f} ({gu}/{T} green)")
                assert zw > 4, f"seed {seed}: watermark not detected, z = {zw}"
                assert abs(zu) < 2, f"seed {seed}: unwatermarked text scored z = {zu}"
    print("ok")


if __name__ == "__main__":
    main()
