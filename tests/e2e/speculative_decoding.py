#!/usr/bin/env python3
"""End-to-end: speculative_decoding (n-gram prompt lookup) and jacobi_decoding through `pith serve`.

Usage: speculative_decoding.py PITH MODEL INFERLET_DIR

Both are exact accelerations of greedy decoding, so for several prompts and draft/window sizes
their token ids must equal text_completion's at temperature 0 (one token per forward). On a
repetitive prompt the n-gram drafts hit, so speculative decoding needs fewer forward calls than
it generates tokens; the server's batch counter (one forward per batch when the instance runs
alone) must agree with the inferlet's own count. Jacobi decoding commits at least one token per
iteration: iterations <= tokens, and the server counts iterations + 1 forwards.
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pith_harness import Server  # noqa: E402

pith, model, inferlets = sys.argv[1], sys.argv[2], sys.argv[3]
N = 48
PROMPTS = {
    "plain": "The history of the city begins with a small settlement by the river",
    "repetitive": " ".join(["alpha beta gamma delta epsilon"] * 12),
}


def run(server, name, args):
    before = server.metric("pith_batches_total")
    r = server.run(f"{inferlets}/{name}.wasm", args)
    assert r.ok(), (name, args, r.exit, r.messages, r.logs)
    batches = server.metric("pith_batches_total") - before
    return r.messages, batches


def ids_of(msg):
    return [int(x) for x in msg.split(",")] if msg else []


def main():
    failures = []
    with Server(pith, model) as server:
        for label, prompt in PROMPTS.items():
            common = ["--prompt", prompt, "--max-tokens", str(N), "--no-prefix-cache"]
            msgs, _ = run(server, "text_completion", common + ["--temperature", "0", "--tokens"])
            greedy = ids_of(msgs[1])
            assert len(greedy) >= 1, msgs

            for ngram, draft in [(3, 8), (2, 4), (1, 1)]:
                msgs, batches = run(server, "speculative_decoding", common + ["--ngram", str(ngram), "--draft", str(draft)])
                stats = json.loads(msgs[2])
                got = ids_of(msgs[1])
                if got != greedy:
                    failures.append(f"speculative {label} n={ngram} k={draft}: {got} != greedy {greedy}")
                assert stats["tokens"] == len(got), stats
                assert batches == stats["forward_calls"], (label, batches, stats)
                print(f"speculative {label:10s} ngram={ngram} draft={draft}: {stats['tokens']} tokens, "
                      f"{stats['forward_calls']} forwards (server: {batches:.0f}), accepted {stats['accepted']}/{stats['drafted']}")
                if label == "repetitive" and ngram == 3:
                    assert stats["forward_calls"] < stats["tokens"], f"no speed-up on a repetitive prompt: {stats}"

            for window in [1, 4, 8]:
                msgs, batches = run(server, "jacobi_decoding", common + ["--window", str(window)])
                stats = json.loads(msgs[2])
                got = ids_of(msgs[1])
                if got != greedy:
                    failures.append(f"jacobi {label} w={window}: {got} != greedy {greedy}")
                assert stats["iterations"] <= stats["tokens"], stats
                assert batches == stats["forward_calls"] == stats["iterations"] + 1, (label, batches, stats)
                print(f"jacobi      {label:10s} window={window}: {stats['tokens']} tokens in {stats['iterations']} iterations")
    if failures:
        sys.exit("FAIL:\n" + "\n".join(failures))
    print("ok")


if __name__ == "__main__":
    main()
