#!/usr/bin/env python3
"""Hugging Face folders as transformers v5 saves them load like the originals: for every model
family, the tiny random model `pith model gen` makes (HF format, seed 5) is copied with its
config.json replaced by the one transformers 5 wrote when it re-saved that model
(tests/data/oracle/hf_v5, tools/make_hf_v5_configs.sh: rope_parameters per layer type,
per_layer_config, num_local_experts, MinistralForCausalLM for a Mistral config), and `pith logits`
must give identical output on both folders.

Usage: hf_v5_configs.py PITH ORACLE_DIR VOCAB.gguf"""
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pith_harness import model_gen_args  # noqa: E402

TOKENS = "1,312,943,697,361,137,785,400,512,33,640,877,259,404,918,77,150,606,731,288,990"


def run(args):
    r = subprocess.run(args, capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        sys.exit(f"{' '.join(args)} failed ({r.returncode}): {r.stderr}")
    return r.stdout


def main():
    pith, oracle_dir, vocab = sys.argv[1:4]
    v5_dir = os.path.join(oracle_dir, "hf_v5")
    names = sorted(f[:-len(".config.json")] for f in os.listdir(v5_dir) if f.endswith(".config.json"))
    assert len(names) >= 16, names
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            family, options = model_gen_args(os.path.join(oracle_dir, "arch"), name)
            original = os.path.join(tmp, name)
            run([pith, "model", "gen", "--preset", "tiny", "--arch", family, "--format", "hf",
                 "--dtype", "f32", "--seed", "5", "--vocab", vocab, "-q", "-o", original] + options)
            resaved = original + ".v5"
            shutil.copytree(original, resaved)
            shutil.copy(os.path.join(v5_dir, f"{name}.config.json"),
                        os.path.join(resaved, "config.json"))
            logits = [run([pith, "logits", "-m", m, "--tokens", TOKENS, "--no-bos", "--top", "20",
                           "--json"]) for m in (original, resaved)]
            assert logits[0] == logits[1], f"{name}: the v5 config gives other logits"
            print(f"{name}: identical")
    print("ok")


if __name__ == "__main__":
    main()
