#!/usr/bin/env python3
"""Reference splits of a pre-tokenizer pattern, made with the `regex` module (what Hugging Face
tokenizers' Split and tiktoken implement), for tests/unit/tokenizer_pre_test.cpp. An oracle
tool: building and testing pith never need it (the oracle venv of tools/README.md has `regex`).

Usage: pre_tokenizer_oracle.py NAME PATTERN OUT.json"""
import json
import sys

import regex

TEXTS = [
    "Hello world! I'M here, you're there; they'LL see what we'd do.",
    "CamelCaseWords and ALLCAPS and mixedUPandDown and iPhone",
    "1234567 12 3.14159 1,000,000 0x1F",
    "line one\nline two\r\n\r\n  indented\n\n\n",
    "path/to/file.txt // comment /* block */ a//b\n/etc/",
    "   leading and trailing spaces   ",
    "tabs\tand\t\tmore\t",
    "émigré naïve café Ångström ÉCOLE",
    "नमस्ते दुनिया",  # combining marks (Devanagari)
    "Привет, мир! ПРИВЕТ мир",
    "中文文本，还有标点。日本語のテキスト",
    "한국어 텍스트입니다",
    "emoji 😀👍🏽 and symbols ©®™ → ∑∫",
    "def f(x):\n    return x**2  # square\n",
    "{\"key\": [1, 2, 3], 'k2': null}",
    "'s 't 're 've 'm 'll 'd 'S 'T 'RE",
    "don't DON'T Don'T o'clock",
    "a\u0301b\u0308 (combining acute, diaeresis)",
    "?!... ---- ==== ___",
    "",
]


def main():
    name, pattern, out = sys.argv[1:4]
    cases = [{"text": t, "pieces": regex.findall(pattern, t)} for t in TEXTS]
    for c in cases:
        assert "".join(c["pieces"]) == c["text"], c
    json.dump({"pre": name, "pattern": pattern, "source": f"regex {regex.__version__}",
               "cases": cases}, open(out, "w"), ensure_ascii=False, indent=1)
    print(f"{out}: {len(cases)} texts")


if __name__ == "__main__":
    main()
