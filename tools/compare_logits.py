#!/usr/bin/env python3
"""Compares two `pith logits --json` outputs (or a transformers reference written in the same
format by tools/hf_logits_reference.py) position by position, with issue 16's criteria:
top-1 equal on >= 99% of positions, and max |dlogit| over the ids both top lists hold plus the
logsumexp within TOL, where TOL is 2e-3 for F32 weights and 2e-2 * (1 + max |logit|) for BF16.

Usage: compare_logits.py REF.json TEST.json --tol-mode f32|bf16 [--label NAME] [--out RESULT.json]
Prints one line and exits 1 when a criterion fails."""
import argparse
import json
import sys


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("ref")
    ap.add_argument("test")
    ap.add_argument("--tol-mode", choices=["f32", "bf16"], required=True)
    ap.add_argument("--label", default="")
    ap.add_argument("--out")
    a = ap.parse_args()
    ref = json.load(open(a.ref))
    test = json.load(open(a.test))
    if ref["tokens"] != test["tokens"]:
        sys.exit(f"{a.label}: the two runs saw different tokens")
    if len(ref["positions"]) != len(test["positions"]):
        sys.exit(f"{a.label}: position counts differ")
    top1_equal = 0
    worst = 0.0       # max |dlogit|
    worst_ratio = 0.0  # max |dlogit| / tolerance of its position
    for r, t in zip(ref["positions"], test["positions"]):
        rl = {e["id"]: e["logit"] for e in r["top"]}
        tl = {e["id"]: e["logit"] for e in t["top"]}
        max_abs = max(abs(v) for v in rl.values())
        tol = 2e-3 if a.tol_mode == "f32" else 2e-2 * (1 + max_abs)
        diffs = [abs(rl[i] - tl[i]) for i in rl if i in tl]
        diffs.append(abs(r["logsumexp"] - t["logsumexp"]))
        d = max(diffs)
        worst = max(worst, d)
        worst_ratio = max(worst_ratio, d / tol)
        r1, t1 = r["top"][0], t["top"][0]
        # A top-1 swap between two logits closer than the tolerance is a tie, not a miss.
        if r1["id"] == t1["id"] or abs(rl.get(t1["id"], -1e30) - r1["logit"]) <= tol:
            top1_equal += 1
    n = len(ref["positions"])
    agree = top1_equal / n if n else 1.0
    ok = agree >= 0.99 and worst_ratio <= 1.0
    result = {"label": a.label, "positions": n, "top1_agreement": agree,
              "max_abs_diff": worst, "max_diff_over_tol": worst_ratio, "tol_mode": a.tol_mode,
              "pass": ok}
    line = (f"{a.label}: {n} positions, top-1 agreement {agree:.4f}, max |dlogit| {worst:.3g} "
            f"({worst_ratio:.2f} of tolerance, {a.tol_mode}): {'PASS' if ok else 'FAIL'}")
    print(line)
    if a.out:
        with open(a.out, "w") as f:
            json.dump(result, f)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
