#!/usr/bin/env python3
"""Replays a `pith bench grammar --replay-out FILE` walk in xgrammar, for a mask-time comparison
on the same vocabulary, grammar and tokens.

Two xgrammar grammars are timed:
  - "same GBNF": the grammar pith used (xgrammar's EBNF reads llama.cpp's GBNF), so the two
    matchers answer the same question; the allowed-token count of every step must match pith's;
  - "json schema" (when the walk came from --schema): xgrammar's own JSON Schema converter on the
    same schema (any_whitespace, strict mode), the way vLLM runs it. Its grammar differs from
    pith's in details (whitespace, string characters), so a walk step it rejects ends that
    document and the replay resumes at the next one.
Per step the time covers the mask and accepting the token, as pith's bench measures it.

Needs xgrammar (pinned: pip install xgrammar==0.2.8 in a venv; it pulls torch). Not part of the
project's test suite.
"""
import argparse
import json
import statistics
import sys
import time

import xgrammar as xgr


def stats(us):
    us = sorted(us)
    return {
        "us_per_token": statistics.fmean(us),
        "p50_us": us[len(us) // 2],
        "p99_us": us[min(len(us) - 1, int(0.99 * len(us)))],
        "steps": len(us),
    }


def replay(compiled, info, picks, special, expect_allowed=None, limit=None):
    matcher = xgr.GrammarMatcher(compiled)
    bitmask = xgr.allocate_token_bitmask(1, info.vocab_size)
    us, timed, mismatches, rejected, skipping = [], [], 0, 0, False
    for step, pick in enumerate(picks[:limit]):
        if skipping:  # after a rejected token: wait for the walk's next document
            if pick < 0:
                matcher.reset()
                skipping = False
            continue
        t0 = time.perf_counter_ns()
        matcher.fill_next_token_bitmask(bitmask)
        ok = pick < 0 or matcher.accept_token(pick)
        us.append((time.perf_counter_ns() - t0) / 1e3)
        timed.append(step)
        if expect_allowed is not None:
            allowed = popcount_without(bitmask, special)
            mismatches += allowed != expect_allowed[step]
        if pick < 0:
            matcher.reset()
        elif not ok:
            rejected += 1
            skipping = True
    return us, timed, mismatches, rejected


def popcount_without(bitmask, special):
    words = bitmask[0].tolist()
    n = sum((w & 0xFFFFFFFF).bit_count() for w in words)
    for t in special:
        if (words[t >> 5] >> (t & 31)) & 1:
            n -= 1
    return n


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("replay", help="file written by pith bench grammar --replay-out")
    ap.add_argument("--threads", type=int, default=1, help="xgrammar compiler threads")
    ap.add_argument("--same-gbnf-steps", type=int, default=None,
                    help="replay only this many steps on pith's GBNF (default: all)")
    args = ap.parse_args()
    with open(args.replay) as f:
        r = json.load(f)
    special = set(r["special"])
    vocab = [b"" if i in special else bytes.fromhex(h) for i, h in enumerate(r["vocab_hex"])]
    info = xgr.TokenizerInfo(vocab, vocab_type=xgr.VocabType.RAW, vocab_size=len(vocab),
                             stop_token_ids=sorted(special)[:1])
    compiler = xgr.GrammarCompiler(info, max_threads=args.threads, cache_enabled=False)
    out = {"pith_us_per_token": statistics.fmean(r["us"])}

    t0 = time.perf_counter()
    same = compiler.compile_grammar(r["gbnf"])
    compile_ms = (time.perf_counter() - t0) * 1e3
    us, timed, mismatches, rejected = replay(same, info, r["picks"], special, r["allowed"],
                                             args.same_gbnf_steps)
    out["same_gbnf"] = {"compile_ms": compile_ms, "allowed_count_mismatches": mismatches,
                        "rejected_tokens": rejected, **stats(us),
                        "pith_us_same_steps": statistics.fmean(r["us"][i] for i in timed)}
    if r.get("schema"):
        t0 = time.perf_counter()
        own = compiler.compile_json_schema(json.dumps(r["schema"]), any_whitespace=True,
                                           strict_mode=True)
        compile_ms = (time.perf_counter() - t0) * 1e3
        us, timed, _, rejected = replay(own, info, r["picks"], special)
        out["json_schema"] = {"compile_ms": compile_ms, "rejected_tokens": rejected, **stats(us),
                              "pith_us_same_steps": statistics.fmean(r["us"][i] for i in timed)}
    json.dump(out, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
