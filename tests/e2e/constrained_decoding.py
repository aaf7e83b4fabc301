#!/usr/bin/env python3
"""End-to-end: constrained_decoding through `pith serve` on a tiny model with the real Llama 3
vocabulary (128256 tokens, generated here with `pith model gen --vocab`).

Usage: constrained_decoding.py PITH VOCAB_GGUF INFERLET_DIR SPM_MODEL

For many seeds and temperatures (greedy included), every output of the JSON grammars (any value;
an object at the top) parses with Python's json module and every output of the arithmetic grammar parses with the recursive-descent
parser below (and evaluates, / by zero aside). Sampling masks the whole vocabulary: the inferlet
reports the 128256-token vocabulary and, inside JSON strings, far more allowed tokens per step than
any top-K request (256) could hold. Greedy steps and --top-k send the mask down instead and get the
best allowed tokens back: greedy output equals --whole-vocabulary greedy output token for token,
and --top-k output parses too. A custom --gbnf grammar is honoured; a broken one is refused
with the parser's message. On a SentencePiece model (SPM_MODEL, 1000 tokens) JSON still parses
and exactly the control/unknown tokens of its GGUF (read by the test) are excluded from masks.
"""
import json
import os
import re
import struct
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pith_harness import Server  # noqa: E402

pith, vocab, inferlets, spm_model = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
wasm = f"{inferlets}/constrained_decoding.wasm"
SEEDS = [1, 2, 3, 4]
TEMPERATURES = ["0", "0.7", "1.0", "1.5"]


def parse_arith(s):
    """expr := term (ws [+-] ws term)*; term := factor (ws [*/] ws factor)*;
    factor := number | "(" ws expr ws ")"; ws := " "?; number := 0 | [1-9][0-9]{0,5}.
    Returns the parse tree as nested tuples; raises ValueError on any deviation."""
    pos = 0

    def ws():
        nonlocal pos
        if pos < len(s) and s[pos] == " ":
            pos += 1

    def number():
        nonlocal pos
        m = re.compile(r"0|[1-9][0-9]{0,5}").match(s, pos)
        if not m:
            raise ValueError(f"number expected at {pos} in {s!r}")
        pos = m.end()
        return int(m.group())

    def factor():
        nonlocal pos
        if pos < len(s) and s[pos] == "(":
            pos += 1
            ws()
            e = expr()
            ws()
            if pos >= len(s) or s[pos] != ")":
                raise ValueError(f"')' expected at {pos} in {s!r}")
            pos += 1
            return e
        return number()

    def chain(sub, ops):
        nonlocal pos
        node = sub()
        while True:
            save = pos
            ws()
            if pos < len(s) and s[pos] in ops:
                op = s[pos]
                pos += 1
                ws()
                node = (op, node, sub())
            else:
                pos = save
                return node

    def term():
        return chain(factor, "*/")

    def expr():
        return chain(term, "+-")

    tree = expr()
    if pos != len(s):
        raise ValueError(f"trailing text at {pos} in {s!r}")
    return tree


def special_token_count(gguf):
    """Tokens of type unknown (2) or control (3) in a GGUF's tokenizer.ggml.token_type."""
    data = open(gguf, "rb").read()
    at = 8
    _, n_kv = struct.unpack_from("<QQ", data, at)
    at += 16
    scalar = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}

    def value(t, at):
        if t == 8:
            n, = struct.unpack_from("<Q", data, at)
            return data[at + 8:at + 8 + n], at + 8 + n
        if t == 9:
            et, n = struct.unpack_from("<IQ", data, at)
            at += 12
            items = []
            for _ in range(n):
                v, at = value(et, at)
                items.append(v)
            return items, at
        return struct.unpack_from(scalar[t], data, at)[0], at + struct.calcsize(scalar[t])

    for _ in range(n_kv):
        key, at = value(8, at)
        t, = struct.unpack_from("<I", data, at)
        v, at = value(t, at + 4)
        if key == b"tokenizer.ggml.token_type":
            return sum(1 for x in v if x in (2, 3))
    sys.exit(f"FAIL: {gguf} has no token types")


def main():
    with tempfile.TemporaryDirectory(prefix="pith-constrained-") as tmp:
        model = os.path.join(tmp, "tiny-llama3.gguf")
        subprocess.run([pith, "model", "gen", "--preset", "tiny", "--dtype", "f32", "--vocab", vocab,
                        "--seed", "11", "-q", "-o", model], check=True, timeout=300)
        with Server(pith, model) as server:
            program = server.upload(wasm)  # starts the native build
            for _ in range(600):  # the cases below run on native code, not the interpreter
                _, entry = server.request("GET", f"/v1/programs/{program}")
                if entry["native_ready"]:
                    break
                time.sleep(0.5)

            def case(args):
                r = server.run(wasm, args)
                assert r.ok() and len(r.messages) == 2, (args, r.exit, r.messages, r.logs)
                return args, r.messages[0], json.loads(r.messages[1])

            jobs = []
            for grammar, prompt, max_tokens in [("json", "Data:", "32"), ("json-object", "Record:", "40"),
                                                ("arith", "Compute:", "24")]:
                for seed in SEEDS:
                    for t in TEMPERATURES:
                        jobs.append(["--grammar", grammar, "--prompt", prompt, "--seed", str(seed),
                                     "--temperature", t, "--max-tokens", max_tokens])
                    jobs.append(["--grammar", grammar, "--prompt", prompt, "--seed", str(seed),
                                 "--temperature", "1.0", "--max-tokens", max_tokens, "--top-k", "64"])
                # Greedy with the mask sent down (above) against the whole vocabulary brought up.
                jobs.append(["--grammar", grammar, "--prompt", prompt, "--seed", "1",
                             "--temperature", "0", "--max-tokens", max_tokens, "--whole-vocabulary"])
            with ThreadPoolExecutor(max_workers=4) as pool:
                results = list(pool.map(case, jobs))
            for args, text, stats in results:
                if "--whole-vocabulary" in args:
                    masked = [r for r in results if r[0] == args[:-1]]
                    assert len(masked) == 1, args
                    assert masked[0][1] == text, (args, masked[0][1], text)

            string_steps = 0
            for args, text, stats in results:
                assert stats["vocab"] == 128256, stats
                assert stats["finish"] in ("eos", "budget", "complete"), (args, stats)
                assert stats["tokens"] == stats["sampled"] + stats["forced"], stats
                if args[1].startswith("json"):
                    try:
                        json.loads(text)
                    except ValueError as e:
                        sys.exit(f"FAIL: {args}: not JSON: {text!r} ({e})")
                    if args[1] == "json-object" and not text.strip().startswith("{"):
                        sys.exit(f"FAIL: {args}: not an object: {text!r}")
                    if stats["allowed_mean"] > 256:
                        string_steps += 1
                else:
                    try:
                        parse_arith(text)
                    except ValueError as e:
                        sys.exit(f"FAIL: {args}: not arithmetic: {e}")
                print(f"{' '.join(args[1:2] + args[5:8])}: {stats['sampled']}+{stats['forced']} tokens, "
                      f"{stats['allowed_mean']:.0f} allowed/step, mask {stats['mask_us']:.0f} us: {text[:60]!r}")
            # Whole-vocabulary masks: steps allowing thousands of tokens exist (inside strings).
            assert string_steps > 0, "no JSON run averaged more than 256 allowed tokens per step"

            _, text, stats = case(["--gbnf", 'root ::= ("yes" | "no") "!"', "--temperature", "1.0", "--seed", "5"])
            assert text in ("yes!", "no!"), text
            r = server.run(wasm, ["--gbnf", "root ::= missing"])
            assert r.exit["code"] == 1 and "undefined rule 'missing'" in r.messages[0], (r.exit, r.messages)

    # A SentencePiece vocabulary: its specials (<unk>, <s>, </s>) come from pith_vocab_special.
    with Server(pith, spm_model) as server:
        for seed in SEEDS:
            r = server.run(wasm, ["--grammar", "json-object", "--seed", str(seed), "--temperature", "1.0",
                                  "--max-tokens", "24"])
            assert r.ok() and len(r.messages) == 2, (r.exit, r.messages, r.logs)
            stats = json.loads(r.messages[1])
            assert stats["excluded"] == special_token_count(spm_model), stats
            json.loads(r.messages[0])
            print(f"spm seed {seed}: {r.messages[0][:60]!r}")
    print(f"ok: {len(results)} + {len(SEEDS)} constrained generations parse")


if __name__ == "__main__":
    main()
