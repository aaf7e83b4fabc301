#!/usr/bin/env python3
"""End-to-end check of LoRA adapters against independent references: the real `pith` binary
generates a tiny random base of family ARCH in both formats and one random adapter in both formats
(the same commands tools/make_lora_oracles.sh used), then `pith logits --lora` on the GGUF base +
GGUF adapter is compared with llama.cpp's logits (`--lora`), and on the HF base + PEFT folder
with Hugging Face transformers + PEFT's (tests/data/oracle/lora), with the metric of the family
oracle tests (arch_oracle.py). Both formats must give pith the same logits, and the adapter must
move them (the reference without it, the family oracle, differs).

Usage: lora_oracle.py PITH ARCH ORACLE_DIR VOCAB.gguf [TOL]"""
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from arch_oracle import run, worst_error  # noqa: E402


def main():
    pith, arch, oracle_dir, vocab = sys.argv[1:5]
    tol = float(sys.argv[5]) if len(sys.argv) > 5 else 1e-5  # f32 throughout: ~1e-7 seen
    ref_cpp = json.load(open(os.path.join(oracle_dir, f"{arch}.llama-cpp.json")))
    ref_hf = json.load(open(os.path.join(oracle_dir, f"{arch}.transformers.json")))
    tokens = ",".join(map(str, ref_hf["tokens"]))
    with tempfile.TemporaryDirectory() as tmp:
        out = {}
        for fmt, lora_fmt in (("gguf", "gguf"), ("hf", "peft")):
            base = os.path.join(tmp, f"{arch}.{fmt}")
            lora = os.path.join(tmp, f"{arch}.lora.{lora_fmt}")
            run([pith, "model", "gen", "--preset", "tiny", "--arch", arch, "--format", fmt,
                 "--dtype", "f32", "--seed", "5", "--vocab", vocab, "-q", "-o", base])
            run([pith, "model", "gen-lora", "-m", base, "--format", lora_fmt, "--rank", "4",
                 "--alpha", "8", "--std", "0.05", "--seed", "11", "-o", lora])
            out[fmt] = json.loads(run([pith, "logits", "-m", base, "--lora", lora, "--tokens",
                                       tokens, "--no-bos", "--top", "60", "--json"]))
            if fmt == "gguf":
                plain = json.loads(run([pith, "logits", "-m", base, "--tokens", tokens,
                                        "--no-bos", "--top", "60", "--json"]))
    assert out["gguf"] == out["hf"], "GGUF + GGUF adapter and HF + PEFT give different logits"
    moved = max(abs(a["logsumexp"] - b["logsumexp"])
                for a, b in zip(out["gguf"]["positions"], plain["positions"]))
    assert moved > 1e-3, f"the adapter barely changes the logits ({moved})"
    w_cpp = worst_error(out["gguf"], ref_cpp)
    w_hf = worst_error(out["hf"], ref_hf)
    print(f"{arch} + LoRA: {len(ref_hf['tokens'])} positions; GGUF vs {ref_cpp['source']} "
          f"({ref_cpp.get('lora')}): worst {w_cpp:.3g}; HF vs {ref_hf['source']} "
          f"({ref_hf.get('lora')}): worst {w_hf:.3g} (tol {tol}); adapter moved logsumexp by "
          f"up to {moved:.3g}")
    assert w_cpp <= tol and w_hf <= tol, "beyond tolerance"
    print("ok")


if __name__ == "__main__":
    main()
