#!/usr/bin/env python3
"""End-to-end: the best_of_n inferlet through `pith serve`.

Usage: best_of_n.py PITH MODEL INFERLET_DIR

n samples of M tokens are drawn from one prefilled prompt; the test checks: n distinct samples
of M tokens exist; the returned one has the maximum score; each score is the sample's mean token
log-probability (recomputed with `pith logits`, the engine's direct prefill of prompt + sample);
and the prompt was prefilled once: the server's pith_prompt_tokens_computed_total grows by the
prompt length over the run (not n times it), and the forward tokens are prompt + n (M - 1).
"""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pith_harness import Server  # noqa: E402

pith, model, inferlets = sys.argv[1], sys.argv[2], sys.argv[3]
wasm = f"{inferlets}/best_of_n.wasm"
PROMPT = "Write a line of a poem about the mountains at dawn, with snow and light"
N, M = 5, 8


def direct_logprobs(prompt_ids, sample):
    """log p of each sample token after prompt + earlier sample tokens, from `pith logits`."""
    tokens = prompt_ids + sample
    p = subprocess.run([pith, "logits", "-m", model, "--json", "--tokens", ",".join(map(str, tokens)), "--no-bos",
                        "--top", "1000000"], capture_output=True, timeout=120)
    if p.returncode != 0:
        sys.exit(f"FAIL: pith logits: {p.stderr.decode()}")
    positions = json.loads(p.stdout)["positions"]
    out = []
    for i in range(len(prompt_ids), len(tokens)):
        pos = positions[i - 1]
        out.append(next(t["logit"] for t in pos["top"] if t["id"] == tokens[i]) - pos["logsumexp"])
    return out


def main():
    with Server(pith, model) as server:
        computed = server.metric("pith_prompt_tokens_computed_total")
        decode = server.metric("pith_forward_tokens_total", {"kind": "decode"})
        r = server.run(wasm, ["--prompt", PROMPT, "--n", str(N), "--max-tokens", str(M), "--temperature", "1.0",
                              "--seed", "3", "--no-prefix-cache"])
        assert r.ok() and len(r.messages) == 2, (r.exit, r.messages, r.logs)
        computed = server.metric("pith_prompt_tokens_computed_total") - computed
        decode = server.metric("pith_forward_tokens_total", {"kind": "decode"}) - decode
    out = json.loads(r.messages[1])
    samples = out["samples"]
    assert len(samples) == N, len(samples)
    assert all(len(s["tokens"]) == M for s in samples), [len(s["tokens"]) for s in samples]
    assert len({tuple(s["tokens"]) for s in samples}) > 1, "the samples are all the same"
    scores = [s["score"] for s in samples]
    assert out["best"] == scores.index(max(scores)), (out["best"], scores)
    assert r.messages[0] == samples[out["best"]]["text"]

    L = out["prompt_tokens"]
    assert out["prefilled"] == L, out  # the inferlet's own count: the parent's prefill only
    assert out["forwarded"] == L + N * (M - 1), out
    assert computed == L, f"server computed {computed} prompt tokens for a {L}-token prompt and {N} samples"
    assert decode == N * (M - 1), decode

    prompt_ids = json.loads(subprocess.run([pith, "logits", "-m", model, "--json", "--prompt", PROMPT, "--top", "1"],
                                           capture_output=True, timeout=120, check=True).stdout)["tokens"]
    assert len(prompt_ids) == L, (prompt_ids, L)
    for s in samples:
        ref = direct_logprobs(prompt_ids, s["tokens"])
        assert abs(sum(ref) / M - s["score"]) < 1e-3, (s, ref)
    print(f"ok: best {out['best']} of {N}, scores {[round(x, 3) for x in scores]}, prompt {L} tokens computed once")


if __name__ == "__main__":
    main()
