#!/usr/bin/env python3
"""End-to-end: the output_validation inferlet (ReLM-style ranking) through `pith serve`.

Usage: output_validation.py PITH MODEL INFERLET_DIR

Candidates are scored by log p(candidate | prompt) in one forward per candidate (forks sharing
the prompt's pages). The test checks: the ranking is sorted by log-probability; the per-token
log-probabilities equal the --stepwise mode's (one token per forward) within 1e-4; and both equal
an oracle computed independently with `pith logits` (the engine's direct prefill of prompt +
candidate, log-softmax at each position).
"""
import json
import math
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pith_harness import Server  # noqa: E402

pith, model, inferlets = sys.argv[1], sys.argv[2], sys.argv[3]
wasm = f"{inferlets}/output_validation.wasm"
PROMPT = "The capital of France is"
CANDIDATES = [" Paris", " a city of lights and long rivers", " London", "!", " the largest city in Europe", " 42"]
TOL = 1e-4


def oracle(tokens, n_prompt):
    """log p of tokens[n_prompt:], each given everything before it, from `pith logits`."""
    positions = logits(["--tokens", ",".join(map(str, tokens)), "--no-bos", "--top", "1000000"])["positions"]
    out = []
    for i in range(n_prompt, len(tokens)):
        pos = positions[i - 1]
        logit = next(t["logit"] for t in pos["top"] if t["id"] == tokens[i])
        out.append(logit - pos["logsumexp"])
    return out


def logits(args):
    p = subprocess.run([pith, "logits", "-m", model, "--json"] + args, capture_output=True, timeout=120)
    if p.returncode != 0:
        sys.exit(f"FAIL: pith logits: {p.stderr.decode()}")
    return json.loads(p.stdout)


def main():
    args = ["--prompt", PROMPT]
    for c in CANDIDATES:
        args += ["--candidate", c]
    with Server(pith, model) as server:
        runs = {}
        for mode in ["batched", "stepwise"]:
            r = server.run(wasm, args + (["--stepwise"] if mode == "stepwise" else []))
            assert r.ok() and len(r.messages) == 1, (r.exit, r.messages, r.logs)
            runs[mode] = json.loads(r.messages[0])
    batched, stepwise = runs["batched"], runs["stepwise"]
    ranking = batched["ranking"]
    assert sorted(c["candidate"] for c in ranking) == sorted(CANDIDATES)
    scores = [c["logprob"] for c in ranking]
    assert scores == sorted(scores, reverse=True), scores
    n_tokens = sum(len(c["tokens"]) for c in ranking)
    assert batched["forward_calls"] == 1 + sum(1 for c in ranking if len(c["tokens"]) > 1), batched["forward_calls"]
    assert stepwise["forward_calls"] == 1 + n_tokens - len(ranking), stepwise["forward_calls"]

    by_candidate = {c["candidate"]: c for c in stepwise["ranking"]}
    for c in ranking:
        s = by_candidate[c["candidate"]]
        assert c["tokens"] == s["tokens"]
        for a, b in zip(c["token_logprobs"], s["token_logprobs"]):
            assert abs(a - b) < TOL, (c["candidate"], c["token_logprobs"], s["token_logprobs"])
        assert abs(c["logprob"] - sum(c["token_logprobs"])) < 1e-6
    assert [c["candidate"] for c in ranking] == [c["candidate"] for c in stepwise["ranking"]]

    # The independent oracle: the prompt's ids as the model tokenizes them (BOS included), then
    # prompt + candidate prefilled directly by the engine.
    prompt_ids = logits(["--prompt", PROMPT, "--top", "1"])["tokens"]
    for c in ranking:
        ref = oracle(prompt_ids + c["tokens"], len(prompt_ids))
        for a, b in zip(c["token_logprobs"], ref):
            assert abs(a - b) < 1e-3, (c["candidate"], c["token_logprobs"], ref)
        print(f"{c['logprob']:10.4f}  {c['candidate']!r} ({len(c['tokens'])} tokens; oracle {sum(ref):.4f})")
    assert not math.isnan(scores[0])
    print("ok")


if __name__ == "__main__":
    main()
