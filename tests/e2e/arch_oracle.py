#!/usr/bin/env python3
"""End-to-end check of every model family against independent references: the real `pith`
binary generates a tiny random-weight model of family ARCH in both formats (the same command
tools/make_arch_oracles.sh used to make the references), then `pith logits` on the GGUF file is
compared with llama.cpp's logits of that file and on the HF folder with Hugging Face
transformers' logits of that folder (tests/data/oracle/arch). Metric as the llama oracle tests:
max |dlogit| / (1 + max |ref logit|) over each position's reference top-10 and logsumexp, and the
top-1 token equal at every position. Both formats must also give pith bit-identical logits.

llama.cpp applies no sliding window to a `llama`-architecture file (Mistral GGUFs) nor to phi3,
so for those two families the GGUF side is checked against transformers, whose window semantics
llama.cpp shares for gemma2/3 (the checks of those pass against both), and against llama.cpp
only on the positions the window (4 slots in the tiny presets) does not clip yet.

ARCH may also name a variant of ORACLE_DIR/variants.json: a family's tiny preset with config
options changed (e.g. gemma4-e2b: per-layer token embeddings and KV-sharing layers).

Usage: arch_oracle.py PITH ARCH ORACLE_DIR VOCAB.gguf [TOL]"""
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pith_harness import model_gen_args  # noqa: E402

WINDOWLESS_IN_LLAMA_CPP = {"mistral", "phi3"}


def run(args):
    r = subprocess.run(args, capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        sys.exit(f"{' '.join(args)} failed ({r.returncode}): {r.stderr}")
    return r.stdout


TINY_WINDOW = 4


def worst_error(mine, ref, n_positions=None):
    assert len(mine["positions"]) == len(ref["positions"]), "position count differs"
    worst = 0.0
    for m, t in list(zip(mine["positions"], ref["positions"]))[:n_positions]:
        logits = {e["id"]: e["logit"] for e in m["top"]}
        ref_top = t["top"][:10]
        scale = 1 + max(abs(e["logit"]) for e in ref_top)
        for e in ref_top:
            assert e["id"] in logits, f"pos {m['pos']}: ref top id {e['id']} not in our top list"
            worst = max(worst, abs(logits[e["id"]] - e["logit"]) / scale)
        worst = max(worst, abs(m["logsumexp"] - t["logsumexp"]) / scale)
        assert m["top"][0]["id"] == t["top"][0]["id"], \
            f"pos {m['pos']}: top-1 {m['top'][0]['id']} != {t['top'][0]['id']}"
    return worst


def main():
    pith, arch, oracle_dir, vocab = sys.argv[1:5]
    tol = float(sys.argv[5]) if len(sys.argv) > 5 else 1e-3
    family, gen_options = model_gen_args(oracle_dir, arch)
    ref_cpp = json.load(open(os.path.join(oracle_dir, f"{arch}.llama-cpp.json")))
    ref_hf = json.load(open(os.path.join(oracle_dir, f"{arch}.transformers.json")))
    tokens = ",".join(map(str, ref_hf["tokens"]))
    with tempfile.TemporaryDirectory() as tmp:
        out = {}
        for fmt in ("gguf", "hf"):
            path = os.path.join(tmp, f"{arch}.{fmt}")
            run([pith, "model", "gen", "--preset", "tiny", "--arch", family, "--format", fmt,
                 "--dtype", "f32", "--seed", "5", "--vocab", vocab, "-q", "-o", path] + gen_options)
            out[fmt] = json.loads(run([pith, "logits", "-m", path, "--tokens", tokens, "--no-bos",
                                       "--top", "60", "--json"]))
    assert out["gguf"] == out["hf"], "GGUF and HF of one model give different logits"
    gguf_ref = ref_hf if arch in WINDOWLESS_IN_LLAMA_CPP else ref_cpp
    w_gguf = worst_error(out["gguf"], gguf_ref)
    w_hf = worst_error(out["hf"], ref_hf)
    if arch in WINDOWLESS_IN_LLAMA_CPP:
        w_early = worst_error(out["gguf"], ref_cpp, TINY_WINDOW)
        print(f"{arch}: GGUF vs {ref_cpp['source']} on the first {TINY_WINDOW} positions: "
              f"worst {w_early:.3g}")
        assert w_early <= tol, "beyond tolerance"
    print(f"{arch}: {len(ref_hf['tokens'])} positions; GGUF vs {gguf_ref['source']}: worst "
          f"{w_gguf:.3g}; HF vs {ref_hf['source']}: worst {w_hf:.3g} (tol {tol})")
    assert w_gguf <= tol and w_hf <= tol, "beyond tolerance"
    print("ok")


if __name__ == "__main__":
    main()
