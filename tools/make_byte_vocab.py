#!/usr/bin/env python3
"""Writes a vocabulary-only GGUF whose tokens are the 256 bytes (GPT-2's byte-to-unicode
spelling, no merges) plus Llama 3's chat control tokens. Every text has exactly one
tokenization under it, so a random-weight model generated with it (`pith model gen --vocab`)
writes text that tokenizes back into its own tokens, as a trained model's text does: what a
predicted output's drafts (tokenized text) need to be measured on random weights.
With `mistral`, Mistral's control tokens instead, first as in Tekken GGUFs (<unk>, <s>, </s>,
[INST], ..., [TOOL_CALLS], [ARGS], [CALL_ID], [THINK], [/THINK]: the spellings of
mistral-common's SpecialTokens), for the reasoning and tool-call markers of Magistral's
templates, which the 2024 Tekken vocabulary in tests/data lacks.
With `harmony`, gpt-oss's o200k_harmony control tokens after the bytes (<|startoftext|>,
<|endoftext|>, <|return|>, <|constrain|>, <|channel|>, <|start|>, <|end|>, <|message|>,
<|call|>), pre-tokenizer gpt-4o and no BOS added, as gpt-oss GGUF files declare them: the
harmony message format of its chat template and outputs.

    tools/make_byte_vocab.py tests/data/tokenizer/byte-vocab.gguf
    tools/make_byte_vocab.py tests/data/tokenizer/byte-vocab-mistral.gguf mistral
    tools/make_byte_vocab.py tests/data/tokenizer/byte-vocab-harmony.gguf harmony
"""
import struct
import sys

SPECIALS = ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>",
            "<|eot_id|>"]
MISTRAL_SPECIALS = ["<unk>", "<s>", "</s>", "[INST]", "[/INST]", "[AVAILABLE_TOOLS]",
                    "[/AVAILABLE_TOOLS]", "[TOOL_RESULTS]", "[/TOOL_RESULTS]", "[TOOL_CALLS]",
                    "[IMG]", "<pad>", "[IMG_BREAK]", "[IMG_END]", "[PREFIX]", "[MIDDLE]",
                    "[SUFFIX]", "[SYSTEM_PROMPT]", "[/SYSTEM_PROMPT]", "[TOOL_CONTENT]", "[ARGS]",
                    "[CALL_ID]", "[THINK]", "[/THINK]"]
HARMONY_SPECIALS = ["<|startoftext|>", "<|endoftext|>", "<|return|>", "<|constrain|>",
                    "<|channel|>", "<|start|>", "<|end|>", "<|message|>", "<|call|>"]


def byte_spelling():
    """GPT-2's reversible map from bytes to printable characters."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + \
        list(range(ord("®"), ord("ÿ") + 1))
    spelled = {b: chr(b) for b in printable}
    extra = 0
    for b in range(256):
        if b not in spelled:
            spelled[b] = chr(256 + extra)
            extra += 1
    return [spelled[b] for b in range(256)]


def gguf_string(s):
    data = s.encode("utf-8")
    return struct.pack("<Q", len(data)) + data


def kv(key, type_id, payload):
    return gguf_string(key) + struct.pack("<I", type_id) + payload


def main(path, specials="llama3"):
    if specials == "mistral":
        tokens = MISTRAL_SPECIALS + byte_spelling()
        types = [2] + [3] * (len(MISTRAL_SPECIALS) - 1) + [1] * 256  # unknown, control, normal
        pre, bos, eos = "tekken", 1, 2
    elif specials == "harmony":
        tokens = byte_spelling() + HARMONY_SPECIALS
        types = [1] * 256 + [3] * len(HARMONY_SPECIALS)
        pre, bos, eos = "gpt-4o", 256, 256 + HARMONY_SPECIALS.index("<|return|>")
    else:
        tokens = byte_spelling() + SPECIALS
        types = [1] * 256 + [3] * len(SPECIALS)  # normal, control
        pre, bos, eos = "default", 256, 256 + SPECIALS.index("<|eot_id|>")
    STRING, ARRAY, UINT32, INT32, BOOL = 8, 9, 4, 5, 7
    kvs = [
        kv("general.architecture", STRING, gguf_string("llama")),
        kv("tokenizer.ggml.model", STRING, gguf_string("gpt2")),
        kv("tokenizer.ggml.pre", STRING, gguf_string(pre)),
        kv("tokenizer.ggml.tokens", ARRAY,
           struct.pack("<IQ", STRING, len(tokens)) + b"".join(gguf_string(t) for t in tokens)),
        kv("tokenizer.ggml.token_type", ARRAY,
           struct.pack("<IQ", INT32, len(types)) + b"".join(struct.pack("<i", t) for t in types)),
        kv("tokenizer.ggml.merges", ARRAY, struct.pack("<IQ", STRING, 0)),
        kv("tokenizer.ggml.bos_token_id", UINT32, struct.pack("<I", bos)),
        kv("tokenizer.ggml.eos_token_id", UINT32, struct.pack("<I", eos)),
        kv("tokenizer.ggml.add_bos_token", BOOL, struct.pack("<?", specials != "harmony")),
    ]
    header = b"GGUF" + struct.pack("<IQQ", 3, 0, len(kvs))
    body = header + b"".join(kvs)
    body += b"\0" * (-len(body) % 32)  # general.alignment (no tensors follow)
    with open(path, "wb") as f:
        f.write(body)


if __name__ == "__main__":
    main(*sys.argv[1:3])
