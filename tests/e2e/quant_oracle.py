#!/usr/bin/env python3
"""pith's quantised kernels against llama.cpp on the same file: the real `pith` binary generates
the tiny qwen2 model (64-wide rows) in DTYPE, the command tools/make_quant_oracles.sh used to
make the committed reference (tests/data/oracle/arch/qwen2-DTYPE.llama-cpp.json: llama.cpp's
logits of that file), and `pith logits` on it must match the reference by arch_oracle.py's metric
(max |dlogit| / (1 + max |ref top-10 logit|), top-1 equal at every position). In the K-quant
mixes every matrix falls back to a 32-block type (q4_k_m: Q5_0 and Q8_0; q5_k_m: Q5_1 and
Q8_0), as in llama.cpp's files of models whose rows are not multiples of 256.

Usage: quant_oracle.py PITH DTYPE ORACLE_DIR VOCAB.gguf [TOL]"""
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from arch_oracle import run, worst_error  # noqa: E402


def main():
    pith, dtype, oracle_dir, vocab = sys.argv[1:5]
    # Measured ~1e-7 (same activation rounding as llama.cpp); one int8 rounding flip of an
    # activation (f32 summation order) moves a tiny model's later logits by up to ~1e-2.
    tol = float(sys.argv[5]) if len(sys.argv) > 5 else 2e-2
    ref = json.load(open(os.path.join(oracle_dir, f"qwen2-{dtype}.llama-cpp.json")))
    tokens = ",".join(map(str, ref["tokens"]))
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, f"qwen2-{dtype}.gguf")
        run([pith, "model", "gen", "--preset", "tiny", "--arch", "qwen2", "--dtype", dtype,
             "--seed", "5", "--vocab", vocab, "-q", "-o", path])
        mine = json.loads(run([pith, "logits", "-m", path, "--tokens", tokens, "--no-bos",
                               "--top", "60", "--json"]))
    worst = worst_error(mine, ref)
    print(f"qwen2 {dtype}: {len(ref['tokens'])} positions vs {ref['source']}: worst {worst:.3g} "
          f"(tol {tol})")
    assert worst <= tol, "beyond tolerance"
    print("ok")


if __name__ == "__main__":
    main()
