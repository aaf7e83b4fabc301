#!/usr/bin/env python3
"""End-to-end: agent_codeact through the real `pith serve`.

Usage: inferlet_agent_codeact.py PITH MODEL INFERLET_DIR

The inferlet runs JavaScript in Duktape inside its Wasm module. Asserts, per turn: the code was
built from the model's thought tokens and its result is what that code computes (recomputed
here); the result was fed back into the KV context (the context grew by exactly the tokens of
the observation text, counted with `pith tokenize`); the next turn continued the same context.
A supplied program (recursion) gives its known value; a JavaScript syntax error becomes an
"Error:" observation and the agent carries on to a normal end.
"""
import json
import subprocess
import sys

sys.path.insert(0, __import__("os").path.dirname(__file__))
from pith_harness import Server  # noqa: E402

pith, model, inferlets = sys.argv[1:4]


def check(cond, msg, *ctx):
    if not cond:
        sys.exit("FAIL: " + msg + "\n" + "\n".join(str(c) for c in ctx))


def n_tokens(text):
    out = subprocess.run([pith, "tokenize", "-m", model, "--no-bos", "--parse-special", "--json", text],
                         capture_output=True, check=True, text=True).stdout
    return len(json.loads(out))


def run(s, args):
    r = s.run(f"{inferlets}/agent_codeact.wasm", args, timeout=600)
    check(r.ok(), f"exit {r.exit}", r.messages, r.logs)
    check(len(r.messages) == 2, "expected the answer and a report", r.messages)
    return json.loads(r.messages[1])


def fed_back(rep):
    steps = rep["steps"]
    for i, st in enumerate(steps):
        obs = st["observation"].encode("latin-1").decode("utf-8")
        check(obs == "\nObservation: " + st["result"].encode("latin-1").decode("utf-8"), "observation text", st)
        check(st["context_after"] - st["context_before"] == n_tokens(obs),
              "the context did not grow by the observation's tokens", st)
        if i:
            check(st["context_before"] > steps[i - 1]["context_after"], "the next turn did not continue the context", steps)
    check(rep["context_tokens"] > steps[-1]["context_after"], "final answer not in the same context", rep)
    check(len(rep["answer_tokens"]) == 8, "answer length", rep)


with Server(pith, model) as s:
    rep = run(s, ["--turns", "3", "--think-tokens", "6"])
    check(rep["turns"] == 3 and rep["errors"] == 0 and len(rep["steps"]) == 3, "turns", rep)
    for st in rep["steps"]:
        h = 0
        for t in st["thought"]:
            h = (h * 31 + t) % 1000003
        check(len(st["thought"]) == 6 and str(st["thought"]).replace(" ", "") in st["code"], "code from thought", st)
        check(st["result"] == f"checksum {h}", "JavaScript result != the checksum of the thought ids", st, h)
    fed_back(rep)
    print("checksum turns:", [st["result"] for st in rep["steps"]])

    rep = run(s, ["--turns", "1", "--code", "function fib(n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); } "
                                            "fib(15) + {ids}.length"])
    check(rep["steps"][0]["result"] == str(610 + 8), "fib result", rep)
    fed_back(rep)

    # {text}: the thought's bytes as a string literal (any byte, \xNN outside printable ASCII).
    rep = run(s, ["--turns", "2", "--code",
                  "var s = {text}; var a = []; for (var i = 0; i < s.length; i++) a.push(s.charCodeAt(i)); a.join(',')"])
    for st in rep["steps"]:
        raw = subprocess.run([pith, "detokenize", "-m", model, "-n"] + [str(t) for t in st["thought"]],
                             capture_output=True, check=True).stdout
        check(st["result"] == ",".join(str(b) for b in raw), "{text} did not hold the thought's bytes", st, raw)
    fed_back(rep)

    rep = run(s, ["--turns", "2", "--code", "this is ( not {ids} javascript"])
    check(rep["turns"] == 2 and rep["errors"] == 2, "errors did not end the evaluation only", rep)
    for st in rep["steps"]:
        check(st["error"] and st["result"].startswith("Error:") and "uncaught" in st["result"] and "line 1" in st["result"], "error text", st)
    fed_back(rep)
    print("error turns:", rep["steps"][0]["result"][:80])
print("agent_codeact: ok")
