#!/usr/bin/env python3
"""End-to-end: the agent_react inferlet (paper R3) calls a tool over HTTP mid-generation.

Usage: agent_react.py PITH MODEL INFERLET_DIR

A tool server (python http.server on 127.0.0.1, in a thread) answers each POST with a numbered
result. `pith serve --inferlet-http-allow 127.0.0.1:PORT` runs the inferlet with two call points.
Checked: the tool saw exactly the calls the inferlet reports, in order, and their answers are in
the transcript; the KV cache was kept across the calls (every context slot computed once, by the
inferlet's accounting and by the server's token counters); the text before the first call is
plain greedy decoding; `pith run -m` gives the same tokens and tool answers; a host off the allow list is
refused with a log line naming it.
"""
import http.server
import json
import os
import subprocess
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pith_harness import Server, free_port, require_inferlets  # noqa: E402

pith, model, inferlets = sys.argv[1], sys.argv[2], sys.argv[3]
wasm = require_inferlets(f"{inferlets}/agent_react.wasm")
PROMPT = "Question: what is the weather in Paris? Thought:"
CALL_AT, MAX_TOKENS = [3, 7], 10

received = []


class Tool(http.server.BaseHTTPRequestHandler):
    def do_POST(self):  # noqa: N802 (http.server's naming)
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        received.append((self.headers.get("Content-Type"), body))
        answer = f"sunny, 21 C (call {body['call']}, query of {len(body['query'])} chars)".encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, *args):
        pass


tool = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Tool)
threading.Thread(target=tool.serve_forever, daemon=True).start()
port = tool.server_address[1]
url = f"http://127.0.0.1:{port}/tool"
args = ["--prompt", PROMPT, "--tool-url", url, "--call-at", ",".join(map(str, CALL_AT)),
        "--max-tokens", str(MAX_TOKENS)]

with Server(pith, model, "--inferlet-http-allow", f"127.0.0.1:{port}") as s:
    def counters():
        return (s.metric("pith_prompt_tokens_computed_total"),
                s.metric("pith_forward_tokens_total"))  # prefill + decode

    p0, f0 = counters()
    r = s.run(wasm, args)
    p1, f1 = counters()
    assert r.ok() and len(r.messages) == 1, (r.exit, r.messages, r.logs)
    out = json.loads(r.messages[0])

    # The tool calls: as many as reported, in order, JSON bodies, answers in the transcript.
    assert out["tool_calls"] == len(CALL_AT) == len(received), (out["tool_calls"], received)
    assert [b["call"] for _, b in received] == [1, 2], received
    assert all(ct == "application/json" for ct, _ in received), received
    assert out["observations"] == [f"sunny, 21 C (call {i + 1}, query of {len(b['query'])} chars)"
                                   for i, (_, b) in enumerate(received)], out["observations"]
    t = out["transcript"]
    assert t.startswith(PROMPT), t
    at1 = t.index("\nObservation: " + out["observations"][0] + "\n")
    at2 = t.index("\nObservation: " + out["observations"][1] + "\n")
    assert at1 < at2, t
    assert out["generated_tokens"] == MAX_TOKENS == len(out["generated_ids"]), out

    # KV kept across the calls: every slot computed exactly once; only the last sampled token
    # is still pending. The server agrees: it ran exactly those tokens through the model, and its
    # prompt-token counter grew by the prompt and observation tokens, plus the one pending
    # generated token that each observation's forward carries.
    assert out["forwarded_tokens"] + out["cached_tokens"] == out["computed_tokens"], out
    assert out["computed_tokens"] == out["context_tokens"] - 1, out
    assert out["context_tokens"] == out["prompt_tokens"] + MAX_TOKENS, out
    assert f1 - f0 == out["forwarded_tokens"], (f1 - f0, out)
    assert p1 - p0 == out["prompt_tokens"] - out["cached_tokens"] + len(CALL_AT), (p1 - p0, out)
    print(f"context {out['context_tokens']} tokens ({out['prompt_tokens']} prompt + observations), "
          f"server computed {int(f1 - f0)} = every slot once; prefill counter +{int(p1 - p0)}")

    # Before the first call it is plain greedy decoding.
    tc = s.run(f"{inferlets}/text_completion.wasm", ["--prompt", PROMPT, "--max-tokens", str(CALL_AT[0]),
                                                      "--tokens"])
    assert tc.ok(), (tc.exit, tc.messages)
    assert [int(x) for x in tc.messages[-1].split(",")] == out["generated_ids"][:CALL_AT[0]], \
        (tc.messages, out["generated_ids"])

    # A host off the allow list: the call fails, the log names the host, the tool is not contacted.
    other = free_port()
    n = len(received)
    bad = s.run(wasm, ["--prompt", PROMPT, "--tool-url", f"http://127.0.0.1:{other}/tool", "--call-at", "1"])
    assert bad.exit["code"] == 1, bad.exit
    assert bad.messages == [f"error: tool call http://127.0.0.1:{other}/tool: not enabled"], bad.messages
    assert any(f"refused host 127.0.0.1:{other}" in text for _, text in bad.logs), bad.logs
    assert len(received) == n

# The same run in-process (pith run -m --inferlet-http-allow): the same tokens and answers.
received.clear()
p = subprocess.run([pith, "run", "-m", model, "--inferlet-http-allow", f"127.0.0.1:{port}", wasm, "--no-stdin",
                    "--", *args], capture_output=True, timeout=300)
assert p.returncode == 0, p.stderr.decode()
# (Random weights may produce bytes that are not UTF-8: compare ids and observations, not text.)
local = json.loads(p.stdout.decode("utf-8", "replace").strip().splitlines()[-1])
assert local["generated_ids"] == out["generated_ids"], (local, out)
assert local["observations"] == out["observations"], (local, out)
assert len(received) == len(CALL_AT)
tool.shutdown()
print("1 passed, 0 failed")
