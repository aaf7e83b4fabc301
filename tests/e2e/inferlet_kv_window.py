#!/usr/bin/env python3
"""End-to-end: windowed_attention and attention_sink through the real `pith serve`.

Usage: inferlet_kv_window.py PITH MODEL INFERLET_DIR NAME   (NAME: windowed_attention | attention_sink)

Generates 4x the window. Asserts: the pages held stay bounded (the inferlet's own peak, and every
kv_pages value the server's instance listing showed while it ran) while a full-attention run
holds more; pages were freed; hiding the same slots without freeing pages (--keep-pages) gives
the identical output (freeing changed nothing but memory); the window changes the output
compared with full attention. attention_sink also: the sink tokens are still in the context and
attended — the output differs from the window-only (--sink 0) run.
"""
import json
import math
import sys
import time

sys.path.insert(0, __import__("os").path.dirname(__file__))
from pith_harness import Server  # noqa: E402

pith, model, inferlets, name = sys.argv[1:5]
WINDOW, PAGE, TOKENS, SINK = 32, 16, 128, 4
PROMPT = "Once upon a time, in a land far away, there lived a"


def check(cond, msg, *ctx):
    if not cond:
        sys.exit(f"FAIL [{name}]: {msg}\n" + "\n".join(str(c) for c in ctx))


def run(s, args):
    """Launches, polls the instance listing's kv_pages until it finishes, then reads its events."""
    iid = s.launch(s.upload(f"{inferlets}/{name}.wasm"), args)
    seen = []
    while True:
        _, inst = s.request("GET", f"/v1/instances/{iid}")
        if inst["state"] != "running":
            break
        seen.append(inst["kv_pages"])
        time.sleep(0.005)
    msgs, exit_ = [], None
    for _, event, data in s.events(iid):
        d = json.loads(data)
        if event == "message":
            msgs.append(d["text"])
        elif event == "terminated":
            exit_ = d
    check(exit_ and exit_["kind"] == "exited" and exit_["code"] == 0, f"exit {exit_}", msgs)
    rep = json.loads(msgs[1])
    check(len(rep["tokens"]) == TOKENS, "wrong number of tokens", rep)
    rep["_seen_kv_pages"] = max(seen, default=0)
    return rep


base = ["--prompt", PROMPT, "--window", str(WINDOW), "--max-tokens", str(TOKENS)]
with Server(pith, model, "--kv-page-size", str(PAGE)) as s:
    if name == "windowed_attention":
        win = run(s, base)
        keep = run(s, base + ["--keep-pages"])
        full = run(s, base + ["--full"])
        bound = math.ceil(WINDOW / PAGE) + 2  # the window's pages, a partial one at each end
    else:
        win = run(s, base + ["--sink", str(SINK)])
        keep = run(s, base + ["--sink", str(SINK), "--keep-pages"])
        full = run(s, base + ["--sink", "0"])  # the window-only baseline
        bound = math.ceil(WINDOW / PAGE) + 3  # + the sinks' page
        check(win["sinks_kept"] == SINK, "the sink tokens left the context", win)
        check(win["tokens"] != full["tokens"], "sinks made no difference: are they attended?", win, full)
    print(f"{name}: max pages {win['max_pages']} (listing saw {win['_seen_kv_pages']}), "
          f"kept-pages run {keep['max_pages']}, bound {bound}")
    check(win["max_pages"] <= bound, "KV pages not bounded by the window", win)
    check(win["_seen_kv_pages"] <= bound, "the server saw more pages than the bound", win)
    check(win["pages_freed"] > 0 and keep["pages_freed"] == 0, "page freeing", win, keep)
    check(keep["max_pages"] > bound, "the reference run should hold every page", keep)
    check(win["tokens"] == keep["tokens"], "freeing hidden pages changed the output", win, keep)
    if name == "windowed_attention":
        check(full["max_pages"] > bound, "full attention should hold every page", full)
        check(win["tokens"] != full["tokens"], "the window changed nothing: is it applied?", win, full)
print(f"{name}: ok")
