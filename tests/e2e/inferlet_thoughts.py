#!/usr/bin/env python3
"""End-to-end: the thought-structured inferlets and MCTS through the real `pith serve`.

Usage: inferlet_thoughts.py PITH MODEL INFERLET_DIR NAME
NAME: tree_of_thought | recursion_of_thought | graph_of_thought | skeleton_of_thought | mcts

For every one: the branching structure ran with the counts the arguments imply (forks, joins,
calls per depth, ...); branches shared KV pages with their parent; the model computed fewer
tokens than the branches' contexts add up to (prefix sharing), and exactly as many as the
server's forward-token counters moved; branch decode steps batched together (some batch held
more than one sequence); the aggregated result was sent. MCTS: the tree statistics are
consistent (root visits == iterations, visits and values add up over children).
"""
import json
import math
import sys

sys.path.insert(0, __import__("os").path.dirname(__file__))
from pith_harness import Server  # noqa: E402

pith, model, inferlets, name = sys.argv[1:5]


def check(cond, msg, *ctx):
    if not cond:
        sys.exit(f"FAIL [{name}]: {msg}\n" + "\n".join(str(c) for c in ctx))


def forwarded(s):
    return s.metric("pith_forward_tokens_total")


def multi_seq_batches(s):
    # Batches with at least two sequences: the histogram's count minus its le="1" bucket.
    return s.metric("pith_batch_size_count") - s.metric("pith_batch_size_bucket", {"le": "1"})


def run(s, args):
    before, batched_before = forwarded(s), multi_seq_batches(s)
    r = s.run(f"{inferlets}/{name}.wasm", args)
    check(r.ok(), f"exit {r.exit}", r.messages, r.logs)
    check(len(r.messages) == 2, "expected the result and a JSON report", r.messages)
    rep = json.loads(r.messages[1])
    rep["_server_forwarded"] = forwarded(s) - before
    rep["_multi_seq_batches"] = multi_seq_batches(s) - batched_before
    return r.messages[0], rep


def common(rep, expect_batching=True):
    check(rep["tokens_forwarded"] == rep["_server_forwarded"],
          "the inferlet's token accounting disagrees with the server's counters", rep)
    check(rep["tokens_forwarded"] < rep["branch_tokens"],
          "no prefix sharing: computed tokens >= the branches' context tokens", rep)
    check(rep["shared_pages"] > 0, "forks shared no KV pages", rep)
    if expect_batching:
        check(rep["_multi_seq_batches"] > 0, "branch decode steps never batched together", rep)


with Server(pith, model) as s:
    if name == "tree_of_thought":
        b, k, d = 2, 3, 3
        text, rep = run(s, ["--prompt", "Use 4 7 8 8 to make 24. " * 3, "--breadth", str(b), "--expand", str(k),
                            "--depth", str(d), "--thought-tokens", "6", "--answer-tokens", "5"])
        # Level 0 expands one state, later levels b states, k children each.
        forks = k + (d - 1) * b * k
        check(rep["forks"] == forks and rep["evaluations"] == forks, "fork/evaluation counts", rep)
        check(rep["pruned"] == forks - b * d and rep["kept"] == b, "pruning counts: b kept per level", rep)
        check(rep["max_width"] == b * k, "a level's candidates did not decode side by side", rep)
        check(len(rep["best_path"]) == 6 * d and len(rep["answer_tokens"]) == 5, "best path / answer", rep)
        common(rep)
    elif name == "recursion_of_thought":
        split, depth = 2, 2
        text, rep = run(s, ["--prompt", "Multiply 123 by 456 and explain. " * 3, "--split", str(split),
                            "--depth", str(depth), "--question-tokens", "4", "--answer-tokens", "5"])
        check(rep["calls_per_depth"] == [split ** i for i in range(depth + 1)], "calls per depth", rep)
        forks = sum(split ** i for i in range(1, depth + 1))
        check(rep["forks"] == forks and rep["joins"] == forks, "every subproblem forked and joined back", rep)
        check(rep["answer_tokens_fed_back"] == 5 * forks, "sub-answers fed back", rep)
        check(len(rep["answer_tokens"]) == 5, "answer length", rep)
        common(rep)
    elif name == "graph_of_thought":
        rounds, k, m, refine = 2, 3, 2, 2
        text, rep = run(s, ["--prompt", "Sort 5 1 4 2 3 and merge the partial results. " * 3, "--rounds",
                            str(rounds), "--thoughts", str(k), "--merge", str(m), "--refine", str(refine),
                            "--thought-tokens", "5"])
        check(rep["joins"] == rounds and rep["join_inputs"] == rounds * m, "aggregations and their in-degree", rep)
        check(rep["forks"] == rounds * (k + 1 + refine), "forks", rep)
        check(len(rep["vertices"]) == 1 + rounds * (k + 1 + refine), "vertex count", rep)
        check(len(rep["edges"]) == rounds * (k + m + refine), "edge count", rep)
        best = rep["vertices"][rep["best"]]
        check(best["kind"] in ("aggregate", "refine"), "the best vertex is not an aggregate/refinement", rep)
        check(len(rep["best_tokens"]) == 5, "best thought length", rep)
        common(rep)
    elif name == "skeleton_of_thought":
        p = 4
        text, rep = run(s, ["--prompt", "How do I learn to play the piano well? " * 3, "--points", str(p),
                            "--point-tokens", "3", "--expand-tokens", "8"])
        check(rep["points"] == p and rep["forks"] == p and rep["max_width"] == p, "point expansions in parallel", rep)
        check(rep["rounds"] == 8 and rep["steps"] == 8 * p, "one round per expansion token", rep)
        check(len(rep["point_tokens"]) == p and all(len(e) == 8 for e in rep["expansion_tokens"]), "shape", rep)
        at = -1
        for i in range(p):  # "1.<point> <expansion>\n2...." (the model's text may hold anything)
            at = text.find(f"{i + 1}.", at + 1)
            check(at >= 0, "the answer does not list the points in order", text)
        common(rep)
    elif name == "mcts":
        iters = 20
        text, rep = run(s, ["--prompt", "The best opening move in chess is the one that " * 3, "--iterations", str(iters),
                            "--expand", "3", "--depth", "3", "--rollout", "4"])
        tree = rep["tree"]
        check(rep["root_visits"] == iters == tree[0]["visits"], "root visits != iterations", rep)
        check(sum(n["evals"] for n in tree) == iters, "evaluations != iterations", rep)
        for n in tree:
            kids = [tree[c] for c in n["children"]]
            check(all(tree[c]["parent"] == n["id"] for c in n["children"]), "parent links", n)
            check(n["visits"] == n["evals"] + sum(c["visits"] for c in kids), "visits do not add up", n, kids)
            total = n["eval_sum"] + sum(c["value_sum"] for c in kids)
            check(math.isclose(n["value_sum"], total, rel_tol=1e-9, abs_tol=1e-12), "values do not add up", n)
            if kids:
                check(math.isclose(sum(c["prior"] for c in kids), 1.0, rel_tol=1e-5), "priors", n)
            check(0 < n["value_sum"] / max(n["visits"], 1) <= 1 or n["visits"] == 0, "value range", n)
        check(rep["expansions"] == sum(1 for n in tree if n["children"]), "expansions", rep)
        check(len(tree) == 1 + 3 * rep["expansions"], "nodes per expansion", rep)
        # The reported path follows the most visited child at each level.
        at = tree[0]
        for tok in rep["best_path"]:
            best = max((tree[c] for c in at["children"]), key=lambda c: c["visits"])
            check(best["token"] == tok, "best path is not the most visited", rep["best_path"])
            at = best
        check(len(rep["best_path"]) >= 1, "empty best path", rep)
        common(rep, expect_batching=False)
    else:
        sys.exit(f"unknown inferlet {name}")
print(f"{name}: ok")
