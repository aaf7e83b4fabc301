#!/usr/bin/env python3
"""Writes the quant reference data for kquants_test with ggml's own Python package (gguf-py):
blocks.gguf holds one tensor per K-quant type (Q2_K to Q6_K) and per 32-block type with a 5th bit or an offset
(Q4_1, Q5_0, Q5_1) (3 rows x 512 columns of random blocks: every bit of the quants and packed
scales random, the f16 scales in [1e-3, 0.1], the f16 offsets m in [-0.1, 0.1]) written
by gguf-py's GGUFWriter; dequantized.gguf holds the same tensors as F32, dequantized by
gguf-py's numpy implementation (gguf.quants.dequantize). pith must read the first file and
dequantize it to the second: an independent check of the bit layouts and of the reader.
iquant_blocks.gguf and iquant_dequantized.gguf do the same for the non-linear 4-bit types
(IQ4_NL, IQ4_XS; f16 scales in [1e-3, 0.1], every other bit random), from their own random
stream so that the files above stay as they were. mxfp4_blocks.gguf and mxfp4_dequantized.gguf
do the same for MXFP4 (every bit random but the E8M0 exponent byte, in [0, 250] so that no
value overflows f32; 0 and 1 are ggml's subnormal scales), again from a stream of their own.
quantized.gguf holds an F32 tensor "input" (3 rows x 512 columns, N(0, 1), with an all-zero,
a constant and an all-negative block) and its quantisation to Q4_1, Q5_0 and Q5_1 by gguf-py's
ports of llama.cpp's reference quantisers (gguf.quants.quantize), which pith's quantisers
(`pith model gen`) must reproduce byte for byte.

Made with gguf 0.19.0 (PyPI) and numpy 2.4.6, in a scratch venv; not a build or test dependency:
    python3 -m venv /tmp/v && /tmp/v/bin/pip install gguf==0.19.0
    /tmp/v/bin/python tests/data/kquant/make_reference.py tests/data/kquant
"""
import os
import sys

import numpy as np
from gguf import GGMLQuantizationType as T
from gguf import GGUFWriter
from gguf.quants import dequantize, quantize

ROWS, COLS = 3, 512
SCALE, OFFSET = (1e-3, 0.1), (-0.1, 0.1)
# Elements and bytes per block, and the byte offsets and ranges of its f16 scales and offsets.
TYPES = {
    "q2_K": (T.Q2_K, 256, 84, [(80, SCALE), (82, SCALE)]),
    "q3_K": (T.Q3_K, 256, 110, [(108, SCALE)]),
    "q4_K": (T.Q4_K, 256, 144, [(0, SCALE), (2, SCALE)]),
    "q5_K": (T.Q5_K, 256, 176, [(0, SCALE), (2, SCALE)]),
    "q6_K": (T.Q6_K, 256, 210, [(208, SCALE)]),
    "q4_1": (T.Q4_1, 32, 20, [(0, SCALE), (2, OFFSET)]),
    "q5_0": (T.Q5_0, 32, 22, [(0, SCALE)]),
    "q5_1": (T.Q5_1, 32, 24, [(0, SCALE), (2, OFFSET)]),
}


IQ_TYPES = {
    "iq4_nl": (T.IQ4_NL, 32, 18, [(0, SCALE)]),
    "iq4_xs": (T.IQ4_XS, 256, 136, [(0, SCALE)]),
}


def random_blocks(rng, types, blocks, ref):
    for name, (qtype, elems, size, scales) in types.items():
        n_blocks = ROWS * COLS // elems
        raw = rng.integers(0, 256, size=(n_blocks, size), dtype=np.uint8)
        for at, (lo, hi) in scales:
            d = rng.uniform(lo, hi, size=n_blocks).astype(np.float16)
            raw[:, at:at + 2] = d.view(np.uint8).reshape(n_blocks, 2)
        data = raw.reshape(ROWS, COLS // elems * size)
        blocks.add_tensor(name, data, raw_dtype=qtype)  # shape from the byte shape
        ref.add_tensor(name, dequantize(data, qtype).astype(np.float32).reshape(ROWS, COLS))


def write_iquants(out):
    rng = np.random.default_rng(20261202)
    blocks = GGUFWriter(os.path.join(out, "iquant_blocks.gguf"), "llama")
    ref = GGUFWriter(os.path.join(out, "iquant_dequantized.gguf"), "llama")
    random_blocks(rng, IQ_TYPES, blocks, ref)
    for w in (blocks, ref):
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()


def write_mxfp4(out):
    rng = np.random.default_rng(20261203)
    n_blocks = ROWS * COLS // 32
    raw = rng.integers(0, 256, size=(n_blocks, 17), dtype=np.uint8)
    raw[:, 0] = rng.integers(0, 251, size=n_blocks, dtype=np.uint8)
    raw[:4, 0] = (0, 1, 2, 250)
    data = raw.reshape(ROWS, COLS // 32 * 17)
    blocks = GGUFWriter(os.path.join(out, "mxfp4_blocks.gguf"), "llama")
    ref = GGUFWriter(os.path.join(out, "mxfp4_dequantized.gguf"), "llama")
    blocks.add_tensor("mxfp4", data, raw_dtype=T.MXFP4)
    ref.add_tensor("mxfp4", dequantize(data, T.MXFP4).astype(np.float32).reshape(ROWS, COLS))
    for w in (blocks, ref):
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()


def main():
    out = sys.argv[1]
    if len(sys.argv) > 2 and sys.argv[2] == "--mxfp4-only":  # gguf >= 0.20 knows MXFP4
        write_mxfp4(out)
        return
    write_iquants(out)
    write_mxfp4(out)
    rng = np.random.default_rng(20261124)
    blocks = GGUFWriter(os.path.join(out, "blocks.gguf"), "llama")
    ref = GGUFWriter(os.path.join(out, "dequantized.gguf"), "llama")
    random_blocks(rng, TYPES, blocks, ref)
    quantized = GGUFWriter(os.path.join(out, "quantized.gguf"), "llama")
    x = rng.standard_normal((ROWS, COLS)).astype(np.float32)
    x[0, 0:32] = 0
    x[1, 32:64] = 0.75
    x[2, 64:96] = -1 - np.arange(32, dtype=np.float32) / 32
    quantized.add_tensor("input", x)
    for name, qtype in (("q4_1", T.Q4_1), ("q5_0", T.Q5_0), ("q5_1", T.Q5_1)):
        quantized.add_tensor(name, quantize(x, qtype), raw_dtype=qtype)
    for w in (blocks, ref, quantized):
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()


if __name__ == "__main__":
    main()
