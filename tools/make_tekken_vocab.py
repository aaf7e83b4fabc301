#!/usr/bin/env python3
"""Writes a vocabulary-only GGUF of Mistral's Tekken tokenizer (Mistral NeMo, Mistral Small 3,
Ministral, Devstral, Magistral: `tokenizer.ggml.pre` "tekken") from the tekken JSON that the
PyPI package mistral-common ships, with tokenizer test vectors whose expected ids come from
mistral-common's own Tekkenizer (tiktoken underneath): the reference pith's "tekken"
pre-tokenizer and byte-level BPE are checked against (tokenizer_vectors_test).

The GGUF is what a converter writes for these models: the 1000 special tokens first
(<unk>, <s>, </s>, [INST], ..., [TOOL_CALLS], ..., <SPECIAL_N> fillers), then the ranked byte
tokens in GPT-2's byte spelling, and BPE merges recovered from the ranks (each token's merge is
the last step of byte pair encoding its bytes with the lower-ranked tokens only, as tiktoken
would build it).

    python3 -m venv /tmp/mc && /tmp/mc/bin/pip install mistral-common==1.13.1
    /tmp/mc/bin/python tools/make_tekken_vocab.py tests/data/tokenizer/tekken-240911.gguf \\
        tests/data/tokenizer/ggml-vocab-qwen2.gguf.inp
(writes tekken-240911.gguf, .gguf.inp: the inputs given plus Tekken-specific ones, .gguf.out)
"""
import base64
import json
import os
import struct
import sys

import mistral_common
from mistral_common.tokens.tokenizers.tekken import Tekkenizer

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_byte_vocab import byte_spelling, gguf_string, kv  # noqa: E402

SEPARATOR = "\n__ggml_vocab_test__\n"
# Inputs that reach what differs in Tekken: single digits, no contractions rule, CJK and accents,
# code with newlines and slashes, the control tokens' spellings written as plain text.
EXTRA_INPUTS = [
    "1234567890 3.14159 1,000,000",
    "I'm sure they'll say it's fine, we've done it'd",
    "Schöne Grüße aus München — ça va? Ελληνικά 日本語のテキスト 한국어",
    "def f(x):\n    return x / 2  # halve\n\n\nprint(f(10))\r\n",
    "path/to/file.txt\n/usr/bin//env\n",
    "[INST] not a control token [/INST] [TOOL_CALLS] </s>",
    "   leading spaces and trailing   ",
    "emoji 🦙🔥 and mixed CamelCaseWords XMLHttpRequest",
]


def merge_of(token, ranks):
    """The two lower-ranked tokens byte pair encoding joins last into `token`, or None."""
    limit = ranks[token]
    parts = [bytes([b]) for b in token]
    while len(parts) > 2:
        best, at = None, -1
        for i in range(len(parts) - 1):
            r = ranks.get(parts[i] + parts[i + 1])
            if r is not None and r < limit and (best is None or r < best):
                best, at = r, i
        if best is None:
            return None
        parts[at:at + 2] = [parts[at] + parts[at + 1]]
    return (parts[0], parts[1]) if len(parts) == 2 else None


def main(out_path, inputs_path):
    source = os.path.join(os.path.dirname(mistral_common.__file__), "data", "tekken_240911.json")
    reference = Tekkenizer.from_file(source)
    data = json.load(open(source))
    n_special = reference.num_special_tokens
    n_ranked = reference.n_words - n_special
    ranked = [base64.b64decode(v["token_bytes"]) for v in data["vocab"][:n_ranked]]
    ranks = {b: r for r, b in enumerate(ranked)}
    spell = byte_spelling()

    def spelled(b):
        return "".join(spell[x] for x in b)

    tokens = [reference.id_to_piece(i) for i in range(n_special)] + [spelled(b) for b in ranked]
    types = [2] + [3] * (n_special - 1) + [1] * n_ranked  # unknown, control, normal
    merges = []
    for b in ranked:
        if len(b) > 1:
            pair = merge_of(b, ranks)
            if pair:
                merges.append(spelled(pair[0]) + " " + spelled(pair[1]))
    STRING, ARRAY, UINT32, INT32, BOOL = 8, 9, 4, 5, 7

    def strings(key, values):
        return kv(key, ARRAY, struct.pack("<IQ", STRING, len(values)) +
                  b"".join(gguf_string(v) for v in values))

    kvs = [
        kv("general.architecture", STRING, gguf_string("llama")),
        kv("general.name", STRING, gguf_string("Tekken 240911 (mistral-common 1.13.1)")),
        kv("tokenizer.ggml.model", STRING, gguf_string("gpt2")),
        kv("tokenizer.ggml.pre", STRING, gguf_string("tekken")),
        strings("tokenizer.ggml.tokens", tokens),
        kv("tokenizer.ggml.token_type", ARRAY,
           struct.pack("<IQ", INT32, len(types)) + b"".join(struct.pack("<i", t) for t in types)),
        strings("tokenizer.ggml.merges", merges),
        kv("tokenizer.ggml.bos_token_id", UINT32, struct.pack("<I", reference.bos_id)),
        kv("tokenizer.ggml.eos_token_id", UINT32, struct.pack("<I", reference.eos_id)),
        kv("tokenizer.ggml.unknown_token_id", UINT32, struct.pack("<I", 0)),
        kv("tokenizer.ggml.add_bos_token", BOOL, struct.pack("<?", True)),
        kv("tokenizer.ggml.add_eos_token", BOOL, struct.pack("<?", False)),
    ]
    body = b"GGUF" + struct.pack("<IQQ", 3, 0, len(kvs)) + b"".join(kvs)
    body += b"\0" * (-len(body) % 32)  # general.alignment (no tensors follow)
    with open(out_path, "wb") as f:
        f.write(body)

    inputs = open(inputs_path, encoding="utf-8").read().split(SEPARATOR)
    inputs = [s for s in inputs if s != ""] + EXTRA_INPUTS
    with open(out_path + ".inp", "w", encoding="utf-8") as f:
        f.write(SEPARATOR.join(inputs) + SEPARATOR)
    with open(out_path + ".out", "w", encoding="utf-8") as f:
        for s in inputs:
            ids = reference.encode(s, bos=False, eos=False)
            f.write("".join(f" {i}" for i in ids) + "\n")
    print(f"{out_path}: {len(tokens)} tokens, {len(merges)} merges, {len(inputs)} vectors")


if __name__ == "__main__":
    main(*sys.argv[1:3])
