#!/usr/bin/env python3
"""End-to-end: the beam_search inferlet (paper R2) through `pith serve` on the tiny model.

Usage: beam_search.py PITH MODEL INFERLET_DIR

With 27 beams, 3 candidates per beam and 3 tokens the search prunes nothing, so it must find the
exhaustive optimum of the tree of each node's 3 most likely tokens. The test builds that tree
itself with `pith logits` (the engine's direct prefill, independent of the inferlet, the runtime
and the control layer), scores all 27 paths and compares: best beam = exhaustive best, every beam's
log-probability = its direct score, greedy = the all-argmax path and no better than the best beam.
"""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pith_harness import Server  # noqa: E402

pith, model, inferlets = sys.argv[1], sys.argv[2], sys.argv[3]
wasm = f"{inferlets}/beam_search.wasm"
K, DEPTH = 3, 3
TOL = 1e-3  # float32 model: log-probabilities agree to ~1e-5 between the two paths


def run_json(server, args):
    r = server.run(wasm, args)
    assert r.ok(), (r.exit, r.messages, r.logs)
    assert len(r.messages) == 1, r.messages
    return json.loads(r.messages[0])


def last_position(tokens):
    """Top-K ids with log-probabilities after `tokens`, from one direct prefill."""
    p = subprocess.run([pith, "logits", "-m", model, "--tokens", ",".join(map(str, tokens)), "--no-bos",
                        "--top", str(K), "--json"], capture_output=True, timeout=120)
    if p.returncode != 0:
        sys.exit(f"FAIL: pith logits: {p.stderr.decode()}")
    pos = json.loads(p.stdout)["positions"][-1]
    return [(t["id"], t["logit"] - pos["logsumexp"]) for t in pos["top"]]


def exhaustive(prompt):
    """{path: log-probability} over every K^DEPTH path, and the all-argmax path."""
    scores = {}

    def walk(path, score):
        if len(path) == DEPTH:
            scores[tuple(path)] = score
            return
        for tok, lp in last_position(prompt + path):
            walk(path + [tok], score + lp)

    walk([], 0.0)
    argmax = []
    for _ in range(DEPTH):
        argmax.append(last_position(prompt + argmax)[0][0])
    return scores, tuple(argmax)


def check_beams(out, n, length):
    beams = out["beams"]
    assert len(beams) == n, len(beams)
    paths = [tuple(b["tokens"]) for b in beams]
    assert len(set(paths)) == n, "duplicate beams"
    assert all(len(p) == length for p in paths), paths
    scores = [b["logprob"] for b in beams]
    assert scores == sorted(scores, reverse=True), scores
    assert out["best"]["tokens"] == beams[0]["tokens"] and out["best"]["logprob"] == max(scores)
    return paths


with Server(pith, model) as server:
    exact = run_json(server, ["--prompt", "The quick brown fox", "--beams", "27", "--expand", str(K),
                              "--max-tokens", str(DEPTH), "--no-eos"])
    narrow = run_json(server, ["--prompt", "Once upon a time", "--beams", "4", "--max-tokens", "8", "--no-eos"])

# 1. The exhaustive case against the direct oracle.
paths = check_beams(exact, 27, DEPTH)
oracle, argmax = exhaustive(exact["prompt_tokens"])
assert set(paths) == set(oracle), f"beams {sorted(paths)} != tree {sorted(oracle)}"
for b in exact["beams"]:
    want = oracle[tuple(b["tokens"])]
    assert abs(b["logprob"] - want) < TOL, (b["tokens"], b["logprob"], want)
best_path = tuple(exact["best"]["tokens"])
best_score = max(oracle.values())
assert oracle[best_path] >= best_score - TOL, (best_path, oracle[best_path], best_score)
greedy = exact["greedy"]
assert tuple(greedy["tokens"]) == argmax, (greedy["tokens"], argmax)
assert abs(greedy["logprob"] - oracle[argmax]) < TOL, (greedy["logprob"], oracle[argmax])
assert exact["best"]["logprob"] >= greedy["logprob"], (exact["best"], greedy)
print(f"exhaustive: best {list(best_path)} {exact['best']['logprob']:.4f} (oracle {best_score:.4f}), "
      f"greedy {list(argmax)} {greedy['logprob']:.4f}")

# 2. A pruning search: well-formed, best first.
check_beams(narrow, 4, 8)
assert len(narrow["greedy"]["tokens"]) == 8
print(f"narrow: best {narrow['best']['logprob']:.4f}, greedy {narrow['greedy']['logprob']:.4f}")
print("1 passed, 0 failed")
