#!/usr/bin/env python3
"""Prints docs/inferlets.md's table (the paper's Table 2 for pith): per technique inferlet, its
requirement (R1 KV control / R2 custom decoding / R3 I/O and workflow), lines of code, stripped
Wasm size, and which of vLLM / SGLang / llama.cpp offer the technique.

    tools/inferlet_table.py BUILD_DIR            # markdown table on stdout
    tools/inferlet_table.py BUILD_DIR --json     # the same rows as JSON

Lines of code: non-blank lines of inferlets/NAME/NAME.cpp that are not only a comment (the SDK
is counted once, on its own row). Stripped size: BUILD_DIR/inferlets/NAME.wasm copied and
stripped of custom sections with wasm-strip (wabt) or llvm-strip-14. An inferlet not yet built
shows "-". Inferlets found in inferlets/ but missing from TECHNIQUES are listed with "?" so a new
one is not silently left out.
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# name -> (technique, requirement, vLLM, SGLang, llama.cpp). Support: Y yes, P partly (see the
# notes in docs/inferlets.md), N no. Kept by hand: it is a statement about other systems.
TECHNIQUES = {
    "text_completion": ("Text completion", "-", "Y", "Y", "Y"),
    "tree_of_thought": ("ToT (Yao et al., 2023)", "R1, R3", "N", "P", "N"),
    "recursion_of_thought": ("RoT (Lee and Kim, 2023)", "R1, R3", "N", "N", "N"),
    "graph_of_thought": ("GoT (Besta et al., 2024)", "R1, R3", "N", "N", "N"),
    "skeleton_of_thought": ("SKoT (Ning et al., 2024)", "R1, R3", "N", "P", "N"),
    "prefix_caching": ("Prefix caching (Kwon et al., 2023)", "R1", "Y", "Y", "P"),
    "modular_caching": ("Modular caching (Gim et al., 2024)", "R1", "N", "N", "N"),
    "constrained_decoding": ("EBNF decoding (Dong et al., 2024)", "R2", "Y", "Y", "Y"),
    "beam_search": ("Beam search (Freitag and Al-Onaizan, 2017)", "R2", "Y", "N", "N"),
    "watermarking": ("Watermarking (Kirchenbauer et al., 2023)", "R2", "N", "N", "N"),
    "output_validation": ("Output validation (Kuchnik et al., 2023)", "R2", "P", "P", "N"),
    "speculative_decoding": ("Speculative decoding (Saxena, 2023)", "R2", "Y", "P", "Y"),
    "jacobi_decoding": ("Jacobi decoding (Santilli et al., 2023)", "R2", "N", "N", "P"),
    "attention_sink": ("Attention sink (Xiao et al., 2024)", "R1", "N", "N", "P"),
    "windowed_attention": ("Windowed attn. (Beltagy et al., 2020)", "R1", "P", "P", "P"),
    "hierarchical_attention": ("Hierarchical attn. (Tang et al., 2022)", "R1", "N", "N", "N"),
    "agent_react": ("Agent-ReACT (Yao et al., 2023b)", "All", "N", "N", "N"),
    "agent_codeact": ("Agent-CodeACT (Wang et al., 2024a)", "All", "N", "N", "N"),
    "agent_swarm": ("Agent-SWARM (Zhuge et al., 2024)", "All", "N", "N", "N"),
    "best_of_n": ("Best-of-N (beyond the paper)", "R1, R2", "P", "P", "N"),
    "mcts": ("MCTS (beyond the paper)", "R1, R2", "N", "N", "N"),
}

# Runtime test and benchmark programs, built-in serving programs: not techniques.
NOT_TECHNIQUES = {"echo", "traps", "spin", "hog", "deep", "calls", "pubsub", "big", "greedy_abi",
                  "overhead", "kv_alloc", "modelcalls", "http_fetch", "openai_completion"}


def loc(path):
    """Non-blank lines that are not only a // or /* */ comment."""
    n, in_block = 0, False
    with open(path, encoding="utf-8") as f:
        for line in f:
            s = line.strip()
            if in_block:
                if "*/" in s:
                    in_block = False
                    s = s.split("*/", 1)[1].strip()
                else:
                    continue
            if not s or s.startswith("//"):
                continue
            if s.startswith("/*"):
                if "*/" not in s:
                    in_block = True
                continue
            n += 1
    return n


def stripped_size(wasm):
    if not os.path.exists(wasm):
        return None
    tool = shutil.which("wasm-strip") or shutil.which("llvm-strip-14") or shutil.which("llvm-strip")
    if not tool:
        sys.exit("need wasm-strip (wabt) or llvm-strip-14")
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "m.wasm")
        shutil.copyfile(wasm, out)
        subprocess.run([tool, out], check=True, capture_output=True)
        return os.path.getsize(out)


def human(n):
    if n is None:
        return "-"
    if n >= 1024 * 1024:
        return f"{n / (1024 * 1024):.1f} MB"
    return f"{round(n / 1024)} KB"


def rows(build):
    out = []
    sdk_dir = os.path.join(ROOT, "sdk", "include", "pith")
    sdk = sum(loc(os.path.join(sdk_dir, f)) for f in sorted(os.listdir(sdk_dir)) if re.search(r"\.(h|hpp)$", f))
    out.append({"name": "sdk", "technique": "Support library (sdk/include/pith)", "requirement": "-", "loc": sdk,
                "wasm_bytes": None, "vllm": "", "sglang": "", "llama_cpp": ""})
    inferlets = os.path.join(ROOT, "inferlets")
    names = sorted(d for d in os.listdir(inferlets) if os.path.isfile(os.path.join(inferlets, d, d + ".cpp")))
    order = list(TECHNIQUES)
    names.sort(key=lambda n: (order.index(n) if n in order else len(order), n))
    for name in names:
        if name in NOT_TECHNIQUES:
            continue
        tech, req, v, s, l = TECHNIQUES.get(name, (name, "?", "?", "?", "?"))
        out.append({"name": name, "technique": tech, "requirement": req,
                    "loc": loc(os.path.join(inferlets, name, name + ".cpp")),
                    "wasm_bytes": stripped_size(os.path.join(build, "inferlets", name + ".wasm")),
                    "vllm": v, "sglang": s, "llama_cpp": l})
    return out


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    table = rows(sys.argv[1])
    if "--json" in sys.argv[2:]:
        print(json.dumps(table, indent=1))
        return
    print("| Technique | Inferlet | R1-3 | LoC | Wasm (stripped) | vLLM | SGLang | llama.cpp |")
    print("|---|---|---|---:|---:|:-:|:-:|:-:|")
    for r in table:
        name = f"`{r['name']}`" if r["name"] != "sdk" else "`sdk/include/pith/*`"
        print(f"| {r['technique']} | {name} | {r['requirement']} | {r['loc']} | {human(r['wasm_bytes'])} | "
              f"{r['vllm']} | {r['sglang']} | {r['llama_cpp']} |")


if __name__ == "__main__":
    main()
