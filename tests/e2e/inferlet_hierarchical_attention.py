#!/usr/bin/env python3
"""End-to-end: hierarchical_attention through the real `pith serve`.

Usage: inferlet_hierarchical_attention.py PITH MODEL INFERLET_DIR

The structured mask applied as one mask matrix plus page masks (mode masked) gives the same
greedy tokens as a reference that computes every token in its own forward with a one-row mask
from the same rule (mode stepwise), with top probabilities equal to float tolerance; and both
differ from plain causal attention over the same slots.
"""
import json
import math
import sys

sys.path.insert(0, __import__("os").path.dirname(__file__))
from pith_harness import Server  # noqa: E402

pith, model, inferlets = sys.argv[1:4]


def run(s, mode, segment):
    r = s.run(f"{inferlets}/hierarchical_attention.wasm", ["--mode", mode, "--segment", str(segment),
                                                           "--max-tokens", "12"])
    if not r.ok():
        sys.exit(f"FAIL: {mode}: {r.exit}\n{r.messages}\n{r.logs}")
    return json.loads(r.messages[1])


with Server(pith, model) as s:
    for segment in (5, 8):
        masked, step, causal = (run(s, m, segment) for m in ("masked", "stepwise", "causal"))
        if masked["segments"] < 3:
            sys.exit(f"FAIL: too few segments {masked}")
        if masked["tokens"] != step["tokens"]:
            sys.exit(f"FAIL: masked != token-by-token reference\n{masked}\n{step}")
        for a, b in zip(masked["top_probs"], step["top_probs"]):
            if not math.isclose(a, b, rel_tol=1e-4, abs_tol=1e-7):
                sys.exit(f"FAIL: probabilities differ from the reference: {masked['top_probs']} {step['top_probs']}")
        if causal["tokens"] == masked["tokens"] and all(
                math.isclose(a, b, rel_tol=1e-3) for a, b in zip(causal["top_probs"], masked["top_probs"])):
            sys.exit(f"FAIL: the structured mask changed nothing compared with causal\n{masked}\n{causal}")
        print(f"segment {segment}: {masked['segments']} segments, masked == stepwise, != causal")
print("hierarchical_attention: ok")
