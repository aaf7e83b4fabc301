#!/usr/bin/env python3
"""Writes the K-quant reference data for kquants_test with ggml's own Python package (gguf-py):
blocks.gguf holds one tensor per K-quant type (3 rows x 512 columns of random blocks: every
bit of the quants and packed scales random, the f16 super-block scales in [1e-3, 0.1]) written
by gguf-py's GGUFWriter; dequantized.gguf holds the same tensors as F32, dequantized by
gguf-py's numpy implementation (gguf.quants.dequantize). pith must read the first file and
dequantize it to the second: an independent check of the bit layouts and of the reader.

Made with gguf 0.19.0 (PyPI) and numpy 2.4.6, in a scratch venv; not a build or test dependency:
    python3 -m venv /tmp/v && /tmp/v/bin/pip install gguf==0.19.0
    /tmp/v/bin/python tests/data/kquant/make_reference.py tests/data/kquant
"""
import os
import sys

import numpy as np
from gguf import GGMLQuantizationType as T
from gguf import GGUFWriter
from gguf.quants import dequantize

ROWS, COLS = 3, 512
# Block bytes and the byte offsets of the f16 scales (d, and dmin where there is one).
TYPES = {"q4_K": (T.Q4_K, 144, [0, 2]), "q5_K": (T.Q5_K, 176, [0, 2]), "q6_K": (T.Q6_K, 210, [208])}


def main():
    out = sys.argv[1]
    rng = np.random.default_rng(20261124)
    blocks = GGUFWriter(os.path.join(out, "blocks.gguf"), "llama")
    ref = GGUFWriter(os.path.join(out, "dequantized.gguf"), "llama")
    for name, (qtype, size, scale_at) in TYPES.items():
        n_blocks = ROWS * COLS // 256
        raw = rng.integers(0, 256, size=(n_blocks, size), dtype=np.uint8)
        for at in scale_at:
            d = rng.uniform(1e-3, 0.1, size=n_blocks).astype(np.float16)
            raw[:, at:at + 2] = d.view(np.uint8).reshape(n_blocks, 2)
        data = raw.reshape(ROWS, COLS // 256 * size)
        blocks.add_tensor(name, data, raw_dtype=qtype)  # shape from the byte shape
        ref.add_tensor(name, dequantize(data, qtype).astype(np.float32).reshape(ROWS, COLS))
    for w in (blocks, ref):
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()


if __name__ == "__main__":
    main()
