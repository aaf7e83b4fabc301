// Matrix products against model weights: the compute core of every forward pass.
//
// Weights are stored [rows = out_features][cols = in_features], each row contiguous, in their
// file dtype (f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q4_k, q5_k, q6_k); activations are
// f32 [n_tokens][cols], outputs f32 [n_tokens][rows]. Accumulation is always f32.
//
// The implementation picks a path by n_tokens: few tokens (decode) is bound by weight-read
// bandwidth; many tokens (prefill, big decode batches) by arithmetic, so it tiles the weights
// so that each loaded weight is reused across tokens. The SIMD level (AVX-512, AVX2, scalar)
// is chosen at run time from the CPU; see docs/kernels.md.
//
// Activations are first converted to the weight's dot type, as llama.cpp does: rounded to bf16
// for BF16 weights, quantised to int8 per 32-block (scale fp16(amax/127)) for the 32-block
// types (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL, IQ4_XS's sub-blocks), per 256-block (with
// per-16 sums) for the K-quants.
// F32 and F16 weights use the f32 activations unchanged.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>

#include "common/thread_pool.h"
#include "engine/kernels/cpu_features.h"
#include "formats/dtype.h"

namespace pith {

struct WeightMatrix {
  DType dtype = DType::F32;
  size_t rows = 0;  // out features
  size_t cols = 0;  // in features (multiple of the dtype's block size)
  const void* data = nullptr;
  // The same matrix in the 16-row panel layout (pack_weight_panels), or null. Kernels that
  // know the layout read it instead of `data`; `data` stays valid for the others. A matrix
  // made from another's rows must not copy it.
  const void* panels = nullptr;
  size_t row_bytes() const { return pith::row_bytes(dtype, cols); }
  const uint8_t* row(size_t r) const { return static_cast<const uint8_t*>(data) + r * row_bytes(); }
};

// y[t][o] = sum_i W[o][i] * x[t][i] for t < n_tokens, o < w.rows.
// Throws pith::Error when cols is not a multiple of the dtype's block size or data is null.
// x and y must not overlap. Uses the pool's threads (and the caller's).
void matmul(ThreadPool& pool, const WeightMatrix& w, const float* x, size_t n_tokens, float* y);

// The same with an explicit kernel level (tests and benchmarks compare levels); throws
// pith::Error when this CPU does not support `isa`.
void matmul(ThreadPool& pool, const WeightMatrix& w, const float* x, size_t n_tokens, float* y,
            KernelIsa isa);

// One block of a blocked matmul's output: y[t][r] for tokens [t0, t0 + n_tokens) and rows
// [r0, r0 + n_rows), row-major with stride n_rows.
struct MatmulBlock {
  size_t worker;  // pool worker that computed it (index for per-worker state)
  size_t r0, n_rows;
  size_t t0, n_tokens;
  const float* y;
};
using MatmulBlockFn = std::function<void(const MatmulBlock&)>;
inline constexpr size_t kMatmulBlockRows = 256;    // fixed: callers may rely on the partition
inline constexpr size_t kMatmulBlockTokens = 120;  // a block's output stays within ~120 KiB

// y = W x computed in blocks of kMatmulBlockRows rows that are handed to `consume` on the
// worker that computed them, while still in its cache; the full [n_tokens][rows] result is never
// written. For reductions over rows (LM head -> softmax + top-K) that would otherwise write and
// re-read n_tokens x vocab floats. Same kernels and results as matmul; consume runs
// concurrently on different workers (for different blocks).
void matmul_blocks(ThreadPool& pool, const WeightMatrix& w, const float* x, size_t n_tokens,
                   const MatmulBlockFn& consume);

// Repacks w once for the panel kernels, where the panels take about the bytes of its rows
// (the 32-block types, IQ4_NL/IQ4_XS and Q4_K on AVX512_VNNI CPUs, BF16 with 32-multiple columns on
// AVX512_BF16 ones, Q4_K on AVX2 ones, whose decode reads them); null for other dtypes and CPUs.
// Setting w.panels to it (kept alive as long as w) makes every product with w, decode included,
// stream 16-row panels instead of rows and skip per-call packing.
std::shared_ptr<const void> pack_weight_panels(ThreadPool& pool, const WeightMatrix& w);
// Whether pack_weight_panels packs w on this CPU (within the ISA cap), without packing it.
bool weight_panels_apply(const WeightMatrix& w);
// Whether a model's matrices and their panels together stay within 80 % of the machine's memory
// (ram_bytes; 0 when unknown, then they are taken to fit): beyond it the backend keeps the rows
// alone, so a model that fits once does not stop fitting because of its panels.
bool weight_panels_fit(size_t matrix_bytes, size_t panel_bytes, size_t ram_bytes);
// Bytes per row of those panels: the 16-row panel of rows [r, r + 16) starts at
// r * panel_row_bytes. The rows' own bytes for Q8_0 and BF16; Q4_K keeps its scales unpacked
// (148 bytes per 256 columns, 144 in the file).
size_t panel_row_bytes(DType dtype, size_t cols);

// Slow, obviously correct version (dequantise each row, f64 accumulate): the parity reference
// for the optimised kernels in tests.
void matmul_reference(const WeightMatrix& w, const float* x, size_t n_tokens, float* y);

// Converts one row of `n` elements (a multiple of the block size) to f32 (embedding lookup).
// Vectorised for f16/bf16; exact for every dtype.
void dequantize_row(DType dtype, const void* src, float* dst, size_t n);

}  // namespace pith
