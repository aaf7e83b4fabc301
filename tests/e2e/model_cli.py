#!/usr/bin/env python3
"""pith model gen / info end to end (real binary): a tiny model generated as GGUF and as a
Hugging Face folder from the real Llama 3 vocabulary reports the same shapes, parameters and
tokenizer size; bad requests exit 1 with a message naming the problem.

usage: model_cli.py PITH VOCAB_GGUF
"""
import json
import os
import subprocess
import sys
import tempfile


def run(args, expect_rc=0):
    p = subprocess.run(args, capture_output=True, text=True)
    if p.returncode != expect_rc:
        sys.exit(f"FAIL: {' '.join(args)} exited {p.returncode}, expected {expect_rc}\n{p.stdout}\n{p.stderr}")
    return p


def main():
    pith, vocab = sys.argv[1], sys.argv[2]
    with tempfile.TemporaryDirectory(prefix="pith_model_cli_") as tmp:
        gguf = os.path.join(tmp, "tiny.gguf")
        hf = os.path.join(tmp, "tiny-hf")
        common = ["--preset", "tiny", "--dtype", "bf16", "--vocab", vocab, "--seed", "9", "-q"]
        out = run([pith, "model", "gen", *common, "--format", "gguf", "-o", gguf]).stdout
        assert "wrote" in out, out
        run([pith, "model", "gen", *common, "--format", "hf", "-o", hf])
        for f in ["config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"]:
            assert os.path.exists(os.path.join(hf, f)), f
        a = json.loads(run([pith, "model", "info", "--json", gguf]).stdout)
        b = json.loads(run([pith, "model", "info", "--json", hf]).stdout)
        assert a["format"] == "gguf" and b["format"] == "hf", (a["format"], b["format"])
        for k in ["architecture", "n_layers", "d_model", "n_heads", "n_kv_heads", "head_dim", "d_ff",
                  "vocab_size", "context_length", "rope_theta", "rope_freq_factors", "tied_output",
                  "dtype", "n_params", "weight_bytes"]:
            assert a[k] == b[k], f"{k}: gguf {a[k]} != hf {b[k]}"
        assert a["vocab_size"] == 128256 and a["n_kv_heads"] == 2 and a["dtype"] == "bf16", a
        assert a["tokenizer"]["tokens"] == 128256 and b["tokenizer"]["tokens"] == 128256
        text = run([pith, "model", "info", gguf]).stdout
        assert "layers: 2" in text and "tokenizer: gpt2 (128256 tokens)" in text, text

        q8 = ["--preset", "tiny", "--dtype", "q8_0", "--vocab", vocab, "-q"]
        err = run([pith, "model", "gen", *q8, "--format", "hf", "-o", hf + "2"], 1).stderr
        assert "cannot be written to a Hugging Face folder" in err, err
        err = run([pith, "model", "info", os.path.join(tmp, "missing.gguf")], 1).stderr
        assert "missing.gguf" in err, err
        with open(os.path.join(tmp, "bad.gguf"), "wb") as f:
            f.write(open(gguf, "rb").read()[:1000])
        err = run([pith, "model", "info", os.path.join(tmp, "bad.gguf")], 1).stderr
        assert "bad.gguf" in err and err.startswith("pith: error:"), err
    print("ok")


if __name__ == "__main__":
    main()
