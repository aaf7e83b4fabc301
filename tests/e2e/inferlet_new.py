#!/usr/bin/env python3
"""End-to-end: `pith inferlet new` scaffolds a project that builds and runs.

Usage: inferlet_new.py PITH MODEL

Creates NAME/NAME.cpp and NAME/README.md in a temporary directory, builds the scaffold with
`pith inferlet build`, runs it with `pith run -m` on the tiny model (it must generate text and
exit 0), and checks that an existing project is not overwritten and a bad name is refused.
"""
import os
import subprocess
import sys
import tempfile

pith, model = sys.argv[1], sys.argv[2]


def run(*args, expect=0):
    p = subprocess.run([pith, *args], capture_output=True, timeout=300)
    out, err = p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")
    if p.returncode != expect:
        sys.exit(f"FAIL: pith {' '.join(args)} exited {p.returncode}, expected {expect}\n{out}\n{err}")
    return out, err


with tempfile.TemporaryDirectory() as tmp:
    out, _ = run("inferlet", "new", "my_agent", "-o", tmp)
    src = os.path.join(tmp, "my_agent", "my_agent.cpp")
    readme = os.path.join(tmp, "my_agent", "README.md")
    assert os.path.isfile(src) and os.path.isfile(readme), os.listdir(tmp)
    assert f"created {src}" in out and "pith inferlet build" in out, out
    assert "my_agent" in open(readme).read() and "@NAME@" not in open(src).read()

    wasm = os.path.join(tmp, "my_agent.wasm")
    run("inferlet", "build", src, "-o", wasm)
    out, _ = run("run", "-m", model, wasm, "--no-stdin", "--", "--prompt", "Hello there", "--max-tokens", "5")
    assert out.strip(), "the scaffold generated nothing"

    # Never overwrite; refuse names that are not identifiers.
    _, err = run("inferlet", "new", "my_agent", "-o", tmp, expect=1)
    assert "already exists" in err, err
    _, err = run("inferlet", "new", "../escape", "-o", tmp, expect=1)
    assert "not a valid name" in err, err
print("1 passed, 0 failed")
