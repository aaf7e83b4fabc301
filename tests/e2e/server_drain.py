#!/usr/bin/env python3
"""End-to-end check of what a router needs from a replica (real `pith serve`, tiny model):
the load gauges under the names vLLM- and SGLang-aware routers read, and a graceful drain on
SIGTERM: /health stops answering 200, an OpenAI stream in flight finishes every token, a
lifecycle instance ends at once with the reason "server shutting down", and the process exits
0. With a short --drain-timeout the stream is cut (and the server still exits 0, quickly).

Usage: server_drain.py PITH MODEL INFERLET_DIR"""
import http.client
import json
import os
import signal
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pith_harness import Server, parse_sse  # noqa: E402

# The streamed completion's length: long enough to be still streaming when the signal lands
# (checked). Sized per server from a timed 150-token completion, for ~3 s of generation: 150
# tokens took ~2 s under the sanitizers with the program interpreted, 0.07 s natively in a
# release build. At most what the model's context holds.
TOKENS = 150


def size_stream(s):
    """The faster of two timed completions: a first one slowed by a busy machine (or run before
    the program's native build landed) would size a stream that ends before the signal."""
    global TOKENS
    model = s.request("GET", "/v1/models")[1]["data"][0]["id"]
    per_token = float("inf")
    for _ in range(2):
        t0 = time.time()
        s.request("POST", "/v1/completions", {"model": model, "prompt": "Once", "max_tokens": 150,
                                              "min_tokens": 150, "temperature": 0})
        per_token = min(per_token, (time.time() - t0) / 150)
    TOKENS = max(150, min(4000, int(3.0 / per_token)))


def stream_completion(s, result):
    model = s.request("GET", "/v1/models")[1]["data"][0]["id"]
    conn = http.client.HTTPConnection("127.0.0.1", s.port, timeout=120)
    body = {"model": model, "prompt": "Once", "max_tokens": TOKENS,
            "min_tokens": TOKENS, "temperature": 0, "stream": True,
            "stream_options": {"include_usage": True}}
    conn.request("POST", "/v1/completions", json.dumps(body),
                 {"Content-Type": "application/json"})
    resp = conn.getresponse()
    result["status"] = resp.status
    result["chunks"], result["finish"], result["usage"] = 0, None, None
    try:
        for _, _, data in parse_sse(resp):
            if data == "[DONE]":
                result["done"] = True
                break
            d = json.loads(data)
            if "error" in d:
                result["error"] = d["error"]
                continue
            if d.get("usage"):
                result["usage"] = d["usage"]
            for c in d.get("choices", []):
                result["chunks"] += 1
                result["started"].set()
                if c.get("finish_reason"):
                    result["finish"] = c["finish_reason"]
    except (OSError, http.client.HTTPException) as e:
        result["exception"] = repr(e)
    result["started"].set()


def health_status(s):
    try:
        status, _ = s.request("GET", "/health", check=False, timeout=2)
        return status
    except OSError:
        return "refused"


def check_router_gauges(s):
    text = s.metrics_text()
    for name in ("vllm:num_requests_running", "vllm:num_requests_waiting",
                 "vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc", "sglang:num_running_reqs",
                 "sglang:num_queue_reqs", "sglang:token_usage", "pith_draining"):
        assert f"\n{name} " in text or text.startswith(f"{name} "), f"{name} missing:\n{text}"
    assert 'vllm:cache_config_info{block_size="' in text, text
    usage = s.metric("vllm:kv_cache_usage_perc")
    assert 0.0 <= usage <= 1.0, usage
    assert s.metric("pith_draining") == 0
    assert s.metric("vllm:num_requests_running") == 0


def drain(pith, model, echo):
    # A generous timeout: on a loaded CI machine the stream may take long; the default (30 s)
    # is not what this checks.
    with Server(pith, model, "--drain-timeout", "150") as s:
        check_router_gauges(s)
        size_stream(s)
        echo_id = s.launch(s.upload(echo))  # waits for messages: a lifecycle instance
        result = {"started": threading.Event()}
        t = threading.Thread(target=stream_completion, args=(s, result))
        t.start()
        assert result["started"].wait(60), "the stream did not start"
        assert s.metric("vllm:num_requests_running") == 1, s.metrics_text()
        assert s.metric("sglang:num_running_reqs") == 1
        events = []
        ev = threading.Thread(target=lambda: events.extend(s.events(echo_id, timeout=60)))
        ev.start()
        # A proxy's pooled keep-alive connection, idle at the signal: its session is still
        # suspended when the server stops (it once freed a counter that session used: ASan).
        idle = s.connection(timeout=60)
        idle.request("GET", "/health")
        idle.getresponse().read()
        time.sleep(0.1)
        s.proc.send_signal(signal.SIGTERM)
        t0 = time.time()
        refused = None
        while time.time() - t0 < 5 and refused is None:
            st = health_status(s)
            if st != 200:
                refused = st
            time.sleep(0.02)
        assert refused is not None, "/health kept answering 200 while draining"
        t.join(170)
        ev.join(60)
        code = s.proc.wait(170)
        idle.close()
        log = s.server_log()
        assert code == 0, f"exit {code}\n{log}"
        assert "draining: 1 OpenAI request(s) in flight" in log, \
            f"the stream ended before the signal (raise TOKENS?)\n{log}"
        assert result.get("status") == 200, result
        assert result.get("finish") == "length" and result.get("done"), result
        assert result["usage"]["completion_tokens"] == TOKENS, result["usage"]
        term = [json.loads(d) for _, e, d in events if e == "terminated"]
        assert term and "server shutting down" in json.dumps(term[0]), events[-3:]
        print(f"drain: stream finished {TOKENS} tokens after SIGTERM; /health -> {refused}; "
              f"lifecycle instance: {term[0]}")


def drain_timeout(pith, model):
    with Server(pith, model, "--drain-timeout", "0.3") as s:
        result = {"started": threading.Event()}
        t = threading.Thread(target=stream_completion, args=(s, result))
        t.start()
        assert result["started"].wait(60)
        s.proc.send_signal(signal.SIGTERM)
        t0 = time.time()
        code = s.proc.wait(30)
        took = time.time() - t0
        t.join(30)
        log = s.server_log()
        assert code == 0, log
        assert "1 instance(s) ended unfinished" in log, log
        assert result.get("finish") != "length" or result["usage"]["completion_tokens"] < TOKENS, \
            result
        assert took < 10, took
        print(f"drain timeout: stream cut after {result['chunks']} chunks, exit in {took:.2f} s")


def main():
    pith, model, inferlets = sys.argv[1:4]
    drain(pith, model, os.path.join(inferlets, "echo.wasm"))
    drain_timeout(pith, model)
    print("ok")


if __name__ == "__main__":
    main()
