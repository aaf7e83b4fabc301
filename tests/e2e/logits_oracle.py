#!/usr/bin/env python3
"""End-to-end check of `pith logits`: the real binary on a bundled GGUF against a llama.cpp
oracle JSON (tests/data/oracle). Usage: logits_oracle.py PITH MODEL.gguf ORACLE.json [TOL]

Checks the JSON shape, the metric of the oracle README (max |dlogit| / (1 + max |ref top-10|)
over each position's reference top-10 ids found in our top list, and logsumexp), identical
top-1 everywhere, that BOS is prepended without --no-bos, and that bad input exits 1 with a
"pith: error:" message."""
import json
import subprocess
import sys


def run(args):
    return subprocess.run(args, capture_output=True, text=True, timeout=120)


def main():
    pith, model, oracle_path = sys.argv[1:4]
    tol = float(sys.argv[4]) if len(sys.argv) > 4 else 1e-4
    ref = json.load(open(oracle_path))
    toks = ref["tokens"]
    top_n = 20
    r = run([pith, "logits", "-m", model, "--tokens", ",".join(map(str, toks)), "--no-bos",
             "--top", str(top_n), "--json"])
    if r.returncode != 0:
        sys.exit(f"pith logits failed ({r.returncode}): {r.stderr}")
    out = json.loads(r.stdout)
    assert set(out) == {"tokens", "positions"}, f"unexpected keys {sorted(out)}"
    assert out["tokens"] == toks, "tokens differ"
    assert len(out["positions"]) == len(ref["positions"]), "position count differs"
    worst = 0.0
    for mine, theirs in zip(out["positions"], ref["positions"]):
        assert mine["pos"] == theirs["pos"]
        assert len(mine["top"]) == top_n
        logits = {t["id"]: t["logit"] for t in mine["top"]}
        ids = [t["id"] for t in mine["top"]]
        assert all(mine["top"][i]["logit"] >= mine["top"][i + 1]["logit"] for i in range(top_n - 1))
        scale = 1 + max(abs(t["logit"]) for t in theirs["top"])
        for t in theirs["top"]:
            assert t["id"] in logits, f"pos {mine['pos']}: ref top id {t['id']} not in our top {top_n}"
            worst = max(worst, abs(logits[t["id"]] - t["logit"]) / scale)
        worst = max(worst, abs(mine["logsumexp"] - theirs["logsumexp"]) / scale)
        assert ids[0] == theirs["top"][0]["id"], f"pos {mine['pos']}: top-1 {ids[0]} != {theirs['top'][0]['id']}"
    print(f"{oracle_path}: {len(toks)} positions, worst {worst:.3g} (tol {tol})")
    assert worst <= tol, f"worst {worst} > {tol}"

    # Without --no-bos the model's BOS (id 1) is prepended.
    r = run([pith, "logits", "-m", model, "--tokens", ",".join(map(str, toks[1:])), "--json"])
    assert r.returncode == 0, r.stderr
    again = json.loads(r.stdout)
    assert again["tokens"] == toks, "BOS not prepended"
    assert again["positions"][-1]["top"][0] == out["positions"][-1]["top"][0]

    # Bad input: a clear error and exit status 1.
    for bad in (["--tokens", "1,99999"], ["--tokens", "1,x"]):
        r = run([pith, "logits", "-m", model, "--json", "--no-bos"] + bad)
        assert r.returncode == 1 and "pith: error:" in r.stderr, (bad, r.returncode, r.stderr)
    print("ok")


if __name__ == "__main__":
    main()
