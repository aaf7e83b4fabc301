#!/usr/bin/env python3
"""Reference logits from Hugging Face transformers for a model folder (`pith model gen --format
hf`), printed in the format of `pith logits --json` so tools/compare_logits.py compares them
with pith's. Runs on the GPU machine (PyTorch with CUDA and transformers installed there):
the model is loaded in its stored dtype on cuda:0 and run once over the whole token sequence.

Usage: hf_logits_reference.py MODEL_DIR --tokens 1,2,3 [--top 50] [--device cuda] > ref.json"""
import argparse
import json

import torch
from transformers import AutoModelForCausalLM


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--tokens", required=True)
    ap.add_argument("--top", type=int, default=50)
    ap.add_argument("--device", default="cuda")
    a = ap.parse_args()
    tokens = [int(t) for t in a.tokens.split(",")]
    model = AutoModelForCausalLM.from_pretrained(a.model, torch_dtype="auto").to(a.device).eval()
    with torch.no_grad():
        ids = torch.tensor([tokens], device=a.device)
        logits = model(ids).logits[0].float()  # [n][vocab]
    lse = torch.logsumexp(logits, dim=-1)
    # Sort by logit, ties by lower id (pith's rule): stable sort of the ids in ascending order.
    order = torch.sort(logits, dim=-1, descending=True, stable=True).indices[:, : a.top]
    positions = []
    for i in range(len(tokens)):
        top = [{"id": int(j), "logit": float(logits[i, j])} for j in order[i].tolist()]
        positions.append({"pos": i, "logsumexp": float(lse[i]), "top": top})
    print(json.dumps({"tokens": tokens, "positions": positions}))


if __name__ == "__main__":
    main()
