#!/usr/bin/env python3
"""End-to-end: modular_caching (Prompt Cache) through the real `pith serve`.

Usage: inferlet_modular_caching.py PITH MODEL INFERLET_DIR

One instance prefills and exports four modules at their schema positions and ends; later
instances compose subsets of them (with gaps where unused modules sit). Asserts: a composed run's
greedy output equals a full prefill of the same tokens at the same positions under the same
attention (--reference); the composed run computed only its new tokens (the question and the
decode steps), checked against the server's forward-token counters; different module choices
give different outputs.
"""
import json
import sys

sys.path.insert(0, __import__("os").path.dirname(__file__))
from pith_harness import Server  # noqa: E402

pith, model, inferlets = sys.argv[1:4]
WASM = f"{inferlets}/modular_caching.wasm"
MAX = 8


def check(cond, msg, *ctx):
    if not cond:
        sys.exit("FAIL: " + msg + "\n" + "\n".join(str(c) for c in ctx))


def forwarded(s):
    return s.metric("pith_forward_tokens_total")


def run(s, args):
    before = forwarded(s)
    r = s.run(WASM, args)
    check(r.ok(), f"exit {r.exit}", r.messages, r.logs)
    rep = json.loads(r.messages[-1])
    rep["_server_forwarded"] = forwarded(s) - before
    return rep


modules = {
    "prelude": "You answer questions about the documents below.",
    "doc_a": "Document A: the harbour opens at dawn and the ferries leave every hour until dusk.",
    "doc_b": "Document B: the museum closes on Mondays; tickets are half price for students.",
    "doc_c": "Document C: the old bridge was rebuilt in 1902 after the great flood of the river.",
}
with Server(pith, model) as s:
    pre = ["--prefill", "--cache", "e2e"]
    for k, v in modules.items():
        pre += ["--module", f"{k}={v}"]
    made = run(s, pre)
    check(made["modules"] == 4, "prefill", made)
    outputs = {}
    for use in ("doc_a,doc_c", "doc_b", "doc_a,doc_b,doc_c"):
        q = ["--cache", "e2e", "--use", use, "--question", "\nQuestion: when does it open?\nAnswer:",
             "--max-tokens", str(MAX)]
        comp = run(s, q)
        ref = run(s, q + ["--reference"])
        check(comp["tokens"] == ref["tokens"], f"{use}: composed output != full prefill with the same positions", comp, ref)
        new_tokens = comp["question_tokens"] + MAX - 1
        check(comp["computed_tokens"] == new_tokens, f"{use}: composed run computed more than its new tokens", comp)
        check(comp["_server_forwarded"] == new_tokens, f"{use}: server counters disagree", comp)
        check(comp["imported_tokens"] > 0 and ref["imported_tokens"] == 0, "imports", comp, ref)
        check(ref["computed_tokens"] == comp["imported_tokens"] + new_tokens, "reference computes everything", ref, comp)
        outputs[use] = comp["tokens"]
        print(f"{use}: imported {comp['imported_tokens']} tokens, computed {comp['computed_tokens']}, == reference")
    check(len({tuple(v) for v in outputs.values()}) > 1, "module choice made no difference", outputs)
print("modular_caching: ok")
