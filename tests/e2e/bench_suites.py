#!/usr/bin/env python3
"""Every `pith bench SUITE --json` that runs on a model ends with one JSON object on its last
line holding the keys the issues name (other tools parse them), on the tiny model with small
sizes so the whole file takes seconds; plus the checks that hold whatever the machine's speed
(the prefix cache computes fewer prompt tokens, the roofline bound is >= 1, rates are > 0).

usage: bench_suites.py PITH TINY_MODEL INFERLET_DIR
"""
import importlib.util
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pith_harness import shared_native_cache  # noqa: E402


def native_cache(pith, scratch):
    """The suites' native-code cache (--cache-dir): the e2e suite's shared one, so each
    inferlet is compiled once per build rather than once per suite (the paper suite runs the
    techniques, agents and overhead suites' inferlets again), else the suite's scratch folder."""
    return shared_native_cache(pith) or scratch


def seed_native_cache(pith, folder):
    """Copies the shared native cache's modules into `folder` (a server's own cache's native
    part), so a server with a cache folder of its own does not compile them again."""
    shared = shared_native_cache(pith)
    os.makedirs(folder, exist_ok=True)
    if shared and os.path.isdir(shared):
        for name in os.listdir(shared):
            if name.endswith(".so"):
                shutil.copy2(os.path.join(shared, name), folder)


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def bench(pith, *args):
    started = time.monotonic()
    p = subprocess.run([pith, "bench", *args, "--json"], capture_output=True, text=True, timeout=600)
    print(f"pith bench {args[0]}: {time.monotonic() - started:.1f} s", flush=True)
    if p.returncode != 0:
        sys.exit(f"FAIL: pith bench {' '.join(args)} exited {p.returncode}\n{p.stdout}\n{p.stderr}")
    lines = [l for l in p.stdout.splitlines() if l.strip()]
    try:
        out = json.loads(lines[-1])
    except (IndexError, json.JSONDecodeError) as e:
        sys.exit(f"FAIL: pith bench {args[0]}: last line is not JSON ({e})\n{p.stdout}")
    assert out.get("suite") == args[0], out
    return out


def need(out, *keys):
    missing = [k for k in keys if k not in out]
    assert not missing, f"{out.get('suite')}: missing {missing} in {sorted(out)}"


def positive(out, *keys):
    for k in keys:
        assert isinstance(out[k], (int, float)) and out[k] > 0, f"{out['suite']}: {k} = {out[k]}"


def engine_suites(pith, model, inferlets):
    """model, lora, batching, techniques, paper, agents, overhead."""
    paper_suite(pith, model, inferlets)
    with tempfile.TemporaryDirectory(prefix="pith_bench_") as cache:
        m = bench(pith, "model", "-m", model, "-p", "16", "-n", "4", "-r", "1", "--batch", "1,2",
                  "--batch-steps", "2", "--bandwidth-mib", "64")
        need(m, "pp_tok_s", "tg_tok_s", "batch_tg_tok_s", "bandwidth_gb_s", "decode_floor_tok_s")
        positive(m, "pp_tok_s", "tg_tok_s", "bandwidth_gb_s", "decode_floor_tok_s")
        assert set(m["batch_tg_tok_s"]) == {"1", "2"}, m["batch_tg_tok_s"]
        # The floor's bandwidth: 3 samples before the tests, one before each decode run, one after.
        assert len(m["bandwidth_samples_gb_s"]) == 3 + 1 + 1, m["bandwidth_samples_gb_s"]
        assert min(m["bandwidth_samples_gb_s"]) <= m["bandwidth_gb_s"] <= max(m["bandwidth_samples_gb_s"])
        # The per-op profile: four cases, every op named, the ops add up to the forward.
        pm = bench(pith, "model", "-m", model, "-p", "8", "-n", "2", "-r", "1",
                   "--bandwidth-mib", "16", "--profile", "--profile-context", "16",
                   "--no-weight-panels")
        assert m["weight_panels"] is True and pm["weight_panels"] is False, (m, pm)
        assert set(pm["profile"]) == {"decode_b1", "decode_b32", "prefill512_b1",
                                      "prefill512_b32"}, pm["profile"]
        for case in pm["profile"].values():
            ops = case["ops_ms"]
            assert {"qkv_proj", "attention", "ffn_gate_up", "down_proj", "output"} <= set(ops), ops
            assert abs(sum(ops.values()) - case["ms_per_forward"]) <= 1e-6 * max(1, case["ms_per_forward"]), case
            assert ops["ffn_gate_up"] > 0 and ops["lora"] == 0, ops
        assert pm["profile"]["decode_b32"]["tokens"] == 32, pm["profile"]["decode_b32"]
        # --profile-cases: only those (what an external profiler such as ncu is then given).
        pc = bench(pith, "model", "-m", model, "-p", "8", "-n", "2", "-r", "1",
                   "--bandwidth-mib", "16", "--profile", "--profile-context", "16",
                   "--profile-cases", "decode_b1,prefill512_b32")
        assert set(pc["profile"]) == {"decode_b1", "prefill512_b32"}, pc["profile"]
        bad_case = subprocess.run([pith, "bench", "model", "-m", model, "--profile",
                                   "--profile-cases", "decode_b2"],
                                  capture_output=True, text=True, timeout=60)
        assert bad_case.returncode != 0 and "decode_b2" in bad_case.stderr, bad_case.stderr
        no_profile = subprocess.run([pith, "bench", "model", "-m", model, "--profile-cases",
                                     "decode_b1"], capture_output=True, text=True, timeout=60)
        assert no_profile.returncode != 0 and "needs --profile" in no_profile.stderr, no_profile.stderr
        # --isa caps the CPU kernels (the lower paths measured on a higher host), and says so.
        assert m["kernel_isa"] in ("scalar", "avx2", "avx512"), m["kernel_isa"]
        sc = bench(pith, "model", "-m", model, "-p", "8", "-n", "2", "-r", "1",
                   "--bandwidth-mib", "16", "--isa", "scalar")
        assert sc["kernel_isa"] == "scalar" and sc["tg_tok_s"] > 0, sc
        # At depth, in an f32 pool: the tests start after 40 tokens, whose K/V the floor counts.
        # (The default pool is f16 on the CPU, the activation type on a GPU: f32 for this F32
        # model, whose weights the CUDA backend keeps and computes in F32.)
        dm = bench(pith, "model", "-m", model, "-p", "8", "-n", "2", "-r", "1", "--batch", "2",
                   "--batch-steps", "2", "--bandwidth-mib", "16", "-d", "40", "--kv-dtype", "f32")
        cpu = m["backend"] == "cpu"
        assert dm["kv_dtype"] == "f32" and dm["depth"] == 40, dm
        assert m["kv_dtype"] == ("f16" if cpu else "f32"), m
        # The paged-attention kernel on a GPU (FlashInfer runs BF16 only: the own one for F32).
        assert m["attention"] == (None if cpu else "pith"), m
        assert m["kv_bytes_per_token_at_depth"] == 0 < dm["kv_bytes_per_token_at_depth"], dm
        weights_only = dm["bandwidth_gb_s"] * 1e9 / dm["weight_bytes_per_token"]
        assert dm["decode_floor_tok_s"] < weights_only, (dm, weights_only)
        positive(dm, "pp_tok_s", "tg_tok_s")
        # A mixture's decode token reads n_used experts: twice as many of them, more bytes.
        moe_bytes = []
        for k in (2, 4):
            moe = os.path.join(cache, f"moe{k}.gguf")
            subprocess.run([pith, "model", "gen", "--preset", "tiny", "--arch", "qwen3moe", "--option",
                            f"num_experts_per_tok={k}", "--vocab", model, "-q", "-o", moe], check=True)
            mm = bench(pith, "model", "-m", moe, "-p", "4", "-n", "2", "-r", "1", "--bandwidth-mib", "16")
            moe_bytes.append(mm["weight_bytes_per_token"])
        assert moe_bytes[1] > moe_bytes[0], moe_bytes
        bad = subprocess.run([pith, "bench", "model", "-m", model, "--isa", "sse9"],
                             capture_output=True, text=True, timeout=60)
        assert bad.returncode != 0 and "sse9" in bad.stderr, (bad.returncode, bad.stderr)
        # The Python user's baseline: the same tests through transformers' generate, run by the
        # interpreter named (this one). Where it has torch and transformers the ratios come back;
        # where not, pith's own figures come back with the interpreter's error beside them.
        hf = os.path.join(cache, "tiny-hf")
        subprocess.run([pith, "model", "gen", "--preset", "tiny", "--format", "hf", "--vocab", model,
                        "-q", "-o", hf], check=True)
        tf = bench(pith, "model", "-m", model, "--transformers", sys.executable,
                   "--transformers-model", hf, "-p", "8", "-n", "2", "-r", "1", "--batch", "2",
                   "--batch-steps", "2", "--bandwidth-mib", "16")
        positive(tf, "pp_tok_s", "tg_tok_s")
        if importlib.util.find_spec("torch") and importlib.util.find_spec("transformers"):
            need(tf, "transformers", "pp_vs_transformers", "tg_vs_transformers")
            positive(tf, "pp_vs_transformers", "tg_vs_transformers")
            assert set(tf["batch_vs_transformers"]) == {"2"}, tf
        else:
            assert "No module named" in tf["transformers_error"], tf["transformers_error"]
        gguf = subprocess.run([pith, "bench", "model", "-m", model, "--transformers", sys.executable],
                              capture_output=True, text=True, timeout=60)
        assert gguf.returncode != 0 and "--transformers-model" in gguf.stderr, gguf.stderr
        alone = subprocess.run([pith, "bench", "model", "-m", model, "--transformers-model", hf],
                               capture_output=True, text=True, timeout=60)
        assert alone.returncode != 0 and "needs --transformers" in alone.stderr, alone.stderr

        lo = bench(pith, "lora", "-m", model, "--batch", "4", "--adapters", "2", "--rank", "4",
                   "--context", "8", "--steps", "2", "--rounds", "2")
        need(lo, "base_tok_s", "lora_tok_s", "ratio", "adapter_bytes", "adapter_targets")
        positive(lo, "base_tok_s", "lora_tok_s", "ratio", "adapter_bytes")
        assert len(lo["base_tok_s_rounds"]) == len(lo["lora_tok_s_rounds"]) == 2, lo

        b = bench(pith, "batching", "-m", model, "--policy", "adaptive", "--instances", "4",
                  "--prompt-tokens", "4", "--max-tokens", "2", "--runs", "1",
                  "--inferlets", inferlets, "--cache-dir", native_cache(pith, cache))
        need(b, "req_per_s", "ratio_vs_eager", "per_policy", "roofline_ratio_bound",
             "eager_floor_tok_s", "batched_ceiling_tok_s")
        positive(b, "req_per_s", "ratio_vs_eager", "eager_floor_tok_s", "batched_ceiling_tok_s")
        assert b["roofline_ratio_bound"] >= 1.0, b
        # The tiny model's weights are F32: the CPU's f32 FMA peak, or a GPU's own GEMM.
        assert b["peak_kernel"] == ("f32 FMA" if cpu else "cuda GEMM in its compute type"), b
        assert set(b["per_policy"]) == {"eager", "adaptive"}, b["per_policy"]

        # Fig. 8: every technique workload runs to a clean exit (the bench fails otherwise),
        # against the CPU backend too so the interleaved comparison's shape is checked.
        t = bench(pith, "techniques", "-m", model, "--instances", "2", "--max-tokens", "4",
                  "--against-device", "cpu", "--inferlets", inferlets, "--cache-dir", native_cache(pith, cache))
        need(t, "workloads", "baseline", "instances", "against_device")
        assert [w["workload"] for w in t["workloads"]] == [
            "text_completion", "prefix_tree", "tree_of_thought", "recursion_of_thought",
            "graph_of_thought", "skeleton_of_thought", "modular_cache", "ebnf",
            "speculative_decoding", "beam_search", "attention_sink"], t["workloads"]
        for w in t["workloads"]:
            positive(dict(w, suite="techniques"), "req_per_s", "latency_p50_ms",
                     "forward_tokens_per_request", "ratio_vs_against", "vs_text_completion")
            assert w["latency_p99_ms"] >= w["latency_p50_ms"], w
        assert t["workloads"][0]["vs_text_completion"] == 1.0, t["workloads"][0]

        # Fig. 6 on its own, one workload: the options reach it (2 swarms of 3 workers).
        ag = bench(pith, "agents", "-m", model, "--workloads", "swarm", "--agents", "2",
                   "--swarm-size", "3", "--step-tokens", "2", "--inferlets", inferlets,
                   "--cache-dir", native_cache(pith, cache))
        need(ag, "workloads", "ratio")
        assert [w["workload"] for w in ag["workloads"]] == ["swarm"], ag
        for side in ("inferlet", "client"):
            assert ag["workloads"][0][side]["actions"] == 6, ag

        o = bench(pith, "overhead", "-m", model, "--instances", "8", "--decode-tokens", "4",
                  "--runs", "1", "--inferlets", inferlets, "--cache-dir", native_cache(pith, cache))
        need(o, "control_call_us", "forward_call_us", "tpot_inferlet_ms", "tpot_fused_ms", "overhead_pct")
        positive(o, "control_call_us", "tpot_inferlet_ms", "tpot_fused_ms")


def paper_suite(pith, model, inferlets):
    with tempfile.TemporaryDirectory(prefix="pith_bench_") as cache:
        # The paper's Tables 4, 5 and Fig. 8 in one command: JSON of every suite and the charts.
        out_dir = os.path.join(cache, "paper")
        pa = bench(pith, "paper", "-m", model, "--out", out_dir, "--concurrency", "4", "--tokens",
                   "4", "--runs", "1", "--inferlets", inferlets, "--cache-dir", native_cache(pith, cache))
        need(pa, "table4_overhead", "table5_batching", "fig8_techniques", "fig6_agents", "files")
        positive(dict(pa["table4_overhead"], suite="paper"), "tpot_inferlet_ms", "tpot_fused_ms")
        positive(dict(pa["table5_batching"], suite="paper"), "ratio_vs_eager")
        assert len(pa["fig8_techniques"]["workloads"]) == 11, pa["fig8_techniques"]
        on_disk = json.load(open(os.path.join(out_dir, "paper.json")))
        assert on_disk["fig8_techniques"] == pa["fig8_techniques"], "paper.json differs"
        f6 = pa["fig6_agents"]
        assert [w["workload"] for w in f6["workloads"]] == ["react", "codeact", "swarm"], f6
        for w in f6["workloads"]:
            per_task = f6["swarm_size"] if w["workload"] == "swarm" else 8
            for side in ("inferlet", "client"):  # both loops did every action
                assert w[side]["actions"] == f6["agents"] * per_task, f6
                positive(dict(w[side], suite="paper"), "tasks_per_s", "latency_p50_ms")
        for name in ("table4_tpot", "table5_batching", "fig6_agents", "fig8_techniques"):
            spec = os.path.join(out_dir, name + ".chart.json")
            assert spec in pa["files"] and os.path.exists(spec), (name, pa["files"])
            svg = os.path.join(out_dir, name + ".svg")
            assert os.path.exists(svg) and open(svg).read().startswith("<svg"), svg


def serving_suites(pith, model, inferlets):
    """prefix-cache, prediction, chunked-prefill, contention, soak, serving, embeddings."""
    p = bench(pith, "prefix-cache", "-m", model, "--requests", "6", "--system-tokens", "64",
              "--question-tokens", "8", "--max-tokens", "2", "--concurrency", "2")
    need(p, "prefill_tokens_on", "prefill_tokens_off", "speedup")
    # 6 x 72 tokens without the cache; with it the shared 64 tokens (4 full pages) are computed
    # by the first 2 concurrent requests only.
    assert p["prefill_tokens_off"] == 6 * 72, p
    assert p["prefill_tokens_on"] < p["prefill_tokens_off"], p

    pr = bench(pith, "prediction", "-m", model, "--prompts", "1", "--max-tokens", "8", "--runs", "1")
    need(pr, "kinds", "speedup_exact")
    assert [k["prediction"] for k in pr["kinds"]] == ["exact", "edited", "unrelated"], pr
    for k in pr["kinds"]:
        positive(dict(k, suite="prediction"), "plain_tokens_per_s", "predicted_tokens_per_s", "speedup")
        assert k["outputs"] == 1 and 0 <= k["identical_outputs"] <= 1, k

    c = bench(pith, "chunked-prefill", "-m", model, "--long-tokens", "300", "--short-requests", "3",
              "--short-tokens", "8", "--decoders", "1", "--decode-tokens", "4", "--max-batch-tokens", "64")
    need(c, "ttft_p99_ratio", "throughput_loss_pct")
    positive(c, "ttft_p99_ratio")
    k = bench(pith, "contention", "-m", model, "--requests", "6", "--prompt-tokens", "8",
              "--gen-tokens", "24", "--factors", "3")
    need(k, "baseline", "runs", "pages_needed")
    assert k["baseline"]["completed"] == 6, k["baseline"]
    suspend = [r for r in k["runs"] if r["policy"] == "suspend"]
    kill = [r for r in k["runs"] if r["policy"] == "kill"]
    assert len(suspend) == 2 and len(kill) == 1, k["runs"]
    assert sorted(r["preemption"] for r in suspend) == ["recompute", "swap"], suspend
    # Under suspension nothing is lost and every output is the unpressured one.
    for r in suspend:
        assert r["completed"] == r["identical"] == 6, r
    swap = next(r for r in suspend if r["preemption"] == "swap")
    recompute = next(r for r in suspend if r["preemption"] == "recompute")
    assert swap["pages_dropped"] == 0 and swap["tokens_recomputed"] == 0, swap
    # Recompute rebuilds pages instead of saving them. The two runs interleave differently, so
    # their suspensions may differ in number (2 against 1 in one CI run): saved pages compare
    # only between runs that suspended alike.
    assert recompute["suspensions"] == 0 or recompute["pages_dropped"] > 0, recompute
    if recompute["suspensions"] == swap["suspensions"]:
        assert recompute["pages_swapped_out"] <= swap["pages_swapped_out"], (recompute, swap)
    assert kill[0]["completed"] + kill[0]["killed"] <= 6, kill[0]

    with tempfile.TemporaryDirectory(prefix="pith_bench_") as cache:
        s = bench(pith, "soak", "-m", model, "--instances", "6", "--seconds", "3",
                  "--kv-memory", "256K", "--inferlets", inferlets,
                  "--cache-dir", native_cache(pith, cache))
        need(s, "rss_slope_mib_per_min", "pages_leaked", "kinds", "samples")
        assert s["pages_leaked"] == 0 and s["instances_left"] == 0, s
        assert s["unexpected"] == 0, s["kinds"]
        assert s["launched"] > 0 and len(s["samples"]) >= 2, s
        # The same mix through a real `pith serve` over HTTP, with OpenAI streams (6 of 20). Its
        # cache folder is its own (programs too), its native code seeded from the shared cache,
        # which the run above filled (cold, the server's C compiles took 13 of its 18 s).
        seed_native_cache(pith, os.path.join(cache, "native"))
        s = bench(pith, "soak", "-m", model, "--instances", "6", "--seconds", "3", "--server",
                  "--openai-share", "6", "--kv-memory", "256K", "--inferlets", inferlets,
                  "--cache-dir", cache)  # a server's whole cache folder (programs too): its own
        assert s["server"] is True, s
        assert s["pages_leaked"] == 0 and s["instances_left"] == 0, s
        assert s["unexpected"] == 0, s["kinds"]
        assert "openai_stream" in s["kinds"], s["kinds"]  # (the warm-up ran one to [DONE])
        # --openai-share means nothing in process: refused, not ignored.
        p = subprocess.run([pith, "bench", "soak", "-m", model, "--openai-share", "3"],
                           capture_output=True, text=True, timeout=60)
        assert p.returncode != 0 and "--server" in p.stderr + p.stdout, (p.returncode, p.stderr)
    # The same streaming load on a started pith and on another server (here: a second pith).
    port = free_port()
    other = subprocess.Popen([pith, "serve", "-m", model, "--port", str(port), "--log-interval", "0"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        s = bench(pith, "serving", "-m", model, "--against", f"http://127.0.0.1:{port}",
                  "--concurrency", "2,3", "--requests", "4", "--prompt-words", "12", "--max-tokens",
                  "4", "--rounds", "2")
        need(s, "results", "servers", "failed_requests")
        assert s["failed_requests"] is False and len(s["results"]) == 2, s
        for row in s["results"]:
            for side in ("pith", "against"):
                r = row[side]
                assert r["ok"] == 2 * 4 and r["failed"] == 0, row  # 2 rounds x 4 requests
                positive(dict(r, suite="serving"), "gen_tok_s", "ttft_p50_ms", "prompt_tokens_mean")
            need(row["ratio"], "gen_tok_s", "ttft_p50", "itl_p50")
        # Structured output through the chat endpoint: both servers answer every request.
        j = bench(pith, "serving", "-m", model, "--against", f"http://127.0.0.1:{port}",
                  "--response-format", "json_object", "--temperature", "1", "--concurrency", "2",
                  "--requests", "3", "--prompt-words", "8", "--max-tokens", "6")
        assert j["chat"] is True and j["response_format"] == "json_object", j
        assert j["failed_requests"] is False, j
        for side in ("pith", "against"):
            assert j["results"][0][side]["ok"] == 3, j["results"][0]
        # Embeddings: the same file and pooling on both sides give the same vectors.
        e = bench(pith, "embeddings", "-m", model, "--against", f"http://127.0.0.1:{port}",
                  "--inputs", "6", "--batch", "4", "--concurrency", "2", "--words", "12",
                  "--rounds", "1")
        positive(e, "batched_inputs_per_s", "batched_tokens_per_s", "one_by_one_inputs_per_s",
                 "batched_vs_one_by_one", "against_inputs_per_s", "ratio_vs_against")
        assert e["min_cosine_vs_against"] > 0.99999, e
        # A baseline that is not there is an error, not a ratio against nothing.
        p = subprocess.run([pith, "bench", "serving", "-m", model, "--against",
                            f"http://127.0.0.1:{free_port()}", "--concurrency", "1"],
                           capture_output=True, text=True, timeout=120)
        assert p.returncode != 0 and "127.0.0.1" in p.stderr, (p.returncode, p.stderr)
    finally:
        other.terminate()
        other.wait(30)


def main():
    pith, model, inferlets = sys.argv[1], sys.argv[2], sys.argv[3]
    engine_suites(pith, model, inferlets)
    serving_suites(pith, model, inferlets)
    print("bench suites: JSON contracts hold")


if __name__ == "__main__":
    main()
