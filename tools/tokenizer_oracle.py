#!/usr/bin/env python3
"""Independent tokenizer oracle: llama.cpp (through llama-cpp-python) on vocabulary-only GGUF
files, for what llama.cpp's own test vectors leave out: BOS/EOS added by default, special tokens
written in text (with and without parse_special, including whitespace they strip), and the
end-of-generation ids. Writes tests/data/tokenizer/special.llama-cpp.json, read by
tests/unit/tokenizer_families_test.cpp.

This is an oracle tool for producing committed reference data. Building and testing pith never
need it, nor its Python packages (tools/README.md says how to set up its virtual environment).

Usage: tokenizer_oracle.py OUT.json VOCAB.gguf...
"""
import ctypes
import json
import os
import sys

import llama_cpp as L

# A chat turn per family, in the format its chat template renders.
CHAT = {
    "qwen2": "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi there<|im_end|>\n"
    "<|im_start|>assistant\n",
    "phi-3": "<|system|>\nBe brief.<|end|>\n<|user|>\nHi there<|end|>\n<|assistant|>\n",
    "deepseek-llm": "<｜begin▁of▁sentence｜>User: Hi there\n\nAssistant:",
    "deepseek-coder": "<|User|>Write f<|EOT|>\n"
    "<｜fim▁begin｜>def f():<｜fim▁hole｜>\n<｜fim▁end｜>",
    "falcon": ">>QUESTION<<Hi there\n>>ANSWER<<",
    "gpt-2": "Hi<|endoftext|>there",
    "starcoder": "<fim_prefix>def f(x):<fim_suffix>\n    return x<fim_middle>",
    "llama-bpe": "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>",
    "llama-spm": "<s>[INST] Hi there [/INST]",
    "gemma-4": "<|turn>system\nBe brief.<turn|>\n<|turn>user\nHi  there\n\n\n<turn|>\n"
    "<|turn>model\n<|channel>thought\n<channel|>"
    "<|tool_call>call:get_weather{city:<|\"|>Paris<|\"|>}<tool_call|><|tool_response>",
}


def tokenize(vocab, text, add_special, parse_special):
    data = text.encode("utf-8")
    cap = len(data) + 16
    buf = (L.llama_token * cap)()
    n = L.llama_tokenize(vocab, data, len(data), buf, cap, add_special, parse_special)
    if n < 0:
        sys.exit(f"llama_tokenize failed for {text!r}")
    return list(buf[:n])


def token_text(vocab, tid):
    return L.llama_vocab_get_text(vocab, tid).decode("utf-8")


def describe(path):
    params = L.llama_model_default_params()
    params.vocab_only = True
    model = L.llama_model_load_from_file(path.encode(), params)
    if not model:
        sys.exit(f"{path}: llama.cpp cannot load it")
    vocab = L.llama_model_get_vocab(model)
    n = L.llama_vocab_n_tokens(vocab)
    eog = [i for i in range(n) if L.llama_vocab_is_eog(vocab, i)]
    name = os.path.basename(path)[len("ggml-vocab-"):-len(".gguf")]
    texts = ["Hello world", " Hello\n\nworld "]
    # Each end-of-generation token and the family's chat turn, with whitespace around tokens.
    texts += [f"a {token_text(vocab, i)}\n b" for i in eog]
    if name in CHAT:
        texts.append(CHAT[name])
    cases = []
    for text in texts:
        for add_special, parse_special in [(True, True), (False, False)]:
            cases.append({"text": text, "add_special": add_special,
                          "parse_special": parse_special,
                          "ids": tokenize(vocab, text, add_special, parse_special)})
    out = {"vocab": os.path.basename(path), "add_bos": bool(L.llama_vocab_get_add_bos(vocab)),
           "bos": L.llama_vocab_bos(vocab), "eos": L.llama_vocab_eos(vocab),
           "eog": eog, "cases": cases}
    L.llama_model_free(model)
    return out


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    L.llama_backend_init()
    result = {"source": f"llama-cpp-python {L.__version__}",
              "vocabs": [describe(p) for p in sys.argv[2:]]}
    with open(sys.argv[1], "w", encoding="utf-8") as f:
        json.dump(result, f, ensure_ascii=False, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
