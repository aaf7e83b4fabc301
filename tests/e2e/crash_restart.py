#!/usr/bin/env python3
"""kill -9 of a real `pith serve` while a program's native build runs and a stream is being
generated, then a restart on the same cache dir: the program store is consistent (the program
uploaded before the kill is listed and runs; no temporary or partial file is served), the
native cache holds no partial module, and the restarted server serves streams again.

Usage: crash_restart.py PITH MODEL INFERLET_DIR"""
import http.client
import json
import os
import signal
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pith_harness import Server, require_inferlets  # noqa: E402


def start_stream(s, tokens):
    name = s.request("GET", "/v1/models")[1]["data"][0]["id"]
    conn = http.client.HTTPConnection("127.0.0.1", s.port, timeout=60)
    conn.request("POST", "/v1/completions", json.dumps({
        "model": name, "prompt": "Once", "max_tokens": tokens, "min_tokens": tokens,
        "temperature": 0, "stream": True}), {"Content-Type": "application/json"})
    resp = conn.getresponse()
    assert resp.status == 200
    resp.read1(128)  # streaming has begun
    return conn


def main():
    pith, model, inferlets = sys.argv[1], sys.argv[2], sys.argv[3]
    wasm = os.path.join(inferlets, "beam_search.wasm")
    require_inferlets(wasm)
    with tempfile.TemporaryDirectory(prefix="pith-crash-") as cache:
        s = Server(pith, model, "--device", "cpu", cache_dir=cache)
        s.start()
        conn = start_stream(s, 2000)
        program = s.upload(wasm)  # its native build starts now, in the background
        os.kill(s.proc.pid, signal.SIGKILL)  # mid-stream, mid-build
        s.proc.wait()
        conn.close()
        s.stop()

        programs = os.path.join(cache, "programs")
        leftovers = [f for f in os.listdir(programs) if f.endswith(".tmp")]
        native = os.path.join(cache, "native")
        partial = [f for f in os.listdir(native) if f.endswith(".so") and
                   os.path.getsize(os.path.join(native, f)) == 0]
        assert not partial, partial

        with Server(pith, model, "--device", "cpu", cache_dir=cache) as r:
            listed = [p["hash"] for p in r.request("GET", "/v1/programs")[1]["programs"]]
            assert program in listed, (program, listed)
            assert not [f for f in os.listdir(programs) if f.endswith(".tmp")]
            # The stored program itself (not a re-upload) launches and runs to the end.
            iid = r.launch(program, ["--prompt", "Once", "--beams", "2", "--max-tokens", "4"])
            r.close_input(iid)
            ended = None
            for _, event, data in r.events(iid, timeout=120):
                if event == "terminated":
                    ended = json.loads(data)
            assert ended and ended["kind"] == "exited" and ended["code"] == 0, ended
            conn = start_stream(r, 16)
            conn.close()
            status, _ = r.request("POST", "/v1/completions", {
                "model": r.request("GET", "/v1/models")[1]["data"][0]["id"], "prompt": "Once",
                "max_tokens": 4}, check=False)
            assert status == 200
    print(f"crash-restart: after kill -9 mid-stream and mid-build, the restarted server lists and "
          f"runs the program ({len(leftovers)} temporaries were left and swept), serves streams")


if __name__ == "__main__":
    main()
