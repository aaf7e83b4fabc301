#!/usr/bin/env python3
"""Writes tests/data/kquant/llama-cpp-mix-types.json: the tensor types llama.cpp's own quantiser
(llama_model_quantize of the llama-cpp-python in VENV) gives every tensor of one f32 model, per
mix, for KQuantModel.MixesMatchLlamaCppQuantiser. The model is `pith model gen --preset tiny256
--arch llama` with 16 layers, 4 query heads per KV head and FFNs of 256, so that the layer rules
(use_more_bits, the first eighth or sixteenth of the layers) and the GQA rules all show.
Needs the oracle venv of tools/README.md; never needed to build or test.
Usage: tools/make_mix_oracle.py BUILD_DIR [VENV_PYTHON]"""
import json
import os
import subprocess
import sys
import tempfile

# pith's mix names and llama.cpp's file types (LLAMA_FTYPE_MOSTLY_*).
MIXES = {"q2_k": 10, "q3_k_s": 11, "q3_k_m": 12, "q3_k_l": 13, "q4_k_s": 14, "q4_k_m": 15,
         "q5_k_m": 17, "q6_k": 18, "iq4_nl": 25, "iq4_xs": 30}
OPTIONS = ["num_hidden_layers=16", "num_key_value_heads=1", "intermediate_size=256"]
OUT = "tests/data/kquant/llama-cpp-mix-types.json"

QUANTISE = r"""
import ctypes, json, sys, gguf, llama_cpp
src, dst, ftype = sys.argv[1], sys.argv[2], int(sys.argv[3])
p = llama_cpp.llama_model_quantize_default_params()
p.ftype, p.nthread = ftype, 2
if llama_cpp.llama_model_quantize(src.encode(), dst.encode(), ctypes.byref(p)) != 0:
    sys.exit("llama_model_quantize failed")
print(json.dumps({t.name: t.tensor_type.name.lower() for t in gguf.GGUFReader(dst).tensors}))
"""


def main():
    build = sys.argv[1]
    python = sys.argv[2] if len(sys.argv) > 2 else "/work/oracle-venv/bin/python"
    doc = {"_comment": "Tensor types of llama.cpp's quantiser (llama-cpp-python 0.3.36, llama.cpp "
                       "0c1e570) on `pith model gen --preset tiny256 --arch llama --option "
                       + " --option ".join(OPTIONS) + "`; made by tools/make_mix_oracle.py.",
           "preset": "tiny256", "options": OPTIONS, "mixes": {}}
    with tempfile.TemporaryDirectory() as tmp:
        f32 = os.path.join(tmp, "f32.gguf")
        cmd = [os.path.join(build, "bin", "pith"), "model", "gen", "--preset", "tiny256", "--arch",
               "llama", "--dtype", "f32", "--seed", "5", "--vocab",
               "tests/data/models/tiny-f32.gguf", "-q", "-o", f32]
        for o in OPTIONS:
            cmd += ["--option", o]
        subprocess.run(cmd, check=True)
        for mix, ftype in MIXES.items():
            out = subprocess.run([python, "-c", QUANTISE, f32, os.path.join(tmp, mix + ".gguf"),
                                  str(ftype)], check=True, capture_output=True, text=True).stdout
            types = json.loads(out.strip().splitlines()[-1])
            doc["mixes"][mix] = {k: v for k, v in sorted(types.items()) if v != "f32"}
    with open(OUT, "w") as f:
        json.dump(doc, f, indent=1, sort_keys=False)
        f.write("\n")
    print(f"{OUT}: {len(MIXES)} mixes")


if __name__ == "__main__":
    main()
