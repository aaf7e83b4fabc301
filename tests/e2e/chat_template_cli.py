#!/usr/bin/env python3
"""End-to-end check of `pith chat-template`: the real binary renders every case of the bundled
oracle templates (tests/data/templates/*.expected.json) exactly, with no added newline; a
template's raise_exception exits non-zero with its message on stderr; bad input exits 1 with a
"pith: error:" message. Usage: chat_template_cli.py PITH TEMPLATES_DIR"""
import glob
import json
import os
import subprocess
import sys
import tempfile


def run(args):
    return subprocess.run(args, capture_output=True, timeout=60)


def main():
    pith, tdir = sys.argv[1:3]
    n = 0
    with tempfile.TemporaryDirectory() as tmp:
        for expected in sorted(glob.glob(os.path.join(tdir, "*.expected.json"))):
            template = expected[: -len(".expected.json")] + ".jinja"
            for i, case in enumerate(json.load(open(expected, encoding="utf-8"))):
                path = os.path.join(tmp, f"case{n}.json")
                with open(path, "w", encoding="utf-8") as f:
                    json.dump(case, f, ensure_ascii=False)
                r = run([pith, "chat-template", "--template", template, "--case", path])
                where = f"{os.path.basename(template)} {case['name']}"
                if case["exception"] is not None:
                    assert r.returncode != 0, f"{where}: expected failure"
                    assert case["exception"] in r.stderr.decode(), f"{where}: stderr {r.stderr!r}"
                else:
                    assert r.returncode == 0, f"{where}: exit {r.returncode}: {r.stderr!r}"
                    got = r.stdout.decode("utf-8")
                    assert got == case["output"], f"{where}: got {got!r}"
                n += 1
        # raise_exception: exit code and message.
        bad = os.path.join(tmp, "bad.json")
        with open(bad, "w") as f:
            json.dump({"messages": [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}],
                       "bos_token": "<s>", "eos_token": "</s>"}, f)
        r = run([pith, "chat-template", "--template",
                 os.path.join(tdir, "mistralai-Mistral-Nemo-Instruct-2407.jinja"), "--case", bad])
        assert r.returncode == 1 and b"conversation roles must alternate" in r.stderr, r
        # Unsupported construct, missing file: exit 1 with a clear message.
        broken = os.path.join(tmp, "broken.jinja")
        with open(broken, "w") as f:
            f.write("line 1\n{% include 'other.jinja' %}")
        r = run([pith, "chat-template", "--template", broken, "--case", bad])
        assert r.returncode == 1 and b"pith: error: chat template line 2: unsupported tag 'include'" in r.stderr, r
        r = run([pith, "chat-template", "--template", os.path.join(tmp, "missing.jinja"), "--case", bad])
        assert r.returncode == 1 and b"pith: error:" in r.stderr, r
    print(f"ok: {n} cases")


if __name__ == "__main__":
    main()
