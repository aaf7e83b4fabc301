#!/usr/bin/env python3
"""End-to-end: `pith inferlet new` scaffolds a project that builds and runs.

Usage: inferlet_new.py PITH MODEL

Creates NAME/NAME.cpp and NAME/README.md in a temporary directory, builds the scaffold with
`pith inferlet build`, runs it with `pith run -m` on the tiny model (it must generate text and
exit 0), and checks that an existing project is not overwritten and a bad name is refused.
The scaffold's entry point (PITH_INFERLET) answers --help, and a bad flag ends it with exit code
2 and its message ("error: unknown argument ...") on the client's side and in its log.
`pith inferlet build DIR` builds an inferlet directory with extra C sources, an include
directory and a C prelude named by its inferlet.build (the way agent_codeact embeds Duktape; the
CMake build reads the same file), and rejects an unknown key in that file.
"""
import os
import subprocess
import sys
import tempfile

pith, model = sys.argv[1], sys.argv[2]


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

    # A directory with extra C sources, as agent_codeact embeds Duktape: inferlet.build names a
    # C source (compiled as C, linked in), an include directory and a C prelude.
    mixed = os.path.join(tmp, "mixed")
    os.makedirs(os.path.join(mixed, "inc"))
    with open(os.path.join(mixed, "inc", "twice.h"), "w") as f:
        f.write("int twice(int x);\n")
    with open(os.path.join(mixed, "prelude.h"), "w") as f:
        f.write("#define TWICE_FACTOR 2\n")
    with open(os.path.join(mixed, "twice.c"), "w") as f:
        f.write('#include "twice.h"\nint twice(int x) { return TWICE_FACTOR * x; }\n')
    with open(os.path.join(mixed, "mixed.cpp"), "w") as f:
        f.write('#include <pith/inferlet.hpp>\nextern "C" {\n#include <twice.h>\n}\n'
                'pith::Status mixed(pith::Flags& flags) {\n'
                '  uint32_t n = flags.u32("--n", 21, "the number to double");\n'
                '  PITH_TRY(flags.done());\n'
                '  return pith::send(std::to_string(twice(static_cast<int>(n))));\n}\n'
                'PITH_INFERLET(mixed)\n')
    with open(os.path.join(mixed, "inferlet.build"), "w") as f:
        f.write("# extra inputs\nc_source twice.c\ninclude_dir inc\nc_prelude prelude.h\n")
    run("inferlet", "build", mixed + "/", cwd=tmp)
    out, _ = run("run-local", os.path.join(tmp, "mixed.wasm"), "--no-stdin", "--", "--n", "4")
    assert out.split() == ["8"], out
    with open(os.path.join(mixed, "inferlet.build"), "a") as f:
        f.write("c_sauce twice.c\n")
    _, err = run("inferlet", "build", mixed, cwd=tmp, expect=1)
    assert "unknown key 'c_sauce'" in err, err

    # Never overwrite; refuse names that are not identifiers.
    _, err = run("inferlet", "new", "my_agent", "-o", tmp, expect=1)
    assert "already exists" in err, err
    _, err = run("inferlet", "new", "../escape", "-o", tmp, expect=1)
    assert "not a valid name" in err, err
print("1 passed, 0 failed")
