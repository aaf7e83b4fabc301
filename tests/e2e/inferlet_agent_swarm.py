#!/usr/bin/env python3
"""End-to-end: agent_swarm through the real `pith serve`: one coordinator and N worker
instances cooperating over broadcast/subscribe.

Usage: inferlet_agent_swarm.py PITH MODEL INFERLET_DIR

Launches the coordinator, waits until it is subscribed, launches N workers (in reverse order, so
the pipeline order cannot come from launch order), and checks: every instance exits 0; the
coordinator's final document holds the task and then exactly one contribution per agent, in
pipeline order, each signed with the instance id the server gave that worker and equal to what
that worker reported itself; each agent read everything before it (its context covers the task
and all earlier contributions).
"""
import json
import sys

sys.path.insert(0, __import__("os").path.dirname(__file__))
from pith_harness import Server  # noqa: E402

pith, model, inferlets = sys.argv[1:4]
N, TOKENS = 4, 5


def check(cond, msg, *ctx):
    if not cond:
        sys.exit("FAIL: " + msg + "\n" + "\n".join(str(c) for c in ctx))


def collect(events):
    msgs, exit_ = [], None
    for _, event, data in events:
        d = json.loads(data)
        if event == "message":
            msgs.append(d["text"])
        elif event == "terminated":
            exit_ = d
            break
    return msgs, exit_


with Server(pith, model) as s:
    prog = s.upload(f"{inferlets}/agent_swarm.wasm")
    coord = s.launch(prog, ["--role", "coordinator", "--swarm", "e2e", "--workers", str(N)])
    stream = s.events(coord)
    for _, event, data in stream:
        if event == "message":
            check(json.loads(data)["text"] == "listening", "coordinator did not start listening", data)
            break
        check(event != "terminated", "coordinator ended early", data)
    workers = {}
    for i in range(N, 0, -1):
        workers[i] = s.launch(prog, ["--role", "worker", "--swarm", "e2e", "--workers", str(N), "--index", str(i),
                                     "--tokens", str(TOKENS)])
    final_msgs, final_exit = collect(stream)
    check(final_exit and final_exit["code"] == 0 and final_exit["kind"] == "exited", "coordinator exit", final_exit, final_msgs)
    final = json.loads(final_msgs[-1])
    pipe = final["pipeline"]
    check([p["agent"] for p in pipe] == list(range(N + 1)), "pipeline order", pipe)
    check(pipe[0]["instance"] == coord, "the task is not signed by the coordinator", pipe[0], coord)
    prev_read = 0
    for i in range(1, N + 1):
        msgs, ex = collect(s.events(workers[i]))
        check(ex and ex["code"] == 0, f"worker {i} exit", ex, msgs)
        rep = json.loads(msgs[-1])
        check(pipe[i]["instance"] == workers[i], f"step {i} signed by the wrong instance", pipe[i], workers[i])
        check(pipe[i]["tokens"] == rep["tokens"] and len(rep["tokens"]) == TOKENS, f"worker {i} contribution", pipe[i], rep)
        check(rep["next"] == ("e2e/done" if i == N else f"e2e/stage/{i + 1}"), "routing", rep)
        earlier = sum(len(p["tokens"]) for p in pipe[:i])
        check(rep["read_tokens"] > earlier and rep["read_tokens"] > prev_read, f"worker {i} did not read the earlier steps", rep)
        check(rep["context_tokens"] == rep["read_tokens"] + TOKENS, f"worker {i} context", rep)
        prev_read = rep["read_tokens"]
    print(f"swarm of {N}: pipeline {[p['instance'] for p in pipe]}")
print("agent_swarm: ok")
