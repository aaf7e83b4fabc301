"""The Python user's baseline for `pith bench model --transformers PYTHON`: the same three tests
on the same Hugging Face folder through transformers' own `generate`, as a user of PyTorch would
run the model (its default attention, the folder's dtype, greedy, the KV cache generate keeps).

  prefill: one sequence of N random tokens, generate(max_new_tokens=1); tokens/s = N / time
  decode:  one sequence, generate(max_new_tokens=n+1) less generate(max_new_tokens=1) from a
           one-token prompt; tokens/s = n / the difference
  batch:   B one-token prompts, the same difference over `steps` tokens; tokens/s = B * steps / it

Each figure is the median of `reps` runs after a warm-up. pith embeds this file and runs it with
the interpreter `--transformers` names (one that has torch and transformers); it prints one JSON
object. Nothing of it is needed to build or test pith.
"""

import argparse
import json
import statistics
import time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True, help="Hugging Face folder")
    ap.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N")
    ap.add_argument("--threads", type=int, default=0, help="CPU threads (0: torch's default)")
    ap.add_argument("--n-prompt", type=int, default=512)
    ap.add_argument("--n-gen", type=int, default=128)
    ap.add_argument("--batch", default="", help="batch sizes, e.g. 1,16,64")
    ap.add_argument("--batch-steps", type=int, default=16)
    ap.add_argument("--reps", type=int, default=3)
    a = ap.parse_args()

    import torch
    import transformers

    if a.threads > 0:
        torch.set_num_threads(a.threads)
    device = torch.device(a.device)
    model = transformers.AutoModelForCausalLM.from_pretrained(a.model, dtype="auto").to(device)
    model.eval()
    # Random weights pick random tokens: never stop early at an end-of-sequence token.
    model.generation_config.eos_token_id = None
    model.generation_config.pad_token_id = 0
    vocab = model.config.get_text_config().vocab_size
    gen = torch.Generator().manual_seed(1)

    def sync():
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    def timed_generate(batch, prompt_len, new_tokens):
        ids = torch.randint(0, vocab, (batch, prompt_len), generator=gen).to(device)
        mask = torch.ones_like(ids)
        sync()
        t0 = time.perf_counter()
        with torch.inference_mode():
            out = model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=new_tokens,
                                 min_new_tokens=new_tokens, do_sample=False)
        sync()
        elapsed = time.perf_counter() - t0
        assert out.shape == (batch, prompt_len + new_tokens), out.shape
        return elapsed

    def median_of(fn):
        fn()  # warm-up: kernels chosen, caches allocated
        return statistics.median(fn() for _ in range(a.reps))

    def decode_rate(batch, steps):
        def once():
            return timed_generate(batch, 1, steps + 1) - timed_generate(batch, 1, 1)
        return batch * steps / median_of(once)

    result = {
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "device": str(device),
        "dtype": str(model.dtype).replace("torch.", ""),
        "attn_implementation": model.config._attn_implementation,
        "threads": torch.get_num_threads(),
        "reps": a.reps,
    }
    if a.n_prompt > 0:
        result["pp_tok_s"] = a.n_prompt / median_of(lambda: timed_generate(1, a.n_prompt, 1))
    if a.n_gen > 0:
        result["tg_tok_s"] = decode_rate(1, a.n_gen)
    batches = [int(b) for b in a.batch.split(",") if b]
    if batches:
        result["batch_tg_tok_s"] = {str(b): decode_rate(b, a.batch_steps) for b in batches}
    print(json.dumps(result))


if __name__ == "__main__":
    main()
