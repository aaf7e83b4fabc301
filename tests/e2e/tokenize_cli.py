#!/usr/bin/env python3
"""End-to-end: `pith tokenize` / `pith detokenize` on llama.cpp's test vectors.

Usage: tokenize_cli.py PITH VOCAB.gguf
Every input of VOCAB.gguf.inp, fed on stdin (`-`) with --no-bos, must print exactly the ids of
VOCAB.gguf.out space-separated; for every fifth input (each call loads the vocabulary), --json
prints the same ids as a JSON array and detokenize of the ids gives back the input; BOS is added
without --no-bos.
"""
import json
import subprocess
import sys

pith, vocab = sys.argv[1], sys.argv[2]
inputs = open(vocab + ".inp", encoding="utf-8").read().split("\n__ggml_vocab_test__\n")
expected = open(vocab + ".out", encoding="utf-8").read().split("\n")
inputs = inputs[: len(expected)]
spm = "spm" in vocab


def run(args, stdin=None):
    p = subprocess.run([pith, *args], input=stdin, capture_output=True, timeout=120)
    if p.returncode != 0:
        sys.exit(f"FAIL: pith {' '.join(args)}: exit {p.returncode}: {p.stderr.decode(errors='replace')}")
    return p.stdout.decode("utf-8")


failed = 0
for n, (text, want) in enumerate(zip(inputs, expected)):
    want_ids = want.split()
    got = run(["tokenize", "-m", vocab, "--no-bos", "-"], text.encode("utf-8")).split()
    if got != want_ids:
        failed += 1
        print(f"mismatch for {text!r}: {got} != {want_ids}")
        continue
    if n % 5:  # every input through the ids path; every 5th also through --json and back
        continue
    as_json = json.loads(run(["tokenize", "-m", vocab, "--no-bos", "--json", "-"], text.encode("utf-8")))
    if [str(i) for i in as_json] != want_ids:
        failed += 1
        print(f"--json mismatch for {text!r}")
    if want_ids and not spm:  # SPM's added leading space is not part of the input
        back = run(["detokenize", "-m", vocab, *want_ids])
        if back.rstrip("\n") != text.rstrip("\n") and back != text:
            failed += 1
            print(f"detokenize mismatch for {text!r}: {back!r}")

with_bos = run(["tokenize", "-m", vocab, "Hello"]).split()
bos = "1" if spm else "128000"
if with_bos[0] != bos:
    failed += 1
    print(f"BOS not added: {with_bos}")
print(f"{len(inputs) - failed} passed, {failed} failed")
sys.exit(1 if failed else 0)
