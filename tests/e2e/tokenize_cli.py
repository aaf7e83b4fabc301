#!/usr/bin/env python3
"""End-to-end: `pith tokenize` / `pith detokenize` on llama.cpp's test vectors.

Usage: tokenize_cli.py PITH VOCAB.gguf KIND BOS [STRIDE]
KIND is "bpe" (byte-level) or "spm" (SentencePiece); BOS is the id `pith tokenize` must put
first without --no-bos, or "none" when the model adds no BOS. Every STRIDE-th input (default 1:
all) of VOCAB.gguf.inp, fed on stdin (`-`) with --no-bos, must print exactly the ids of
VOCAB.gguf.out space-separated; for every fifth of those (each call loads the vocabulary),
--json prints the same ids as a JSON array and detokenize of the ids gives back the input.
(tokenizer_vectors_test checks every input in process; a stride keeps this binary-level check
fast for large vocabularies.)
"""
import json
import subprocess
import sys

pith, vocab, kind, bos = sys.argv[1:5]
stride = int(sys.argv[5]) if len(sys.argv) > 5 else 1
inputs = open(vocab + ".inp", encoding="utf-8").read().split("\n__ggml_vocab_test__\n")
expected = open(vocab + ".out", encoding="utf-8").read().split("\n")
inputs = inputs[: len(expected)][::stride]
expected = expected[::stride]
spm = kind == "spm"


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

hello = run(["tokenize", "-m", vocab, "--no-bos", "Hello"]).split()
with_bos = run(["tokenize", "-m", vocab, "Hello"]).split()
if with_bos != ([] if bos == "none" else [bos]) + hello:
    failed += 1
    print(f"BOS {bos}: 'Hello' tokenizes as {with_bos} (without BOS: {hello})")
print(f"{len(inputs) - failed} passed, {failed} failed")
sys.exit(1 if failed else 0)
