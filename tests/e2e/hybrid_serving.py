#!/usr/bin/env python3
"""End-to-end: a hybrid model (a random tiny Qwen3.5: Gated DeltaNet layers beside attention)
served by the real `pith serve` through its OpenAI endpoint.

Usage: hybrid_serving.py PITH VOCAB_GGUF [ARCH]

Every request's sequence keeps a recurrent state beside its KV pages. Checked:
- batching: 8 concurrent greedy completions, prefilled in chunks of 16 tokens beside each other's
  decode steps (sequences at different positions in one batch), equal their one-at-a-time outputs;
- the prefix cache: a repeated prompt resumes from the state checkpoint the first one left (hit
  tokens, `cached_tokens` in its usage) and gives the identical output; pages and checkpoint
  show in /metrics (pith_recurrent_states); prompts sharing a system prompt: the second one
  leaves a checkpoint where it leaves the first (a third resumes there) and one at its own end
  (it resumes there when repeated), outputs equal to an uncached server's;
- KV pressure: with a KV pool too small for all 8 at once, allocations wait and instances may be
  suspended and resumed (their pages and states swapped out and back); the outputs still equal
  the single ones;
- a state pool for 3 sequences: the other requests wait for states (the prefix cache's
  checkpoints give way first) and the outputs still equal the single ones;
- predicted outputs: drafts verified in one forward, the recurrent state of rejected ones undone
  by the snapshot taken before it; the output is the greedy one whatever the prediction (exact:
  drafts accepted; edited: drafts rejected too);
- no state is left behind once the requests are done.
"""
import concurrent.futures
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pith_harness import Server  # noqa: E402

pith, vocab = sys.argv[1], sys.argv[2]
arch = sys.argv[3] if len(sys.argv) > 3 else "qwen35"
WORDS = "the river city north light stone garden paper window music early winter".split()
PROMPTS = [" ".join(WORDS[(i * 5 + j * 7) % len(WORDS)] for j in range(6 + 7 * i)) for i in range(8)]
SYSTEM = " ".join(WORDS[(j * 5) % len(WORDS)] for j in range(30))
SHARED = [SYSTEM + " " + " ".join(WORDS[(i + j * 3) % len(WORDS)] for j in range(20 + 4 * i))
          for i in range(3)]
MAX_TOKENS = 12


def complete(server, prompt, **extra):
    body = {"prompt": prompt, "max_tokens": MAX_TOKENS, "temperature": 0}
    body.update(extra)
    _, body = server.request("POST", "/v1/completions", body)
    return body["choices"][0]["text"], body["usage"]


def predictions(server):
    """(accepted, rejected) draft tokens of an exact and an edited prediction, each output
    checked against the greedy one without a prediction."""
    # A prompt whose random-weight output re-tokenizes into its own tokens (" time time ..."):
    # an exact prediction of it is accepted.
    prompt, kw = "Once upon a time", {"max_tokens": 32, "ignore_eos": True}
    reference, _ = complete(server, prompt, **kw)
    third = len(reference) // 3
    edited = reference[:third] + " EDITED " + reference[third + 4:]
    tallies = []
    for text in (reference, edited):
        got, usage = complete(server, prompt, prediction={"type": "content", "content": text},
                              **kw)
        assert got == reference, (got, reference)
        d = usage["completion_tokens_details"]
        tallies.append((d["accepted_prediction_tokens"], d["rejected_prediction_tokens"]))
    return tallies


def concurrently(server):
    with concurrent.futures.ThreadPoolExecutor(len(PROMPTS)) as pool:
        return list(pool.map(lambda p: complete(server, p)[0], PROMPTS))


def states_in_use(server):
    # An instance lets go of its state as it ends, just after its response is written: on a
    # loaded machine that can trail the reply by a moment.
    deadline = time.monotonic() + 10
    while True:
        used = server.metric("pith_recurrent_states", {"state": "used"})
        if used == 0 or time.monotonic() > deadline:
            return used
        time.sleep(0.1)


def main():
    with tempfile.TemporaryDirectory() as tmp:
        model = os.path.join(tmp, f"{arch}.gguf")
        subprocess.run([pith, "model", "gen", "--preset", "tiny", "--arch", arch, "--format", "gguf",
                        "--dtype", "f32", "--seed", "5", "--vocab", vocab, "-q", "-o", model], check=True)

        with Server(pith, model, "--no-prefix-cache", "--max-batch-tokens", "16") as s:
            assert s.metric("pith_recurrent_states_total") > 0, s.metrics_text()
            runs = [complete(s, p) for p in PROMPTS]
            single = [text for text, _ in runs]
            lengths = [u["prompt_tokens"] for _, u in runs]
            assert len(set(single)) > 1, single  # the prompts lead to different outputs
            together = concurrently(s)
            assert together == single, (together, single)
            used = states_in_use(s)
            assert used == 0, used
            print(f"{arch}: 8 concurrent completions (prompts of {min(lengths)}..{max(lengths)} "
                  "tokens, 16-token chunks) equal their single outputs")
            (exact_in, _), (edited_in, edited_out) = predictions(s)
            assert exact_in > 0 and edited_out > 0, (exact_in, edited_in, edited_out)
            used = states_in_use(s)
            assert used == 0, used
            print(f"{arch}: predicted outputs equal the greedy one: exact {exact_in} draft tokens "
                  f"taken, edited {edited_in} taken and {edited_out} undone")

        with Server(pith, model, "--no-prefix-cache") as s:
            shared_single = [complete(s, p)[0] for p in SHARED]

        with Server(pith, model) as s:
            prompt = PROMPTS[5]
            first, u1 = complete(s, prompt)
            hits = s.metric("pith_prefix_cache_hit_tokens_total")
            checkpoints = s.metric("pith_recurrent_states", {"state": "cached"})
            assert checkpoints >= 1, checkpoints
            again, u2 = complete(s, prompt)
            hit = s.metric("pith_prefix_cache_hit_tokens_total") - hits
            cached = u2.get("prompt_tokens_details", {}).get("cached_tokens", 0)
            assert again == first == single[5], (again, first, single[5])
            assert hit >= 16 and cached == hit, (hit, u2)
            assert u1.get("prompt_tokens_details", {}).get("cached_tokens", 0) == 0, u1
            used = states_in_use(s)
            assert used == 0, used
            print(f"{arch}: repeated prompt of {u2['prompt_tokens']} tokens resumed from a checkpoint "
                  f"after {int(hit)} cached tokens, same output")

            # A shared system prompt: the first prompt's checkpoint lies past where the second
            # leaves it, so the second computes everything, leaving checkpoints at the divergence
            # and at its own last page boundary; the third resumes from the first of them, the
            # second repeated from the last.
            a, ua = complete(s, SHARED[0])
            b, ub = complete(s, SHARED[1])
            c, uc = complete(s, SHARED[2])
            b2, ub2 = complete(s, SHARED[1])
            assert [a, b, c, b2] == shared_single + [shared_single[1]], ([a, b, c, b2], shared_single)
            cached = [u.get("prompt_tokens_details", {}).get("cached_tokens", 0) for u in (ua, ub, uc, ub2)]
            assert cached[0] == 0 and cached[1] == 0, cached
            assert 16 <= cached[2] < uc["prompt_tokens"] - 16, (cached, uc)  # the divergence
            assert cached[3] >= ub2["prompt_tokens"] - 16, (cached, ub2)  # its own last boundary
            used = states_in_use(s)
            assert used == 0, used
            print(f"{arch}: a shared {cached[2]}-token prefix served the third prompt from a checkpoint, "
                  f"the second again resumed after {cached[3]} of {ub2['prompt_tokens']} tokens")

        # Up to 10 KV pages of 16 tokens per request (157 tokens); 12 pages for all 8, in f32 (the
        # one K/V type a GPU takes for this F32 model; the CPU's default would be f16).
        with Server(pith, model, "--no-prefix-cache", "--kv-memory", "48K", "--kv-dtype", "f32",
                    "--state-memory", "1M") as s:
            pages = s.metric("pith_kv_pages_total")
            assert pages == 12, pages
            together = concurrently(s)
            assert together == single, (together, single)
            suspensions = s.metric("pith_kv_suspensions_total")
            swapped = s.metric("pith_recurrent_states_swapped_total", {"direction": "out"})
            back = s.metric("pith_recurrent_states_swapped_total", {"direction": "in"})
            # Every suspended instance took its state out (none is shared here) and brought it back.
            assert swapped >= suspensions and back == swapped, (suspensions, swapped, back)
            used = states_in_use(s)
            assert used == 0, used
            print(f"{arch}: under KV pressure ({int(pages)} pages, {int(suspensions)} suspensions, "
                  f"{int(swapped)} states swapped out and back) the 8 outputs equal the single ones")
        # Three states (~17 KB each) for 8 requests, the prefix cache on.
        with Server(pith, model, "--state-memory", "52K") as s:
            total = s.metric("pith_recurrent_states_total")
            assert total == 3, total
            together = concurrently(s)
            assert together == single, (together, single)
            waited = s.metric("pith_recurrent_state_wait_seconds_total")
            used = states_in_use(s)
            assert used == 0, used
            print(f"{arch}: 3 states for 8 concurrent requests: they waited {waited:.2f} s in all, "
                  "the outputs equal the single ones")
    print("1 passed, 0 failed")


main()
