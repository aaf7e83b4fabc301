#!/usr/bin/env python3
"""End-to-end: `pith inferlet new` scaffolds a project that builds and runs.

Usage: inferlet_new.py PITH MODEL

Creates NAME/NAME.cpp and NAME/README.md in a temporary directory, builds the scaffold with
`pith inferlet build`, runs it with `pith run -m` on the tiny model (it must generate text and
exit 0), and checks that an existing project is not overwritten and a bad name is refused.
The scaffold's entry point (PITH_INFERLET) answers --help, and a bad flag ends it with exit code
2 and its message ("error: unknown argument ...") on the client's side and in its log.
`pith inferlet build DIR` builds an inferlet directory of the repository, including one with
extra C sources named by its inferlet.build (agent_codeact, when Debian's duktape-dev is there).
"""
import os
import subprocess
import sys
import tempfile

pith, model = sys.argv[1], sys.argv[2]
repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def run(*args, expect=0, cwd=None):
    p = subprocess.run([pith, *args], capture_output=True, timeout=600, cwd=cwd)
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

    # The typed entry point: --help answers, a bad flag is an error with its message.
    out, _ = run("run", "-m", model, wasm, "--no-stdin", "--", "--help")
    assert "--prompt" in out and "--max-tokens" in out and "usage:" in out, out
    out, err = run("run", "-m", model, wasm, "--no-stdin", "--", "--bogus", expect=2)
    assert "error: unknown argument --bogus" in out and "unknown argument --bogus" in err, (out, err)
    out, _ = run("run", "-m", model, wasm, "--no-stdin", "--", "--max-tokens", "many", expect=2)
    assert "error: --max-tokens: 'many' is not" in out, out

    # Inferlet directories of the repository: the plain case, and extra C sources.
    run("inferlet", "build", os.path.join(repo, "inferlets", "text_completion"), cwd=tmp)
    built = os.path.join(tmp, "text_completion.wasm")
    assert open(built, "rb").read(4) == b"\0asm", built
    out, _ = run("run", "-m", model, built, "--no-stdin", "--", "--prompt", "Hi", "--max-tokens", "3")
    assert out.strip(), "text_completion built from its directory generated nothing"
    if os.path.exists("/usr/share/duktape/duktape.c"):
        codeact = os.path.join(tmp, "codeact.wasm")
        run("inferlet", "build", os.path.join(repo, "inferlets", "agent_codeact"), "-o", codeact)
        assert open(codeact, "rb").read(4) == b"\0asm", codeact
    else:
        print("agent_codeact not built: /usr/share/duktape/duktape.c missing (Debian duktape-dev)")

    # Never overwrite; refuse names that are not identifiers.
    _, err = run("inferlet", "new", "my_agent", "-o", tmp, expect=1)
    assert "already exists" in err, err
    _, err = run("inferlet", "new", "../escape", "-o", tmp, expect=1)
    assert "not a valid name" in err, err
print("1 passed, 0 failed")
