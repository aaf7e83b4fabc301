#!/usr/bin/env python3
"""End-to-end: a random tiny model of a family with its own layer kinds (Gemma 4, gpt-oss) served
by the real `pith serve` through its OpenAI endpoint.

Usage: family_serving.py PITH VOCAB_GGUF ORACLE_DIR [VARIANT]

VARIANT is gemma4 (the 31B layout: sliding layers and a global layer with larger heads, fewer KV
heads and V = K; the KV pool then holds layers of different shapes), a variant of
ORACLE_DIR/variants.json (gemma4-e2b: per-layer token embeddings, KV-sharing layers), or
gpt-oss (attention sinks, windows of 4 on every other layer across the 16-token chunks, biased
experts). Checked:
- batching: 8 concurrent greedy completions, prefilled in chunks of 16 tokens beside each other's
  decode steps, equal their one-at-a-time outputs;
- the prefix cache: a repeated prompt reuses its cached pages (`cached_tokens`) and gives the
  identical output;
- KV pressure: with a pool too small for all 8 at once, allocations wait and instances are
  suspended and resumed (their pages of every layer shape swapped); the outputs still equal.
"""
import concurrent.futures
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pith_harness import Server, model_gen_args  # noqa: E402

# The CUDA backend does not run these families yet (engine/cuda/family_support.h).

pith, vocab, oracle_dir = sys.argv[1], sys.argv[2], sys.argv[3]
variant = sys.argv[4] if len(sys.argv) > 4 else "gemma4"
WORDS = "the river city north light stone garden paper window music early winter".split()
PROMPTS = [" ".join(WORDS[(i * 5 + j * 7) % len(WORDS)] for j in range(6 + 7 * i)) for i in range(8)]
MAX_TOKENS = 12


def complete(server, prompt):
    _, body = server.request("POST", "/v1/completions", {
        "prompt": prompt, "max_tokens": MAX_TOKENS, "temperature": 0})
    return body["choices"][0]["text"], body["usage"]


def concurrently(server):
    with concurrent.futures.ThreadPoolExecutor(len(PROMPTS)) as pool:
        return list(pool.map(lambda p: complete(server, p)[0], PROMPTS))


def main():
    family, options = model_gen_args(oracle_dir, variant)
    with tempfile.TemporaryDirectory() as tmp:
        model = os.path.join(tmp, f"{variant}.gguf")
        subprocess.run([pith, "model", "gen", "--preset", "tiny", "--arch", family, "--format",
                        "gguf", "--dtype", "f32", "--seed", "5", "--vocab", vocab, "-q", "-o",
                        model] + options, check=True)

        with Server(pith, model, "--no-prefix-cache", "--max-batch-tokens", "16") as s:
            runs = [complete(s, p) for p in PROMPTS]
            single = [text for text, _ in runs]
            lengths = [u["prompt_tokens"] for _, u in runs]
            assert len(set(single)) > 1, single  # the prompts lead to different outputs
            together = concurrently(s)
            assert together == single, (together, single)
            print(f"{variant}: 8 concurrent completions (prompts of {min(lengths)}..{max(lengths)} "
                  "tokens, 16-token chunks) equal their single outputs")

        with Server(pith, model) as s:
            prompt = PROMPTS[5]
            first, u1 = complete(s, prompt)
            hits = s.metric("pith_prefix_cache_hit_tokens_total")
            again, u2 = complete(s, prompt)
            hit = s.metric("pith_prefix_cache_hit_tokens_total") - hits
            cached = u2.get("prompt_tokens_details", {}).get("cached_tokens", 0)
            assert again == first == single[5], (again, first, single[5])
            assert hit >= 16 and cached == hit, (hit, u2)
            print(f"{variant}: repeated prompt of {u2['prompt_tokens']} tokens reused {int(hit)} "
                  "cached tokens, same output")

        # Up to 10 KV pages of 16 tokens per request; 12 pages for all 8. A page's size depends
        # on the variant's layer shapes: a 64 MiB pool of P pages bounds it within 1/P, so 12.5
        # times 64 MiB / P holds exactly 12 pages.
        probe_bytes = 64 << 20
        with Server(pith, model, "--kv-memory", str(probe_bytes)) as probe:
            budget = str(int(12.5 * probe_bytes / probe.metric("pith_kv_pages_total")))
        with Server(pith, model, "--no-prefix-cache", "--kv-memory", budget) as s:
            pages = s.metric("pith_kv_pages_total")
            assert pages == 12, pages
            together = concurrently(s)
            assert together == single, (together, single)
            suspensions = s.metric("pith_kv_suspensions_total")
            print(f"{variant}: under KV pressure ({int(pages)} pages, {int(suspensions)} "
                  "suspensions) the 8 outputs equal the single ones")
    print("1 passed, 0 failed")


main()
