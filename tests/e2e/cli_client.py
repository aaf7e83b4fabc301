#!/usr/bin/env python3
"""End-to-end: the `pith` CLI as a client of a real `pith serve` (src/cli/cmd_client.cpp).

Usage: cli_client.py PITH MODEL INFERLET_DIR

`pith run --server URL` (upload once, launch, stream events, exit codes, stdin forwarding,
building a .cpp, SIGINT kills the instance, a SIGKILLed run's instance is ended by the
server), `--detach` + `pith ps` + `pith kill`,
`pith programs`, `pith complete` (plain, streamed, chat) and the client's errors (server not
running, missing API key).
"""
import hashlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pith_harness import Server, require_inferlets  # noqa: E402

pith, model, inferlets = sys.argv[1], sys.argv[2], sys.argv[3]
echo, traps, completion = require_inferlets(
    *(f"{inferlets}/{n}.wasm" for n in ("echo", "traps", "text_completion")))
passed = 0


def check(cond, what, p=None):
    if not cond:
        detail = f"\nstdout: {p.stdout}\nstderr: {p.stderr}" if p is not None else ""
        sys.exit(f"FAIL: {what}{detail}")


def cli(*args, expect=0, stdin=b"", env=None, timeout=300):
    """Runs `pith ARGS`; random weights may generate bytes that are not UTF-8, so decode leniently."""
    p = subprocess.run([pith, *args], input=stdin, capture_output=True, timeout=timeout,
                       env=dict(os.environ, **(env or {})))
    p.stdout = p.stdout.decode("utf-8", "replace")
    p.stderr = p.stderr.decode("utf-8", "replace")
    check(p.returncode == expect, f"pith {' '.join(args)} exited {p.returncode}, expected {expect}", p)
    return p


def ok(what):
    global passed
    passed += 1
    print(f"ok {passed} - {what}", flush=True)


def instances(s):
    return {i["id"]: i for i in s.request("GET", "/v1/instances")[1]["instances"]}


def wait_for(pred, what, timeout=30):
    deadline = time.time() + timeout
    while time.time() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(0.05)
    sys.exit(f"FAIL: timed out waiting for {what}")


with Server(pith, model) as s:
    url = f"http://127.0.0.1:{s.port}"
    srv = ["--server", url]

    # ---- pith run: text out, exit 0; the second run finds the program and does not upload it.
    args = ["--", "--prompt", "hi", "--max-tokens", "4", "--tokens"]
    a = cli("run", *srv, completion, *args)
    lines = a.stdout.splitlines()
    ids = lines[-1].split(",")
    check(len(lines) >= 2 and len(ids) == 4 and all(i.isdigit() for i in ids), "text then 4 token ids", a)
    check("finish: length" in a.stderr, "the inferlet's log line on stderr", a)
    uploads = s.metric("pith_program_uploads_total")
    b = cli("run", *srv, completion, *args)
    check(s.metric("pith_program_uploads_total") == uploads, "no second upload of the same program")
    check(b.stdout == a.stdout, "greedy completion is deterministic", b)
    local = cli("run", "-m", model, completion, "--no-stdin", *args)
    check(local.stdout.splitlines()[-1] == lines[-1], "same tokens as the in-process `pith run -m`", local)
    ok("pith run prints the completion and exits 0; uploads once")

    # ---- exit codes: a trap is 1 with its reason, exit(3) is 3.
    t = cli("run", *srv, traps, "--", "unreachable", expect=1)
    check(t.stdout.splitlines() == ["doing unreachable"], "messages before the trap", t)
    check("unreachable" in t.stderr and "trap" in t.stderr, "the trap reason on stderr", t)
    cli("run", *srv, traps, "--", "exit3", expect=3)
    ok("trap exits 1 with its reason; exit(3) exits 3")

    # ---- stdin lines become messages; EOF closes the inbox.
    e = cli("run", *srv, echo, "--", "x", stdin=b"hello\nworld with spaces\n")
    out = e.stdout.splitlines()
    check(out[1:] == ["arg 1: x", "echo: hello", "echo: world with spaces"], "echoed stdin lines", e)
    check("receive ended: closed" in e.stderr, "EOF closed the inbox", e)
    n = cli("run", *srv, "--no-stdin", echo, stdin=None)
    check("receive ended: closed" in n.stderr, "--no-stdin closes the inbox at once", n)
    ok("stdin forwarding and --no-stdin")

    # ---- a .cpp is built first, then run.
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "greet.cpp")
        with open(src, "w") as f:
            f.write('#include <pith/pith.hpp>\n'
                    'int main() { pith::send("built and run: " + pith::args().at(1)); return 0; }\n')
        g = cli("run", *srv, src, "--no-stdin", "--", "yes")
        check(g.stdout == "built and run: yes\n", "the built program's message", g)
    ok("pith run FILE.cpp builds and runs it")

    # ---- --detach, ps, kill.
    d = cli("run", *srv, "--detach", echo, "--", "bg")
    iid = d.stdout.strip()
    check(iid.isdigit(), "--detach prints the instance id", d)
    ps = cli("ps", *srv)
    row = [l for l in ps.stdout.splitlines() if l.split()[:1] == [iid]]
    check(ps.stdout.startswith("ID") and len(row) == 1 and "running" in row[0] and "bg" in row[0], "ps lists it", ps)
    listed = json.loads(cli("ps", *srv, "--json").stdout)
    check(any(i["id"] == iid and i["state"] == "running" for i in listed), "ps --json lists it")
    k = cli("kill", *srv, iid)
    check(k.stdout.strip() == iid, "kill prints the id", k)
    done = wait_for(lambda: instances(s)[iid]["exit"], "the killed instance to finish")
    check(done["kind"] == "killed" and "by client" in done["reason"], f"killed by client: {done}")
    check(not [l for l in cli("ps", *srv).stdout.splitlines() if l.split()[:1] == [iid]], "ps no longer lists it")
    check("killed" in [l for l in cli("ps", *srv, "-a").stdout.splitlines() if l.startswith(iid + " ")][0],
          "ps -a shows how it ended")
    cli("kill", *srv, "987654321", expect=1)
    ok("--detach, ps, kill")

    # ---- programs.
    p = cli("programs", *srv)
    for w in (echo, traps, completion):
        digest = hashlib.sha256(open(w, "rb").read()).hexdigest()
        check(digest in p.stdout, f"programs lists {os.path.basename(w)}", p)
    check("openai_completion" in p.stdout, "programs lists the built-in", p)
    ok("programs")

    # ---- complete: plain, streamed (same greedy text), chat.
    c = cli("complete", *srv, "Hello", "--max-tokens", "4", "--temperature", "0", "--usage")
    check("completion tokens" in c.stderr and "prompt tokens" in c.stderr, "usage on stderr", c)
    completion_tokens = int(c.stderr.split("prompt tokens")[1].split(",")[1].split()[0])
    check(1 <= completion_tokens <= 4, "at most 4 tokens", c)
    cs = cli("complete", *srv, "Hello", "--max-tokens", "4", "--temperature", "0", "--stream", "--usage")
    check(cs.stdout == c.stdout, "the streamed text equals the plain one", cs)
    check("completion tokens" in cs.stderr, "usage of a stream (stream_options.include_usage)", cs)
    ch = cli("complete", *srv, "Hi", "--chat", "--max-tokens", "3", "--temperature", "0")
    chs = cli("complete", *srv, "Hi", "--chat", "--max-tokens", "3", "--temperature", "0", "--stream")
    check(chs.stdout == ch.stdout, "chat: streamed text equals the plain one", chs)
    bad = cli("complete", *srv, "Hello", "--model", "no-such-model", expect=1)
    check("no-such-model" in bad.stderr and "404" in bad.stderr, "unknown model is a clear error", bad)
    ok("complete (plain, --stream, --chat)")

    # ---- SIGINT on an attached `pith run` kills its instance.
    before = set(instances(s))
    proc = subprocess.Popen([pith, "run", *srv, echo, "--", "sig"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    first = proc.stdout.readline()  # its first message: the stream is connected
    check(first.startswith(b"arg 0:"), f"first message of the attached run: {first!r}")
    new = wait_for(lambda: [i for i in instances(s) if i not in before], "the attached instance")
    check(len(new) == 1 and instances(s)[new[0]]["state"] == "running", "one running instance")
    proc.send_signal(signal.SIGINT)
    try:
        rc = proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        sys.exit("FAIL: pith run did not exit after SIGINT")
    err = proc.stderr.read().decode("utf-8", "replace")
    check(rc == 130, f"exit code 128+SIGINT, got {rc}: {err}")
    final = instances(s)[new[0]]
    check(final["state"] == "finished" and final["exit"]["kind"] == "killed", f"no instance left running: {final}")
    check(all(i["state"] != "running" for i in instances(s).values()), "nothing running at all")
    ok("SIGINT kills the instance before the CLI exits")

    # ---- SIGKILL leaves no chance to clean up: the server ends the orphan ("detach": false).
    before = set(instances(s))
    proc = subprocess.Popen([pith, "run", *srv, echo, "--", "orphan"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    check(proc.stdout.readline().startswith(b"arg 0:"), "the attached run started")
    new = wait_for(lambda: [i for i in instances(s) if i not in before], "the attached instance")
    proc.kill()
    proc.wait()
    gone = wait_for(lambda: instances(s)[new[0]]["exit"], "the orphan to be ended", timeout=20)
    check(gone["kind"] == "killed" and "client disconnected" in gone["reason"], f"orphan ended: {gone}")
    ok("a SIGKILLed attached run's instance is ended by the server")

    # ---- errors: no server, no key.
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        closed = sock.getsockname()[1]
    r = cli("ps", "--server", f"127.0.0.1:{closed}", expect=1)
    check("cannot connect to the pith server" in r.stderr, "connection refused is explained", r)
    check(s.stop() == 0, "pith serve exits 0 on SIGTERM")

with Server(pith, model, api_key="cli-key") as s:
    url = f"http://127.0.0.1:{s.port}"
    r = cli("ps", "--server", url, expect=1)
    check("401" in r.stderr and "unauthorized" in r.stderr, "a missing key is a clear 401", r)
    cli("ps", env={"PITH_SERVER": url, "PITH_API_KEY": "cli-key"})
    g = cli("run", "--api-key", "cli-key", "--server", url, echo, "--no-stdin")
    check(g.stdout.startswith("arg 0:"), "run with --api-key", g)
    ok("errors: server not running, API key missing / given by flag and environment")

print(f"{passed} passed, 0 failed")
