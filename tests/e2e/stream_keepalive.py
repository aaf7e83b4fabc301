#!/usr/bin/env python3
"""A streamed chat completion that waits for KV pages (an older inferlet holds the whole pool)
carries SSE keep-alive comments while it waits, so a client or proxy with a read timeout keeps
the connection, and completes normally once the pages come free (real `pith serve`, tiny model).

Usage: stream_keepalive.py PITH MODEL INFERLET_DIR"""
import http.client
import json
import os
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pith_harness import Server  # noqa: E402


def main():
    pith, model, inferlets = sys.argv[1:4]
    # --kv-idle-suspend 0: the idle holder is never suspended for the younger request.
    with Server(pith, model, "--device", "cpu", "--kv-memory", "512K", "--kv-idle-suspend",
                "0") as s:
        pages = int(s.metric("pith_kv_pages_total"))
        holder = s.launch(s.upload(os.path.join(inferlets, "kv_alloc.wasm")), [str(pages)])
        t0 = time.monotonic()
        while s.metric("pith_kv_pages", {"state": "used"}) < pages:
            assert time.monotonic() - t0 < 30, "the holder did not get the pool"
            time.sleep(0.05)

        name = s.request("GET", "/v1/models")[1]["data"][0]["id"]
        conn = http.client.HTTPConnection("127.0.0.1", s.port, timeout=60)
        conn.request("POST", "/v1/chat/completions", json.dumps({
            "model": name, "max_tokens": 8, "stream": True,
            "messages": [{"role": "user", "content": "Hello"}]}),
            {"Content-Type": "application/json"})
        resp = conn.getresponse()
        assert resp.status == 200, resp.status
        lines = []  # (seconds since the request, line)
        t_request = time.monotonic()

        def read():
            for raw in resp:
                lines.append((time.monotonic() - t_request, raw.decode().rstrip("\r\n")))
        reader = threading.Thread(target=read)
        reader.start()

        time.sleep(12)
        early = [l for _, l in lines if l]
        assert early and all(l == ": keep-alive" for l in early), early
        assert s.metric("pith_kv_waiting_instances") >= 1

        s.send(holder, "quit")  # its pages come free: the request goes on
        reader.join(60)
        assert not reader.is_alive(), "the stream did not end"
        data = [l[len("data: "):] for _, l in lines if l.startswith("data: ")]
        assert data[-1] == "[DONE]", data[-3:]
        chunks = [json.loads(d) for d in data[:-1]]
        assert any(c["choices"] and c["choices"][0].get("finish_reason") for c in chunks), chunks
        first_data = next(t for t, l in lines if l.startswith("data: "))
        print(f"waited {first_data:.1f} s for pages with {len(early)} keep-alive comment(s), "
              f"then {len(chunks)} chunks and [DONE]")


if __name__ == "__main__":
    main()
