#!/usr/bin/env python3
"""End-to-end: `pith run -m MODEL PROGRAM.wasm -- ARGS` through the whole serving stack.

Usage: run_cli.py PITH MODEL INFERLET_DIR
Checks that text_completion generates the requested number of tokens deterministically (greedy
twice gives the same ids), that a stop string spanning several tokens ends generation right
after it (the SDK checks a decoded tail, not the whole text), that a trapping inferlet exits 1
with its reason, and that a bad model path is a clear error, not a crash.
"""
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pith_harness import require_inferlets  # noqa: E402

pith, model, inferlets = sys.argv[1], sys.argv[2], sys.argv[3]
require_inferlets(f"{inferlets}/text_completion.wasm", f"{inferlets}/traps.wasm")


def run(*args, expect):
    # Random weights may generate byte tokens that do not form UTF-8: compare bytes.
    p = subprocess.run([pith, *args], capture_output=True, timeout=300)
    p.stdout = p.stdout.decode("utf-8", "replace")
    p.stderr = p.stderr.decode("utf-8", "replace")
    if p.returncode != expect:
        sys.exit(f"FAIL: {' '.join(args)} exited {p.returncode}, expected {expect}\n"
                 f"stdout: {p.stdout}\nstderr: {p.stderr}")
    return p


completion = [ "run", "-m", model, f"{inferlets}/text_completion.wasm", "--no-stdin", "--",
               "--prompt", "Hello world", "--max-tokens", "6", "--tokens"]
a = run(*completion, expect=0).stdout.splitlines()
b = run(*completion, expect=0).stdout.splitlines()
assert len(a) >= 2, a
ids = a[-1].split(",")
assert len(ids) == 6 and all(i.isdigit() for i in ids), a
assert a == b, (a, b)


def completion_text(*extra):
    """The text message of text_completion --tokens (everything before the ids line), as bytes."""
    p = subprocess.run([pith, "run", "-m", model, f"{inferlets}/text_completion.wasm", "--no-stdin", "--",
                        "--prompt", "Hello world", "--tokens", *extra], capture_output=True, timeout=300)
    assert p.returncode == 0, p.stderr
    out = p.stdout.rstrip(b"\n")
    return out[:out.rfind(b"\n")], out[out.rfind(b"\n") + 1:].split(b",")


short, short_ids = completion_text("--max-tokens", "12")
assert len(short_ids) == 12 and len(short) >= 6, (short, short_ids)
stop = short[-6:]  # ends at a token boundary; usually spans several tokens
stopped, stopped_ids = completion_text("--max-tokens", "24", "--stop", stop)
assert stopped.endswith(stop) and short.startswith(stopped), (stop, stopped, short)
assert len(stopped_ids) <= 12, stopped_ids

trap = run("run", "-m", model, f"{inferlets}/traps.wasm", "--no-stdin", "--", "unreachable", expect=1)
assert "trap: unreachable" in trap.stderr, trap.stderr

bad = run("run", "-m", "/nonexistent/model.gguf", f"{inferlets}/text_completion.wasm", expect=1)
assert "/nonexistent/model.gguf" in bad.stderr, bad.stderr
print("1 passed, 0 failed")
