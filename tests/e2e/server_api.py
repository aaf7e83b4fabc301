#!/usr/bin/env python3
"""End-to-end: the real `pith serve` on a free loopback port with a real model file.

Usage: server_api.py PITH MODEL INFERLET_DIR
Covers the lifecycle API (upload, launch, messages, events, reconnect, kill), the OpenAI
endpoints field by field (streaming and not, n, logprobs, stop, usage with cached tokens), auth,
limits and bad input (4xx, server stays up), a trapping inferlet next to a healthy one, 200
concurrent instances over HTTP, metrics, and graceful shutdown (exit 0).
"""
import json
import os
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pith_harness import HttpError, Server, parse_sse  # noqa: E402

pith, model, inferlets = sys.argv[1], sys.argv[2], sys.argv[3]
SHAPES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "openai")
W = lambda name: os.path.join(inferlets, name + ".wasm")  # noqa: E731
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what, file=sys.stderr)


def same_shape(ours, recorded, where="$"):
    """Every key of the recorded OpenAI response exists in ours with the same JSON type."""
    if recorded is None or ours is None:
        return
    if isinstance(recorded, dict):
        check(isinstance(ours, dict), f"{where}: object expected, got {ours!r}")
        if isinstance(ours, dict):
            for k, v in recorded.items():
                check(k in ours, f"{where}.{k} missing")
                if k in ours:
                    same_shape(ours[k], v, f"{where}.{k}")
    elif isinstance(recorded, list):
        check(isinstance(ours, list), f"{where}: array expected")
        if isinstance(ours, list) and recorded:
            for i, item in enumerate(ours):
                same_shape(item, recorded[0], f"{where}[{i}]")
    elif isinstance(recorded, bool):
        check(isinstance(ours, bool), f"{where}: boolean expected")
    elif isinstance(recorded, (int, float)):
        check(isinstance(ours, (int, float)) and not isinstance(ours, bool), f"{where}: number expected")
    else:
        check(isinstance(ours, str), f"{where}: string expected")


def shape(name):
    with open(os.path.join(SHAPES, name + ".json")) as f:
        return json.load(f)


def expect_error(s, status, method, path, body=None, headers=None, auth=True):
    code, data = s.request(method, path, body, headers, check=False, auth=auth)
    check(code == status, f"{method} {path}: expected {status}, got {code} {data!r}")
    if code >= 400:
        check(isinstance(data, dict) and "error" in data and data["error"].get("message"),
              f"{method} {path}: error body must be JSON with error.message, got {data!r}")
        same_shape(data, shape("error"))
    return data


def lifecycle(s):
    code, health = s.request("GET", "/health")
    check(code == 200 and health["status"] == "ok", f"health: {health}")
    h = s.upload(W("echo"))
    check(len(h) == 64, f"hash {h}")
    # Same bytes again: 200 and existing.
    with open(W("echo"), "rb") as f:
        code, again = s.request("POST", "/v1/programs", f.read(), {"Content-Type": "application/wasm"})
    check(code == 200 and again["existing"] and again["hash"] == h, f"re-upload: {code} {again}")
    code, _ = s.request("HEAD", f"/v1/programs/{h}")
    check(code == 200, "HEAD program")
    _, progs = s.request("GET", "/v1/programs")
    check(any(p["hash"] == h for p in progs["programs"]), "program listed")
    check(any(p.get("builtin") and p.get("name") == "openai_completion" for p in progs["programs"]),
          "built-in completion program listed")

    iid = s.launch(h, ["a b", "c"])
    s.send(iid, "hello")
    s.send(iid, "world")
    _, info = s.request("GET", f"/v1/instances/{iid}")
    check(info["id"] == iid and info["program"] == h and info["args"] == ["a b", "c"], f"instance info {info}")
    s.close_input(iid)
    events = list(s.events(iid))
    kinds = [e[1] for e in events]
    msgs = [json.loads(d)["text"] for _, k, d in events if k == "message"]
    check(msgs[:3] == ["arg 0: " + h[:12], "arg 1: a b", "arg 2: c"], f"args echoed: {msgs}")
    check("echo: hello" in msgs and "echo: world" in msgs, f"messages echoed: {msgs}")
    check(kinds[-1] == "terminated", f"last event {kinds}")
    term = json.loads(events[-1][2])
    check(term == {"kind": "exited", "code": 0, "reason": "exited with code 0"}, f"terminated {term}")
    logs = [json.loads(d) for _, k, d in events if k == "log"]
    check(any("hello from instance" in l["text"] for l in logs), f"stdout as log events: {logs}")
    ids = [e[0] for e in events]
    check(ids == list(range(1, len(ids) + 1)), f"event ids {ids}")
    # Reconnect after event 2: exactly the rest.
    rest = list(s.events(iid, after=2))
    check([e[0] for e in rest] == ids[2:], f"reconnect after=2: {[e[0] for e in rest]}")
    _, info = s.request("GET", f"/v1/instances/{iid}")
    check(info["state"] == "finished" and info["exit"]["code"] == 0, f"finished info {info}")

    # Kill by client.
    iid = s.launch(h, [])
    s.request("DELETE", f"/v1/instances/{iid}")
    term = [json.loads(d) for _, k, d in s.events(iid) if k == "terminated"]
    check(term and term[0]["reason"] == "terminated: killed by client", f"kill reason {term}")

    # Trap next to a healthy instance.
    healthy = s.launch(h, [])
    r = s.run(W("traps"), ["unreachable"])
    check(r.exit["kind"] == "trapped" and "unreachable" in r.exit["reason"], f"trap exit {r.exit}")
    s.send(healthy, "still here")
    s.send(healthy, "quit")
    msgs = [json.loads(d)["text"] for _, k, d in s.events(healthy) if k == "message"]
    check("echo: still here" in msgs, f"healthy instance after a trap: {msgs}")

    # Delete a program: gone from the list, launch is 404.
    th = s.upload(W("traps"))
    code, _ = s.request("DELETE", f"/v1/programs/{th}")
    check(code == 204, "delete program")
    expect_error(s, 404, "POST", "/v1/instances", {"program": th, "args": []})


def attachment(pith, model):
    """detach=false ends with its client; a detached instance survives; old events drop."""
    with Server(pith, model, "--orphan-grace", "1", "--event-buffer", "4") as s:
        h = s.upload(W("echo"))
        tied, free = s.launch(h, [], detach=False), s.launch(h, [])
        for iid in (tied, free):
            conn = s.connection()
            conn.request("GET", f"/v1/instances/{iid}/events", headers=s.headers())
            resp = conn.getresponse()
            resp.fp.readline()  # connected
            conn.close()        # the client goes away
        time.sleep(3)
        _, a = s.request("GET", f"/v1/instances/{tied}")
        _, b = s.request("GET", f"/v1/instances/{free}")
        check(a["state"] == "finished" and a["exit"]["reason"] == "terminated: client disconnected", f"tied {a}")
        check(b["state"] == "running", f"detached {b}")
        # 8 args -> 9 messages + 1 log line before the first receive: only the last 4 are kept.
        many = s.launch(h, [str(i) for i in range(8)])
        # The events must all be produced before a reader connects (a reader that keeps up loses
        # nothing): the instance emits them at once, then waits for a message; give a slow
        # (sanitizer) build time to get there.
        time.sleep(3)
        s.send(many, "quit")
        events = list(s.events(many))
        dropped = sum(json.loads(d)["count"] for _, k, d in events if k == "dropped")
        delivered = [i for i, k, _ in events if k != "dropped"]
        check(dropped > 0 and dropped + len(delivered) == delivered[-1], f"dropped events accounted for: {events}")
        check(events[-1][1] == "terminated", "terminated survives the buffer limit")
        s.request("DELETE", f"/v1/instances/{free}")


def restart(pith, model):
    """Uploaded programs (and their native code) survive a restart of the server; a server
    stopped while native builds run lets them finish into the cache (within --drain-timeout)."""
    import tempfile
    with tempfile.TemporaryDirectory() as cache:
        native = os.path.join(cache, "native")
        # Stopped at once, the upload's native build (and the built-ins') running: under the
        # sanitizers, beside other tests, the three take longer than the default 30 s drain.
        s = Server(pith, model, "--drain-timeout", "150", cache_dir=cache)
        s.start()
        s.upload(W("text_completion"))
        check(s.stop(timeout=180) == 0, "a server stopped during native builds exits 0")
        built = [f for f in os.listdir(native) if f.endswith(".so")] if os.path.isdir(native) else []
        # The upload's and the two built-ins' (completions/chat, embeddings).
        check(len(built) == 3, f"native builds running at SIGTERM reach the cache: {built}")
        with Server(pith, model, cache_dir=cache) as s:
            h = s.upload(W("echo"))
            deadline = time.time() + 120
            while not s.request("GET", f"/v1/programs/{h}")[1]["native_ready"] and time.time() < deadline:
                time.sleep(0.2)
        with Server(pith, model, cache_dir=cache) as s:
            code, info = s.request("GET", f"/v1/programs/{h}")
            check(code == 200 and info["hash"] == h, f"program kept across restart: {info}")
            r = s.run(W("echo"), ["--no-wait"])
            check(r.ok() and r.messages == ["arg 0: " + h[:12], "arg 1: --no-wait"], f"run after restart {r.messages} {r.exit}")
            t0 = time.time()
            s.upload(W("echo"))
            check(time.time() - t0 < 1.0, "re-upload after restart is instant")


def greedy_matches_engine(s):
    """text_completion through the server == a greedy loop on the engine directly (pith logits)."""
    import subprocess
    r = s.run(W("text_completion"), ["--prompt", "Hello world", "--max-tokens", "8", "--tokens"])
    check(r.ok(), f"text_completion {r.exit}")
    got = [int(x) for x in r.messages[-1].split(",")]

    def logits(*args):
        p = subprocess.run([pith, "logits", "-m", model, "--top", "1", "--json", *args], capture_output=True, text=True,
                           timeout=120)
        return json.loads(p.stdout)

    ids = logits("--prompt", "Hello world")["tokens"]
    want = []
    for _ in range(8):
        t = logits("--no-bos", "--tokens", ",".join(map(str, ids)))["positions"][-1]["top"][0]["id"]
        want.append(t)
        ids.append(t)
    check(got == want, f"server greedy {got} != engine greedy {want}")


def bad_input(s):
    expect_error(s, 400, "POST", "/v1/instances", "{not json", {"Content-Type": "application/json"})
    expect_error(s, 404, "POST", "/v1/instances", {"program": "0" * 64})
    expect_error(s, 400, "POST", "/v1/programs", b"\0asm\x01\0\0\0garbage", {"Content-Type": "application/wasm"})
    expect_error(s, 404, "GET", "/v1/instances/999999")
    expect_error(s, 404, "GET", "/v1/nothing")
    expect_error(s, 400, "POST", "/v1/completions", "[1,", {"Content-Type": "application/json"})
    expect_error(s, 400, "POST", "/v1/completions", {"prompt": "x", "temperature": 7})
    expect_error(s, 400, "POST", "/v1/chat/completions", {"messages": []})
    expect_error(s, 404, "POST", "/v1/completions", {"model": "no-such-model", "prompt": "x"})
    expect_error(s, 405, "PUT", "/v1/programs")
    check(s.request("GET", "/health")[0] == 200, "server up after bad input")


def openai(s):
    _, models = s.request("GET", "/v1/models")
    check(models["object"] == "list" and len(models["data"]) == 1, f"models {models}")
    name = models["data"][0]["id"]
    prompt = "The quick brown fox jumps over the lazy dog. " * 3
    req = {"model": name, "prompt": prompt, "max_tokens": 8, "temperature": 0}
    _, a = s.request("POST", "/v1/completions", req)
    check(a["object"] == "text_completion" and a["model"] == name and a["id"].startswith("cmpl-"), f"completion {a}")
    check(isinstance(a["created"], int), "created")
    same_shape(a, shape("completion"))
    same_shape(models, shape("models"))
    c = a["choices"][0]
    check(c["index"] == 0 and isinstance(c["text"], str) and c["finish_reason"] in ("length", "stop"), f"choice {c}")
    u = a["usage"]
    check(u["completion_tokens"] <= 8 and u["total_tokens"] == u["prompt_tokens"] + u["completion_tokens"], f"usage {u}")
    check(u["prompt_tokens"] > 16, f"prompt tokens {u}")
    # Same request: greedy is deterministic and the prompt now comes from the prefix cache.
    _, b = s.request("POST", "/v1/completions", req)
    check(b["choices"][0]["text"] == c["text"], "greedy determinism")
    check(b["usage"]["prompt_tokens_details"]["cached_tokens"] >= 16, f"cached tokens {b['usage']}")

    # Streaming gives the same text.
    conn = s.connection()
    conn.request("POST", "/v1/completions", json.dumps(dict(req, stream=True, stream_options={"include_usage": True})),
                 s.headers({"Content-Type": "application/json"}))
    resp = conn.getresponse()
    check(resp.status == 200 and resp.getheader("Content-Type").startswith("text/event-stream"), "stream headers")
    datas = [d for _, _, d in parse_sse(resp)]
    check(datas and datas[-1] == "[DONE]", f"stream ends with [DONE]: {datas[-3:]}")
    chunks = [json.loads(d) for d in datas[:-1]]
    text = "".join(ch["choices"][0]["text"] for ch in chunks if ch["choices"])
    for ch in chunks[:-1]:
        same_shape(ch, shape("completion_chunk"))
    check(text == c["text"], f"streamed text {text!r} != {c['text']!r}")
    check(chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] == u["completion_tokens"],
          f"usage chunk {chunks[-1]}")
    finals = [ch["choices"][0]["finish_reason"] for ch in chunks if ch["choices"] and ch["choices"][0]["finish_reason"]]
    check(finals == [c["finish_reason"]], f"one finish_reason chunk: {finals}")

    # Chat, n=2, logprobs.
    chat = {"model": name, "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi!"}],
            "max_tokens": 5, "temperature": 0.8, "seed": 7, "n": 2, "logprobs": True, "top_logprobs": 3}
    _, r = s.request("POST", "/v1/chat/completions", chat)
    check(r["object"] == "chat.completion" and len(r["choices"]) == 2, f"chat {r}")
    same_shape(r, shape("chat_completion"))
    for i, ch in enumerate(r["choices"]):
        check(ch["index"] == i and ch["message"]["role"] == "assistant" and isinstance(ch["message"]["content"], str), f"chat choice {ch}")
        lp = ch["logprobs"]["content"]
        check(1 <= len(lp) <= 5, f"logprob entries {len(lp)}")
        for e in lp:
            check(e["logprob"] <= 0 and isinstance(e["bytes"], list) and len(e["top_logprobs"]) == 3, f"logprob entry {e}")
            tops = [t["logprob"] for t in e["top_logprobs"]]
            check(tops == sorted(tops, reverse=True), f"top_logprobs sorted {tops}")
    check(r["usage"]["completion_tokens"] == sum(len(ch["logprobs"]["content"]) for ch in r["choices"]), "chat usage")
    _, r2 = s.request("POST", "/v1/chat/completions", chat)
    check([ch["message"]["content"] for ch in r2["choices"]] == [ch["message"]["content"] for ch in r["choices"]],
          "seeded sampling is reproducible")

    # Chat streaming: role first, content deltas, finish, [DONE].
    conn = s.connection()
    conn.request("POST", "/v1/chat/completions", json.dumps(dict(chat, stream=True, n=1, logprobs=False, top_logprobs=0)),
                 s.headers({"Content-Type": "application/json"}))
    datas = [d for _, _, d in parse_sse(conn.getresponse())]
    chunks = [json.loads(d) for d in datas[:-1]]
    check(datas[-1] == "[DONE]" and chunks[0]["choices"][0]["delta"].get("role") == "assistant", f"chat stream {chunks[:2]}")
    check(all(ch["object"] == "chat.completion.chunk" for ch in chunks), "chunk objects")
    for ch in chunks:
        same_shape(ch, shape("chat_completion_chunk"))
    check(chunks[-1]["choices"][0]["finish_reason"] in ("length", "stop"), f"chat stream end {chunks[-1]}")

    # Stop strings: the text never contains them; finish_reason "stop" when one matched.
    long = dict(req, max_tokens=40)
    _, full = s.request("POST", "/v1/completions", long)
    t = full["choices"][0]["text"]
    # A stop string from an ASCII stretch (random weights also emit invalid UTF-8, which JSON
    # carries as U+FFFD and which would not match the real bytes).
    at = next((i for i in range(1, len(t) - 2) if all(32 <= ord(ch) < 127 for ch in t[i:i + 2])), None)
    check(at is not None, f"no ASCII stretch to stop on in {t!r}")
    if at is not None:
        stop = t[at:at + 2]
        _, cut = s.request("POST", "/v1/completions", dict(long, stop=[stop]))
        ct = cut["choices"][0]
        check(ct["text"] == t[:t.find(stop)] and ct["finish_reason"] == "stop", f"stop {stop!r}: {ct} vs {t!r}")

    # Completion logprobs (legacy shape).
    _, lp = s.request("POST", "/v1/completions", dict(req, logprobs=2))
    l = lp["choices"][0]["logprobs"]
    check(len(l["tokens"]) == len(l["token_logprobs"]) == len(l["top_logprobs"]) == len(l["text_offset"]) ==
          lp["usage"]["completion_tokens"], f"legacy logprobs {l}")
    check("".join(l["tokens"]).startswith(lp["choices"][0]["text"][:1]) or lp["choices"][0]["text"] == "", "tokens text")


def auth(pith, model):
    with Server(pith, model, "--max-upload-bytes", "100000", api_key="sekrit") as s:
        check(s.request("GET", "/health", auth=False)[0] == 200, "health needs no key")
        expect_error(s, 401, "GET", "/v1/models", auth=False)
        expect_error(s, 401, "GET", "/metrics", auth=False)
        expect_error(s, 401, "GET", "/v1/models", headers={"Authorization": "Bearer wrong"}, auth=False)
        check(s.request("GET", "/v1/models")[0] == 200, "right key")
        expect_error(s, 413, "POST", "/v1/programs", b"\0" * 200000, {"Content-Type": "application/wasm"})
        check(s.request("GET", "/health")[0] == 200, "server up after 413")
        check(s.stop() == 0, "graceful exit with auth")


def limits(pith, model):
    """Keys file, per-key and total instance limits (429), request body limit (413)."""
    import tempfile
    with tempfile.NamedTemporaryFile("w", suffix=".keys", delete=False) as f:
        f.write("# team keys\nk1\n  k2  \n")
        keys = f.name
    try:
        with Server(pith, model, "--api-keys-file", keys, "--max-instances-per-key", "2", "--max-instances", "3",
                    "--max-body-bytes", "2000") as s:
            s.api_key = "k1"
            h = s.upload(W("echo"))
            a = [s.launch(h, []), s.launch(h, [])]
            expect_error(s, 429, "POST", "/v1/instances", {"program": h})
            s.api_key = "k2"
            b = s.launch(h, [])
            data = expect_error(s, 429, "POST", "/v1/instances", {"program": h})
            check("3 instances" in data["error"]["message"], f"total limit message {data}")
            expect_error(s, 413, "POST", "/v1/instances", {"program": h, "args": ["x" * 3000]})
            for iid in a + [b]:
                s.request("DELETE", f"/v1/instances/{iid}")
            deadline = time.time() + 30
            while time.time() < deadline:
                _, lst = s.request("GET", "/v1/instances")
                if all(i["state"] == "finished" for i in lst["instances"]):
                    break
                time.sleep(0.1)
            check(s.launch(h, ["--no-wait"]), "launch again once instances ended")
            s.api_key = "k3"
            expect_error(s, 401, "GET", "/v1/instances")
    finally:
        os.unlink(keys)


def config_sources(pith, model):
    """TOML file < PITH_* environment < flags."""
    import subprocess
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        cfg = os.path.join(d, "pith.toml")
        with open(cfg, "w") as f:
            f.write('api_key = ["fromfile"]\nmax_upload_bytes = 100000\nport = 1\nlog_interval = 0\n')
        s = Server(pith, model, "--config", cfg, env={"PITH_MAX_UPLOAD_BYTES": "50000"})
        s.start()  # --port from the harness beats port = 1 in the file
        try:
            expect_error(s, 401, "GET", "/v1/models", auth=False)
            s.api_key = "fromfile"
            check(s.request("GET", "/v1/models")[0] == 200, "API key from the TOML file")
            expect_error(s, 413, "POST", "/v1/programs", b"\0" * 70000, {"Content-Type": "application/wasm"})
        finally:
            check(s.stop() == 0, "graceful exit (config)")
        with open(cfg, "w") as f:
            f.write('no_such_option = 3\n')
        p = subprocess.run([pith, "serve", "-m", model, "--config", cfg], capture_output=True, text=True, timeout=60)
        check(p.returncode != 0 and "no_such_option" in p.stderr, f"unknown TOML key: {p.returncode} {p.stderr}")
        p = subprocess.run([pith, "serve", "-m", "/nonexistent.gguf", "--port", "0"], capture_output=True, text=True,
                           timeout=60)
        check(p.returncode == 1 and "/nonexistent.gguf" in p.stderr, f"bad model: {p.returncode} {p.stderr}")


def bad_options(pith, model):
    """Every invalid option ends `pith serve` before it listens: non-zero exit, a message naming it."""
    import subprocess
    import tempfile
    cases = [(["--batch-formation", "lifo"], {}, "--batch-formation"),
             (["--batch-policy", "sometimes"], {}, "--batch-policy"),
             (["--kv-memory", "lots"], {}, "--kv-memory"),
             (["--kv-dtype", "q8"], {}, "--kv-dtype"),
             (["--cuda-attention", "triton"], {}, "--cuda-attention"),
             ([], {"PITH_CUDA_ATTENTION": "xformers"}, "--cuda-attention"),
             (["--device", "tpu"], {}, "--device"),
             ([], {"PITH_DEVICE": "cuda:x"}, "--device"),
             (["--gpu-memory-fraction", "1.5"], {}, "--gpu-memory-fraction"),
             (["--runtime-threads", "0"], {}, "--runtime-threads"),
             (["--api-keys-file", "/nonexistent/keys"], {}, "/nonexistent/keys"),
             (["--port", "70000"], {}, "--port")]
    with tempfile.TemporaryDirectory() as d:
        cfg = os.path.join(d, "pith.toml")
        with open(cfg, "w") as f:
            f.write('gpu_memory_fraction = 0\n')
        cases.append((["--config", cfg], {}, "--gpu-memory-fraction"))
        for args, env, named in cases:
            p = subprocess.run([pith, "serve", "-m", model] + args, capture_output=True, text=True, timeout=60,
                               env=dict(os.environ, **env))
            check(p.returncode != 0 and named in p.stderr and "listening" not in p.stderr,
                  f"bad option {args} {env}: exit {p.returncode}, stderr {p.stderr!r}")
    # Valid device options (flag, environment, TOML) are accepted; this build serves on the CPU.
    with tempfile.TemporaryDirectory() as d:
        cfg = os.path.join(d, "pith.toml")
        with open(cfg, "w") as f:
            f.write('gpu_memory_fraction = 0.5\n')
        with Server(pith, model, "--config", cfg, "--device", "cpu", "--cuda-attention", "pith",
                    env={"PITH_GPU_MEMORY_FRACTION": "0.8"}) as s:
            check(s.request("GET", "/health")[0] == 200, "serving with --device cpu")
            log = s.server_log()
            check("backend cpu on" in log and "weights" in log and "KV pool" in log,
                  f"startup log names the backend and its memory: {log}")
            check(s.stop() == 0, "graceful exit (--device cpu)")


def kv_exhaustion(pith, model):
    """A prompt that the KV pool cannot hold: 503 'unavailable' (chosen by the failure's status code)."""
    with Server(pith, model, "--kv-memory", "16K", "--kv-page-size", "16",
                "--kv-dtype", "f32") as s:  # 2 pages: 32 tokens
        body = {"prompt": [100] * 40, "max_tokens": 2}
        code, data = s.request("POST", "/v1/completions", body, check=False)
        check(code == 503 and data["error"]["type"] == "unavailable" and "out of KV pages" in data["error"]["message"],
              f"KV exhaustion: {code} {data}")
        same_shape(data, shape("error"))
        body["stream"] = True
        code, raw = s.request("POST", "/v1/completions", body, check=False)
        events = [e for e in raw.decode().split("\n\n") if e.startswith("data: ")]
        err = json.loads(events[-2][6:]) if len(events) >= 2 else {}
        check(code == 200 and events[-1] == "data: [DONE]" and err.get("error", {}).get("code") == 503
              and err["error"].get("type") == "unavailable", f"KV exhaustion while streaming: {code} {raw!r}")
        check(s.request("GET", "/health")[0] == 200, "server up after KV exhaustion")
        check(s.stop() == 0, "graceful exit (KV exhaustion)")
    # The same budget in f16 holds twice the pages (64 tokens): that prompt now completes. On the
    # CPU: the CUDA backend keeps this F32 model's K/V in F32 and refuses --kv-dtype f16.
    with Server(pith, model, "--device", "cpu", "--kv-memory", "16K", "--kv-page-size", "16",
                "--kv-dtype", "f16") as s:
        code, data = s.request("POST", "/v1/completions", {"prompt": [100] * 40, "max_tokens": 2}, check=False)
        check(code == 200 and data["usage"]["completion_tokens"] == 2, f"f16 KV pool of 4 pages: {code} {data}")
        check("4 pages x 16 tokens, f16" in s.server_log(), f"startup log names the KV type: {s.server_log()}")
        check(s.stop() == 0, "graceful exit (f16 KV)")


def concurrency(s, n=200):
    h = s.upload(W("echo"))
    ids = [s.launch(h, []) for _ in range(n)]
    _, listing = s.request("GET", "/v1/instances")
    running = {i["id"] for i in listing["instances"] if i["state"] == "running"}
    check(set(ids) <= running, f"{n} instances running ({len(set(ids) & running)})")
    results = {}

    def drain(iid):
        results[iid] = [json.loads(d)["text"] for _, k, d in s.events(iid) if k == "message"]

    threads = [threading.Thread(target=drain, args=(i,)) for i in ids]
    for t in threads:
        t.start()
    for i in ids:
        s.send(i, f"m{i}")
        s.send(i, "quit")
    for t in threads:
        t.join(120)
    ok = sum(1 for i in ids if f"echo: m{i}" in results.get(i, []))
    check(ok == n, f"{ok}/{n} concurrent instances answered over HTTP")


def metrics(s):
    text = s.metrics_text()
    for name in ["pith_kv_pages", "pith_running_instances", "pith_prefix_cache_hit_tokens_total",
                 "pith_time_to_first_token_seconds_bucket", "pith_inter_token_latency_seconds_count",
                 "pith_batch_size_bucket", "pith_batch_tokens_count", "pith_prompt_tokens_total",
                 "pith_generation_tokens_total", "pith_instances_launched_total", "pith_prompt_tokens_computed_total"]:
        check(name in text, f"metric {name}")
    check(s.metric("pith_generation_tokens_total") > 0, "generation tokens counted")
    check(s.metric("pith_prefix_cache_hit_tokens_total") >= 16, "prefix-cache hits counted")


with Server(pith, model, "--log-interval", "1") as s:
    lifecycle(s)
    greedy_matches_engine(s)
    bad_input(s)
    openai(s)
    concurrency(s)
    metrics(s)
    code = s.stop()
    check(code == 0, f"graceful shutdown exit code {code}")
auth(pith, model)
limits(pith, model)
bad_options(pith, model)
kv_exhaustion(pith, model)
attachment(pith, model)
restart(pith, model)
config_sources(pith, model)

if failures:
    sys.exit(f"{len(failures)} check(s) failed")
print("server_api: all checks passed")
