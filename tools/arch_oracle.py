#!/usr/bin/env python3
"""Independent logits oracle for a model architecture: computes, with llama.cpp (on a GGUF file)
and/or Hugging Face transformers on CPU torch (on an HF folder), the logits of every position
of a given token sequence, and writes them in the format of tests/data/oracle/*.json (read by
tests/e2e/logits_oracle.py and tools/compare_logits.py).

This is an oracle tool for producing committed reference data. Building and testing pith never
need it, nor its Python packages (tools/README.md says how to set up its virtual environment).

Both sides run one forward pass over the whole sequence, with the token ids given directly (no
BOS added), in float32:
  llama.cpp     llama-cpp-python on 1 thread, no GPU, model mmapped, f32 K and V caches, flash
                attention off, full-size sliding-window cache, one batch and ubatch for the prompt.
  transformers  AutoModelForCausalLM in torch.float32 with eager attention (soft-capping and
                sliding windows applied as the reference implementation defines them), no cache.

Usage:
  arch_oracle.py --gguf MODEL.gguf --tokens 1,2,3 --out REF.json [--raw REF.f32]
  arch_oracle.py --hf MODEL_DIR --tokens 1,2,3 --out REF.json [--raw REF.f32]
With both --gguf and --hf, writes REF.llama-cpp.json and REF.transformers.json (and .f32 files
likewise) and prints the largest difference between the two full logit matrices.
--raw writes all logits as little-endian float32, [n_tokens][n_vocab] (like oracle/*.f32)."""
import argparse
import json
import os
import sys

import numpy as np

# llama.cpp commit bundled in each llama-cpp-python release used so far (the package does not
# report it at run time).
LLAMA_CPP_COMMITS = {"0.3.36": "0c1e570"}


def fail(message):
    sys.exit(f"arch_oracle: error: {message}")


def parse_tokens(text):
    try:
        tokens = [int(t) for t in text.split(",") if t.strip() != ""]
    except ValueError:
        fail(f"--tokens must be comma-separated integers, got {text!r}")
    if not tokens:
        fail("--tokens is empty")
    return tokens


def check_token_range(tokens, n_vocab):
    bad = [t for t in tokens if t < 0 or t >= n_vocab]
    if bad:
        fail(f"token id {bad[0]} is outside the vocabulary (0..{n_vocab - 1})")


def llama_cpp_logits(path, tokens, verbose, lora=None):
    """Returns (logits float32 [n][vocab], token texts, metadata) from llama.cpp."""
    import llama_cpp

    if not os.path.isfile(path):
        fail(f"no such GGUF file: {path}")
    n = len(tokens)
    batch = max(n, 32)
    try:
        llm = llama_cpp.Llama(model_path=path, n_gpu_layers=0, use_mmap=True, n_ctx=n + 8,
                              n_batch=batch, n_ubatch=batch, n_threads=1, n_threads_batch=1,
                              logits_all=True, flash_attn=False, swa_full=True,
                              offload_kqv=False, op_offload=False,
                              type_k=llama_cpp.GGML_TYPE_F32, type_v=llama_cpp.GGML_TYPE_F32,
                              lora_path=lora, verbose=verbose)
    except ValueError as e:  # llama.cpp's own reason goes to its log, shown with --verbose
        fail(f"llama.cpp cannot load {path} ({e}); --verbose shows llama.cpp's log")
    n_vocab = llm.n_vocab()
    check_token_range(tokens, n_vocab)
    llm.eval(tokens)
    logits = np.array(llm.scores[:n, :], dtype=np.float32)
    vocab = llama_cpp.llama_model_get_vocab(llm.model)
    texts = [llama_cpp.llama_vocab_get_text(vocab, i).decode("utf-8", "replace")
             for i in range(n_vocab)]
    version = llama_cpp.__version__
    commit = LLAMA_CPP_COMMITS.get(version, "unknown commit")
    meta = {"source": f"llama.cpp {commit} (bundled with llama-cpp-python {version})",
            "dtype": f"weights as stored ({llm._model.desc()}), f32 activations",
            "kv_cache_type": "f32", "n_threads": 1}
    if lora:
        meta["lora"] = f"{os.path.basename(lora)} (llama.cpp --lora, scale 1)"
    return logits, texts, meta


def transformers_logits(folder, tokens, threads, lora=None):
    """Returns (logits float32 [n][vocab], token texts or None, metadata) from transformers."""
    import torch
    import transformers
    from transformers import AutoModelForCausalLM

    if not os.path.isfile(os.path.join(folder, "config.json")):
        fail(f"{folder} is not a Hugging Face model folder (no config.json)")
    torch.set_num_threads(threads)
    transformers.utils.logging.disable_progress_bar()
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32,
                                                 attn_implementation="eager").eval()
    if lora:  # PEFT applies the adapter's deltas on the fly (no merge)
        import peft

        model = peft.PeftModel.from_pretrained(model, lora).eval()
    n_vocab = model.get_output_embeddings().weight.shape[0]
    check_token_range(tokens, n_vocab)
    with torch.no_grad():
        out = model(torch.tensor([tokens], dtype=torch.long), use_cache=False)
    logits = out.logits[0].to(torch.float32).numpy()
    texts = None
    try:
        from transformers import AutoTokenizer

        tok = AutoTokenizer.from_pretrained(folder)
        texts = tok.convert_ids_to_tokens(list(range(n_vocab)))
    except Exception as e:  # texts are informative only; a folder without a tokenizer is fine
        print(f"arch_oracle: no token texts ({type(e).__name__})", file=sys.stderr)
    config = json.load(open(os.path.join(folder, "config.json")))
    stored = config.get("dtype", config.get("torch_dtype", "unknown"))
    meta = {"source": f"transformers {transformers.__version__}, torch {torch.__version__}",
            "dtype": f"float32 (weights stored as {stored}), eager attention",
            "n_threads": threads}
    if lora:
        import peft

        meta["lora"] = f"{os.path.basename(os.path.normpath(lora))} (peft {peft.__version__})"
    return logits, texts, meta


def f32(x):
    """A float32 value as the shortest decimal that reads back to the same float32."""
    return float(f"{float(x):.9g}")


def oracle(model_name, tokens, logits, texts, meta, top_n):
    n_vocab = logits.shape[1]
    top_n = min(top_n, n_vocab)
    doc = {"model": model_name, "n_vocab": n_vocab, "mode": "prefill", **meta, "tokens": tokens}
    if texts is not None:
        doc["token_texts"] = [texts[t] for t in tokens]
    ids = np.arange(n_vocab)
    positions = []
    for pos, token in enumerate(tokens):
        row = logits[pos]
        wide = row.astype(np.float64)
        peak = wide.max()
        lse = peak + np.log(np.exp(wide - peak).sum())
        # Descending logit, ties by lower id.
        order = np.lexsort((ids, -row))[:top_n]
        top = []
        for i in order:
            entry = {"id": int(i), "logit": f32(row[i])}
            if texts is not None and texts[i] is not None:
                entry["text"] = texts[i]
            top.append(entry)
        positions.append({"pos": pos, "token": token, "logsumexp": f32(lse),
                          "mean": f32(wide.mean()), "rms": f32(np.sqrt((wide * wide).mean())),
                          "top": top})
    doc["positions"] = positions
    return doc


def write_json(doc, path):
    """One position per line, like the committed oracle files."""
    head = {k: v for k, v in doc.items() if k != "positions"}
    lines = [f"  {json.dumps(k)}: {json.dumps(v, ensure_ascii=False)}" for k, v in head.items()]
    rows = ",\n".join(f"    {json.dumps(p, ensure_ascii=False)}" for p in doc["positions"])
    lines.append(f'  "positions": [\n{rows}\n  ]')
    with open(path, "w", encoding="utf-8") as f:
        f.write("{\n" + ",\n".join(lines) + "\n}\n")


def with_suffix(path, suffix):
    stem, ext = os.path.splitext(path)
    return f"{stem}.{suffix}{ext}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gguf", help="GGUF model file (llama.cpp side)")
    ap.add_argument("--hf", help="Hugging Face model folder (transformers side)")
    ap.add_argument("--tokens", required=True, help="comma-separated token ids (no BOS added)")
    ap.add_argument("--out", required=True, help="output JSON")
    ap.add_argument("--raw", help="also write all logits as float32 [n_tokens][n_vocab]")
    ap.add_argument("--top", type=int, default=40, help="top entries per position (40)")
    ap.add_argument("--threads", type=int, default=1, help="torch threads (1)")
    ap.add_argument("--verbose", action="store_true", help="show llama.cpp's log")
    ap.add_argument("--lora-gguf", help="GGUF LoRA adapter applied on the llama.cpp side")
    ap.add_argument("--lora-hf", help="PEFT adapter folder applied on the transformers side")
    a = ap.parse_args()
    if not a.gguf and not a.hf:
        fail("give --gguf FILE and/or --hf FOLDER")
    if a.top < 1:
        fail("--top must be at least 1")
    tokens = parse_tokens(a.tokens)
    runs = []
    if a.gguf:
        runs.append(("llama-cpp", os.path.basename(a.gguf),
                     *llama_cpp_logits(a.gguf, tokens, a.verbose, a.lora_gguf)))
    if a.hf:
        runs.append(("transformers", os.path.basename(os.path.normpath(a.hf)),
                     *transformers_logits(a.hf, tokens, a.threads, a.lora_hf)))
    both = len(runs) == 2
    for label, name, logits, texts, meta in runs:
        out = with_suffix(a.out, label) if both else a.out
        write_json(oracle(name, tokens, logits, texts, meta, a.top), out)
        print(f"{out}: {len(tokens)} positions, n_vocab {logits.shape[1]}, {meta['source']}")
        if a.raw:
            logits.astype("<f4").tofile(with_suffix(a.raw, label) if both else a.raw)
    if both:
        x, y = runs[0][2], runs[1][2]
        if x.shape != y.shape:
            fail(f"logit shapes differ: llama.cpp {x.shape}, transformers {y.shape}")
        d = np.abs(x.astype(np.float64) - y)
        scale = 1 + np.abs(y).max(axis=1)
        print(f"llama.cpp vs transformers: max |dlogit| {d.max():.3g}, "
              f"max |dlogit| / (1 + max |logit|) {(d.max(axis=1) / scale).max():.3g}, "
              f"top-1 equal {(x.argmax(1) == y.argmax(1)).sum()}/{len(tokens)}")


if __name__ == "__main__":
    main()
