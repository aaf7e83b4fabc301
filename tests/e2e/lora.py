#!/usr/bin/env python3
"""End-to-end LoRA serving (real binary, real server, adapters made by `pith model gen-lora`):

- `--lora NAME=PATH` at startup (a PEFT folder) and POST /v1/load_lora_adapter at run time (a
  GGUF adapter); /v1/models lists both with the base as parent; unload makes the name 404 again;
- a completion naming an adapter as its model generates, greedily, exactly the tokens that
  `pith logits --lora` (the engine alone, one prefill per step) ranks first, and differs from the
  base model's; the response names the adapter as its model;
- eight concurrent requests mixing the base and both adapters give each its single-request output;
- the prefix cache keys on the adapter: a prompt cached for the base is not served to an adapter,
  a repeat under the same adapter is, with the same output;
- a bad adapter (another base's shapes, a missing path) is a 400 naming the problem and the
  server keeps serving; the load route needs the API key; /metrics carries vLLM's
  lora_requests_info with max_lora.

Usage: lora.py PITH MODEL.gguf"""
import concurrent.futures
import json
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pith_harness import HttpError, Server  # noqa: E402

PROMPT = [1, 450, 499, 173, 170, 299, 432, 172, 975, 278, 17]
MAX_TOKENS = 8


def gen_lora(pith, model, out, fmt, seed, *extra):
    subprocess.run([pith, "model", "gen-lora", "-m", model, "--format", fmt, "--rank", "8",
                    "--alpha", "16", "--std", "0.05", "--seed", str(seed), "-o", out, *extra],
                   check=True, capture_output=True)


def argmax_next(pith, model, lora, tokens):
    cmd = [pith, "logits", "-m", model, "--no-bos", "--json", "--top", "2", "--tokens",
           ",".join(map(str, tokens))]
    if lora:
        cmd += ["--lora", lora]
    out = json.loads(subprocess.run(cmd, capture_output=True, text=True, check=True).stdout)
    top = out["positions"][-1]["top"]
    assert top[0]["logit"] - top[1]["logit"] > 1e-4, ("near tie, greedy is ambiguous", top)
    return top[0]["id"]


def main():
    pith, model = sys.argv[1:3]
    with tempfile.TemporaryDirectory() as tmp:
        peft = os.path.join(tmp, "style-a")
        gguf = os.path.join(tmp, "style-b.gguf")
        gen_lora(pith, model, peft, "peft", 1)
        gen_lora(pith, model, gguf, "gguf", 2, "--targets", "q,v,o,down")
        wide_base = os.path.join(tmp, "wide.gguf")
        subprocess.run([pith, "model", "gen", "--preset", "tiny256", "--vocab", model, "-q",
                        "-o", wide_base], check=True, capture_output=True)
        wrong = os.path.join(tmp, "wrong")
        gen_lora(pith, wide_base, wrong, "peft", 3)

        key = "sk-lora-test"
        with Server(pith, model, "--lora", f"a={peft}", "--max-loras", "4", api_key=key) as s:
            base_name = s.request("GET", "/v1/models")[1]["data"][0]["id"]

            def complete(name, prompt=PROMPT, max_tokens=MAX_TOKENS):
                body = {"model": name, "prompt": prompt, "max_tokens": max_tokens,
                        "temperature": 0}
                _, r = s.request("POST", "/v1/completions", body)
                return r

            # Startup adapter listed, with its base.
            models = s.request("GET", "/v1/models")[1]["data"]
            cards = {m["id"]: m for m in models}
            assert set(cards) == {base_name, "a"}, cards
            assert cards["a"]["parent"] == base_name and cards["a"]["root"] == peft, cards["a"]
            assert cards["a"]["lora"]["rank"] == 8 and cards["a"]["lora"]["format"] == "peft"
            assert s.request("GET", "/v1/models/a")[1]["id"] == "a"

            # Load a second adapter at run time (API key required).
            st, _ = s.request("POST", "/v1/load_lora_adapter", {"lora_name": "b", "lora_path": gguf},
                              check=False, auth=False)
            assert st == 401, st
            st, text = s.request("POST", "/v1/load_lora_adapter",
                                 {"lora_name": "b", "lora_path": gguf})
            assert st == 200 and b"added successfully" in text, (st, text)
            st, err = s.request("POST", "/v1/load_lora_adapter", {"lora_name": "b", "lora_path": gguf},
                                check=False)
            assert st == 400 and "already loaded" in err["error"]["message"], (st, err)

            # Greedy output under each adapter = the engine's argmax, one prefill per step
            # (`pith logits --lora`: no server, no KV reuse), detokenized.
            outputs = {}
            for name, path in ((base_name, None), ("a", peft), ("b", gguf)):
                r = complete(name)
                assert r["model"] == name, r["model"]
                outputs[name] = r["choices"][0]["text"]
                ids = list(PROMPT)
                for _ in range(3):
                    ids.append(argmax_next(pith, model, path, ids))
                r = complete(name, max_tokens=3)
                # Decoded in context (a leading space survives): text(prompt + new) - text(prompt).
                _, whole = s.request("POST", "/detokenize", {"model": base_name, "tokens": ids})
                _, head = s.request("POST", "/detokenize", {"model": base_name, "tokens": PROMPT})
                want = whole["prompt"][len(head["prompt"]):]
                assert r["choices"][0]["text"] == want, (name, r["choices"][0]["text"], want)
            assert outputs["a"] != outputs[base_name] and outputs["b"] != outputs[base_name], outputs
            assert outputs["a"] != outputs["b"], outputs

            # Mixed concurrent load: each request its single-request output.
            names = [base_name, "a", "b", "a", base_name, "b", "a", "b"]
            with concurrent.futures.ThreadPoolExecutor(len(names)) as pool:
                got = list(pool.map(lambda n: complete(n)["choices"][0]["text"], names))
            for n, text in zip(names, got):
                assert text == outputs[n], (n, text, outputs[n])

            # Prefix cache keyed by adapter: a fresh 48-token prompt cached for the base only.
            long_prompt = [1] + [100 + 7 * i for i in range(47)]

            def cached(name):
                body = {"model": name, "prompt": long_prompt, "max_tokens": 2, "temperature": 0}
                _, r = s.request("POST", "/v1/completions", body)
                details = r["usage"].get("prompt_tokens_details") or {}
                return details.get("cached_tokens", 0), r["choices"][0]["text"]

            c0, _ = cached(base_name)
            c1, _ = cached(base_name)
            assert c0 == 0 and c1 > 0, (c0, c1)
            c2, t2 = cached("a")
            assert c2 == 0, ("adapter a was served the base model's cached prefix", c2)
            c3, t3 = cached("a")
            assert c3 > 0 and t3 == t2, (c3, t3, t2)

            # Bad adapters: a clear 400, the server keeps serving.
            st, err = s.request("POST", "/v1/load_lora_adapter",
                                {"lora_name": "w", "lora_path": wrong}, check=False)
            assert st == 400 and "another base model" in err["error"]["message"], (st, err)
            st, err = s.request("POST", "/v1/load_lora_adapter",
                                {"lora_name": "x", "lora_path": os.path.join(tmp, "nope")},
                                check=False)
            assert st == 400 and "no such file" in err["error"]["message"], (st, err)
            assert complete("a")["choices"][0]["text"] == outputs["a"]

            # Metrics: vLLM's adapter series.
            metrics = s.metrics_text()
            m = re.search(r'^vllm:lora_requests_info\{([^}]*)\} (\S+)$', metrics, re.M)
            assert m and 'max_lora="4"' in m.group(1), metrics
            assert re.search(r"^pith_lora_adapters_loaded 2$", metrics, re.M), metrics

            # Unknown fields are refused by name; load_inplace replaces an adapter under its name.
            st, err = s.request("POST", "/v1/load_lora_adapter",
                                {"lora_name": "c", "lora_path": gguf, "lora_scale": 2},
                                check=False)
            assert st == 400 and "lora_scale" in err["error"]["message"], (st, err)
            st, err = s.request("POST", "/v1/unload_lora_adapter",
                                {"lora_name": "b", "lora_int_id": 3}, check=False)
            assert st == 400 and "lora_int_id" in err["error"]["message"], (st, err)
            st, _ = s.request("POST", "/v1/load_lora_adapter",
                              {"lora_name": "b", "lora_path": peft, "load_inplace": True})
            assert st == 200, st
            assert complete("b")["choices"][0]["text"] == outputs["a"], "b now holds a's weights"
            st, _ = s.request("POST", "/v1/load_lora_adapter",
                              {"lora_name": "b", "lora_path": gguf, "load_inplace": True})
            assert complete("b")["choices"][0]["text"] == outputs["b"]

            # Unload: the name is gone for new requests.
            st, text = s.request("POST", "/v1/unload_lora_adapter", {"lora_name": "b"})
            assert st == 200 and b"removed successfully" in text, (st, text)
            try:
                complete("b")
                raise AssertionError("an unloaded adapter still served")
            except HttpError as e:
                assert e.status == 404, e.status
            st, _ = s.request("POST", "/v1/unload_lora_adapter", {"lora_name": "b"}, check=False)
            assert st == 404, st
            assert [m["id"] for m in s.request("GET", "/v1/models")[1]["data"]] == [base_name, "a"]
            assert s.alive()
    print("ok: adapters load at startup and at run time, serve greedy outputs equal to the "
          "engine's argmax, mix in one batch, key the prefix cache and unload")


if __name__ == "__main__":
    main()
