#!/usr/bin/env python3
"""pith's quantised kernels against llama.cpp on the same file: the real `pith` binary generates a
tiny model in DTYPE, the command tools/make_quant_oracles.sh used to make the committed reference
(tests/data/oracle/arch/NAME-DTYPE.llama-cpp.json: llama.cpp's logits of that file), and `pith
logits` on it must match the reference by arch_oracle.py's metric (max |dlogit| / (1 + max |ref
top-10 logit|), top-1 equal at every position). NAME picks the model:
  - qwen2: the tiny qwen2 model, 64-wide rows, so in the K-quant mixes every matrix falls back
    to a 32-block type (q4_k_m: Q5_0 and Q8_0; q5_k_m: Q5_1 and Q8_0; iq4_xs: IQ4_NL and Q8_0),
    as in llama.cpp's files of models whose rows are not multiples of 256;
  - llama256: the tiny256 Llama model, 256-wide rows: the mixes' own K-quant types (q2_k: Q2_K,
    Q3_K and Q6_K; q3_k_m: Q3_K, Q4_K, Q5_K and Q6_K; iq4_xs: IQ4_XS and Q6_K);
  - gpt-oss: the tiny gpt-oss model (GGUF only: attention sinks, biases, sliding windows on
    every other layer, YaRN, 8 experts with biases and the clamped SwiGLU), in f32 and in its
    own file type mxfp4_moe (experts MXFP4, every other matrix Q8_0).

Usage: quant_oracle.py PITH NAME DTYPE ORACLE_DIR VOCAB.gguf [TOL]"""
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from arch_oracle import run, worst_error  # noqa: E402

# NAME -> (pith model gen preset, architecture); the same as tools/make_quant_oracles.sh.
MODELS = {"qwen2": ("tiny", "qwen2"), "llama256": ("tiny256", "llama"),
          "gpt-oss": ("tiny", "gpt-oss")}


def main():
    pith, name, dtype, oracle_dir, vocab = sys.argv[1:6]
    # Measured: qwen2 ~1e-7 (the 32-block types round activations as llama.cpp does); llama256
    # 5.7e-3-6.7e-3 (K-quant activations: pith's block scale is amax / 127 kept to 16 bits,
    # llama.cpp's -max / 127, so an int8 rounding differs now and then, in every K-quant type
    # alike). One such flip moves a tiny model's later logits by up to ~1e-2. IQ4_NL (qwen2
    # iq4_nl, iq4_xs) ~7e-8; llama256 iq4_xs 7.9e-3: pith quantises its activations per 32
    # (the scale of each sub-block), llama.cpp per 256.
    tol = float(sys.argv[6]) if len(sys.argv) > 6 else 2e-2
    preset, arch = MODELS[name]
    ref = json.load(open(os.path.join(oracle_dir, f"{name}-{dtype}.llama-cpp.json")))
    tokens = ",".join(map(str, ref["tokens"]))
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, f"{name}-{dtype}.gguf")
        run([pith, "model", "gen", "--preset", preset, "--arch", arch, "--dtype", dtype,
             "--seed", "5", "--vocab", vocab, "-q", "-o", path])
        # The CPU's quantised kernels are what this checks: a GPU would multiply BF16 copies of
        # the weights, with BF16 activations this bound was not set for (docs/gpu.md).
        mine = json.loads(run([pith, "logits", "-m", path, "--tokens", tokens, "--no-bos",
                               "--top", "60", "--json", "--device", "cpu"]))
    worst = worst_error(mine, ref)
    print(f"{name} {dtype}: {len(ref['tokens'])} positions vs {ref['source']}: worst {worst:.3g} "
          f"(tol {tol})")
    assert worst <= tol, "beyond tolerance"
    print("ok")


if __name__ == "__main__":
    main()
