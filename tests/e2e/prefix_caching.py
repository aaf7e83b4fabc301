#!/usr/bin/env python3
"""End-to-end: the prefix_caching inferlet (paper R1, KV export/import) through `pith serve`.

Usage: prefix_caching.py PITH MODEL INFERLET_DIR

One instance exports a shared prefix's KV pages; later instances import them and compute only
their suffix. Checked from both sides: the inferlet's own count and the server's
pith_prompt_tokens_computed_total (prompt tokens the engine computed) grow by exactly the suffix
length for an import and by prefix + suffix for the same request without reuse, and the greedy
output with reuse equals the output without it, token for token.
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pith_harness import Server  # noqa: E402

pith, model, inferlets = sys.argv[1], sys.argv[2], sys.argv[3]
wasm = f"{inferlets}/prefix_caching.wasm"
PREFIX = "You are a careful assistant. Answer briefly and cite your sources. " * 3
SUFFIXES = ["Question: how far is the moon? Answer:", "Write a haiku about paged attention."]


def run(server, args):
    r = server.run(wasm, args)
    return r, (json.loads(r.messages[0]) if r.ok() and r.messages else None)


# --no-prefix-cache: the server's automatic cache must not save anything on its own.
with Server(pith, model, "--no-prefix-cache") as s:
    computed = lambda: s.metric("pith_prompt_tokens_computed_total")  # noqa: E731

    before = computed()
    r, exp = run(s, ["--mode", "export", "--name", "system", "--prefix", PREFIX])
    assert exp, (r.exit, r.messages, r.logs)
    prefix_len = exp["prompt_tokens"]
    assert prefix_len > 16, prefix_len  # more than one KV page: full pages and a partial one
    assert exp["prompt_tokens_computed"] == prefix_len
    assert computed() - before == prefix_len, (computed() - before, exp)

    for suffix in SUFFIXES:
        m0 = computed()
        r, imp = run(s, ["--mode", "import", "--name", "system", "--suffix", suffix, "--max-tokens", "8"])
        assert imp, (r.exit, r.messages, r.logs)
        m1 = computed()
        r, plain = run(s, ["--mode", "plain", "--prefix", PREFIX, "--suffix", suffix, "--max-tokens", "8"])
        assert plain, (r.exit, r.messages, r.logs)
        m2 = computed()

        suffix_len = imp["prompt_tokens"] - imp["reused_tokens"]
        assert imp["reused_tokens"] == prefix_len, imp
        assert suffix_len >= 2, imp
        assert plain["prompt_tokens"] == imp["prompt_tokens"], (plain, imp)
        # The import computed only the suffix, by its own count and by the server's.
        assert imp["prompt_tokens_computed"] == suffix_len, imp
        assert m1 - m0 == suffix_len, (m1 - m0, suffix_len)
        assert plain["prompt_tokens_computed"] == plain["prompt_tokens"], plain
        assert m2 - m1 == plain["prompt_tokens"], (m2 - m1, plain["prompt_tokens"])
        # Same greedy output with and without reuse.
        assert imp["tokens"] == plain["tokens"], (imp["tokens"], plain["tokens"])
        assert len(imp["tokens"]) == 8
        print(f"suffix of {suffix_len} tokens: import computed {m1 - m0}, plain computed {m2 - m1}, "
              f"same output {imp['tokens']}")

    r, _ = run(s, ["--mode", "remove", "--name", "system"])
    assert r.ok(), (r.exit, r.messages)
    r, gone = run(s, ["--mode", "import", "--name", "system", "--suffix", SUFFIXES[0]])
    assert gone is None and r.exit["code"] == 1, (r.exit, r.messages)
    assert r.messages == ["error: import 'system': not found"], r.messages
print("1 passed, 0 failed")
