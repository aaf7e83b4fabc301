// Internal to engine/kernels: the per-ISA matmul entry points that matmul.cpp dispatches to,
// and the activation formats they share.
//
// Activations are converted once per matmul to the weight's "dot type" (as llama.cpp does,
// which also makes pith's logits track llama.cpp's more closely):
//   F32, F16 weights: f32 activations as given.
//   BF16 weights:     activations rounded to bf16 (round to nearest even), kept as f32 values.
//   Q8_0, Q4_0, Q5_0, activations quantised per 32-block to int8 with a scale
//   Q4_1, Q5_1:       d = fp16(amax / 127), q = round_half_even(x / d); integer dot products.
//                     The "+ m" types add m * s per block, s = fp16(amax / 127 * Σ q) as in
//                     ggml's q8_1 blocks (so pith's logits follow llama.cpp's to ~1e-7, where
//                     the exact d * Σ q left ~1e-2 on tiny models).
//                     The AVX2 f32 GEMM (many tokens) uses m * d * Σ q unrounded.
//   IQ4_NL, IQ4_XS,   as Q8_0 (ActQ8 per 32-block): their levels are signed int8 from a table;
//   MXFP4:            an IQ4_XS super-block is 8 such blocks with scales d * (ls - 32); MXFP4's
//                     scale is a power of two (as llama.cpp's mxfp4 x q8_0 dot).
//                     (llama.cpp multiplies IQ4_XS with per-256 activations; the per-32 scales
//                     here round the activations more finely, so logits differ in low bits.)
//   Q4_K, Q5_K, Q6_K: activations quantised per 256-block (ActQ8K) with the sums of each 16
//                     quants, which turn the weights' per-sub-block mins / offsets into one
//                     multiply per sub-block.
// Every ISA path computes the same math, so paths differ only by f32 summation order.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>

#include "common/thread_pool.h"
#include "engine/kernels/matmul.h"

namespace pith::kernels {

// One 32-element block of quantised activations.
struct ActQ8 {
  float d;  // scale (an fp16 value, widened)
  int8_t qs[32];
  float s;  // fp16(amax / 127 * Σ qs): multiplies the offset m of Q4_1/Q5_1 weight blocks
};
static_assert(sizeof(ActQ8) == 40);

// One 256-element block of quantised activations for K-quant weights. d keeps 16 significant
// bits (not fp16: activations can exceed its range), so that d * q is exact in f32 (the
// scalar reference and every integer kernel then agree up to f32 summation order).
struct ActQ8K {
  float d;
  int8_t qs[256];
  int16_t bsums[16];  // sum of qs[16 i .. 16 i + 15]
};
static_assert(sizeof(ActQ8K) == 292);

// Prepared activations for one matmul: `q8` for 32-block weights ([n_tokens][cols/32]
// blocks), `q8k` for K-quants ([n_tokens][cols/256]), otherwise `f32` ([n_tokens][cols],
// possibly bf16-rounded), plus `bf16` ([n_tokens][cols]) for the AVX512_BF16 kernel.
struct PreparedActs {
  const float* f32 = nullptr;
  const uint16_t* bf16 = nullptr;  // BF16 weights on AVX512_BF16 CPUs: the same values packed
  const ActQ8* q8 = nullptr;
  const ActQ8K* q8k = nullptr;
  size_t blocks_per_token = 0;
};

constexpr bool is_kquant(DType d) {
  return d == DType::Q2_K || d == DType::Q3_K || d == DType::Q4_K || d == DType::Q5_K ||
         d == DType::Q6_K;
}

// The 4-bit table types: int8 levels looked up by 4-bit indices, IQ4's non-linear ones
// (formats/iquants.h) and MXFP4's doubled FP4 values (formats/mxfp4.h).
constexpr bool is_iq4(DType d) {
  return d == DType::IQ4_NL || d == DType::IQ4_XS || d == DType::MXFP4;
}

// Weights multiplied as 32-element blocks with ActQ8 activations: ggml's 32-element quant
// blocks, and IQ4_XS, whose 32-element sub-blocks each have their own scale
// (block32_avx2.h: load_block32 finds sub-block b inside super-block b / 8).
constexpr bool is_block32_quant(DType d) {
  return d == DType::Q8_0 || d == DType::Q4_0 || d == DType::Q4_1 || d == DType::Q5_0 ||
         d == DType::Q5_1 || is_iq4(d);
}
// ... those of them with a per-block offset (value = d * q + m).
constexpr bool has_block_min(DType d) {
  return d == DType::Q4_1 || d == DType::Q5_1;
}

// Scalar quantisation of one row of activations (n a multiple of 32); the reference for the
// SIMD versions, which must give identical blocks.
void quantize_act_q8_scalar(const float* x, ActQ8* out, size_t n);
// The same per 256-block for K-quant weights (n a multiple of 256): d = amax / 127 rounded to
// 16 significant bits, q = round_half_even(x * (1 / d)) clamped to ±127.
void quantize_act_q8k(const float* x, ActQ8K* out, size_t n);
// The same with AVX2 (kquant_avx2.h), bit-identical.
void quantize_act_q8k_avx2(const float* x, ActQ8K* out, size_t n);
// The block scale for a block whose largest |x| is amax: amax / 127 rounded to 16 significant
// bits (nearest, ties away), so that d * q is exact for |q| ≤ 127.
inline float act_q8k_scale(float amax) {
  float v = amax / 127.0f;
  uint32_t u;
  std::memcpy(&u, &v, 4);
  u = (u + 0x80u) & ~0xffu;
  std::memcpy(&v, &u, 4);
  return v;
}
// Portable K-quant dot products of one weight row (n_blocks super-blocks) with one token's
// activations: per block d_a * (d * Σ_j sc_j Σ q·a - dmin * Σ_j m_j Σ a), integers exact.
float dot_q2k_scalar(const uint8_t* row, const ActQ8K* a, size_t n_blocks);
float dot_q3k_scalar(const uint8_t* row, const ActQ8K* a, size_t n_blocks);
float dot_q4k_scalar(const uint8_t* row, const ActQ8K* a, size_t n_blocks);
float dot_q5k_scalar(const uint8_t* row, const ActQ8K* a, size_t n_blocks);
float dot_q6k_scalar(const uint8_t* row, const ActQ8K* a, size_t n_blocks);

// Calls fn.template operator()<R, T>() for the runtime (r, t), 1 ≤ r ≤ RMax, 1 ≤ t ≤ TMax:
// how the loop nests pick a register tile for a ragged edge. Always inlined, so that the
// tile (compiled for the caller's ISA) can be inlined into the caller in turn.
template <int RMax, int TMax, typename Fn>
[[gnu::always_inline]] inline void for_tile(int r, int t, Fn&& fn) {
  if constexpr (RMax > 1) {
    if (r < RMax) return for_tile<RMax - 1, TMax>(r, t, fn);
  }
  if constexpr (TMax > 1) {
    if (t < TMax) return for_tile<RMax, TMax - 1>(r, t, fn);
  }
  fn.template operator()<RMax, TMax>();
}

// Decode (a single token group) is bandwidth-bound: every weight row is streamed from memory
// once, and the SIMD paths prefetch this far ahead (bytes) along the task's contiguous rows
// (AVX2 walks quantised rows, and float rows for one token, one at a time; its other float
// tiles prefetch the next tile; AVX-512 tiles prefetch along each of their rows): about twice
// what one core consumes during a DRAM round trip (on the 2-core Zen 3 VM, 8 KB matched a plain
// load loop over the same Q8_0 rows; 1-2 KB fell 5-15 % short, and R interleaved rows prefetching
// the next tile 5-10 %).
inline constexpr size_t kStreamAheadBytes = 8192;

// Rows per decode task: about 256 KiB of weights, so a task's stream is long against the
// prefetch distance and few tasks start cold (16-row tasks, 35 KB of a 2048-column Q8_0
// matrix, ran 10-15 % slower), yet at least 4 tasks per thread; a multiple of `align`.
size_t decode_row_block(const WeightMatrix& w, size_t n_threads, size_t align);

void matmul_scalar(ThreadPool& pool, const WeightMatrix& w, const PreparedActs& x, size_t n_tokens,
                   float* y);
void matmul_avx2(ThreadPool& pool, const WeightMatrix& w, const PreparedActs& x, size_t n_tokens,
                 float* y);
// Q4_K and BF16 products of up to kPanelMaxTokens tokens (decode) on AVX2 from load-time panels
// (gemv_panels_avx2.cpp; the layouts of weight_panels.h, which the AVX-512 kernels read too):
// packing (null for other dtypes), whether a product takes them, the whole product, and rows
// [r_begin, r_end) (r_begin a multiple of 16) x tokens [t_begin, t_end) into
// y[(t - t_begin) * ldy + r - r_begin].
inline constexpr size_t kPanelMaxTokens = 4;
std::shared_ptr<const void> pack_panels_avx2(ThreadPool& pool, const WeightMatrix& w);
bool uses_avx2_panels(const WeightMatrix& w, size_t n_tokens);
void gemv_panels_avx2(ThreadPool& pool, const WeightMatrix& w, const PreparedActs& x,
                      size_t n_tokens, float* y);
void gemv_panels_avx2_rows(const WeightMatrix& w, const PreparedActs& x, size_t t_begin,
                           size_t t_end, size_t r_begin, size_t r_end, float* y, size_t ldy);
void quantize_act_q8_avx2(const float* x, ActQ8* out, size_t n);
// The packed f32 GEMM behind matmul_avx2 for many tokens (gemm_avx2.cpp); x is f32 in the
// weight's dot type.
void gemm_avx2(ThreadPool& pool, const WeightMatrix& w, const float* x, size_t n_tokens, float* y);
// Its two halves, for callers that run many row ranges against the same activations
// (matmul_blocks): pack once (into the calling thread's scratch; tokens in groups of
// kGemmTokenGroup), then rows [r_begin, r_end) x tokens [t_begin, t_end) on the calling thread,
// t_begin a multiple of kGemmTokenGroup, into y[(t - t_begin) * ldy + (r - r_begin)].
inline constexpr size_t kGemmTokenGroup = 6;
const float* pack_gemm_acts_avx2(ThreadPool& pool, const float* x, size_t n_tokens, size_t cols);
void gemm_avx2_rows(const WeightMatrix& w, const float* xp, size_t t_begin, size_t t_end,
                    size_t r_begin, size_t r_end, float* y, size_t ldy);

// The token-lane variant of that GEMM for batched decode (tens of tokens; see gemm_avx2.cpp):
// activations packed per group of kGemmLaneGroup tokens, t_begin a multiple of it; same
// conventions as above.
inline constexpr size_t kGemmLaneGroup = 8;
void gemm_lanes_avx2(ThreadPool& pool, const WeightMatrix& w, const float* x, size_t n_tokens,
                     float* y);
const float* pack_lane_acts_avx2(ThreadPool& pool, const float* x, size_t n_tokens, size_t cols);
void gemm_lanes_avx2_rows(const WeightMatrix& w, const float* xp, size_t t_begin, size_t t_end,
                          size_t r_begin, size_t r_end, float* y, size_t ldy);

// The integer GEMM on AVX2 (gemm_int8_avx2.cpp) of the K-quants and Q8_0: 8-row panels packed
// per task, maddubs/madd dot products. `rows` runs rows [r_begin, r_end) x tokens [t_begin,
// t_end) on the calling thread into y[(t - t_begin) * ldy + (r - r_begin)].
bool has_int8_gemm_avx2(DType dtype);
void gemm_int8_avx2(ThreadPool& pool, const WeightMatrix& w, const PreparedActs& x, size_t n_tokens,
                    float* y);
void gemm_int8_avx2_rows(const WeightMatrix& w, const PreparedActs& x, size_t t_begin, size_t t_end,
                         size_t r_begin, size_t r_end, float* y, size_t ldy);

// matmul_avx2 split the same way: `prepare` picks the path for n_tokens (as matmul_avx2 does)
// and does the activation work that does not depend on the rows; `rows` runs one row range of
// tokens [t_begin, t_end) on the calling thread into y[(t - t_begin) * ldy + (r - r_begin)].
struct Avx2BlockActs {
  const PreparedActs* acts = nullptr;
  size_t n_tokens = 0;
  const float* gemm_packed = nullptr;  // set when the GEMM path is taken
  bool token_lanes = false;            // ... in its token-lane variant
  bool int8_gemm = false;              // the integer GEMM (gemm_int8_avx2)
};
Avx2BlockActs prepare_avx2_blocks(ThreadPool& pool, const WeightMatrix& w, const PreparedActs& x,
                                  size_t n_tokens);
void matmul_avx2_rows(const WeightMatrix& w, const Avx2BlockActs& a, size_t t_begin, size_t t_end,
                      size_t r_begin, size_t r_end, float* y, size_t ldy);
// path_tokens: the token count that picks the path (tiles or GEMM); n_tokens unless the call is
// one block of a larger product (matmul_blocks), which must take the whole product's path.
void matmul_avx512(ThreadPool& pool, const WeightMatrix& w, const PreparedActs& x, size_t n_tokens,
                   float* y, size_t path_tokens);

// The AVX-512 panel GEMMs (panel_gemm_avx512.h): weights repacked per task into 16-row panels,
// one 512-bit dot instruction per 16 rows. gemm_vnni_avx512: the 32-block quants and K-quants
// with vpdpbusd (AVX512_VNNI); gemm_bf16_avx512: BF16 with vdpbf16ps (AVX512_BF16, columns a
// multiple of 32, activations in PreparedActs::bf16). matmul_avx512 takes them from
// panel_gemm_min_tokens() tokens on (0: never; K-quants from 2x that, Q6_K 4x, BF16 8x).
inline constexpr size_t kPanelGemmDefaultMinTokens = 4;
size_t panel_gemm_min_tokens();
// Benchmarks and tests compare them with the register tiles; set it before kernels run.
void set_panel_gemm_min_tokens(size_t n);
bool uses_panel_gemm(const WeightMatrix& w, size_t n_tokens);
void gemm_vnni_avx512(ThreadPool& pool, const WeightMatrix& w, const PreparedActs& x,
                      size_t n_tokens, float* y);
void gemm_bf16_avx512(ThreadPool& pool, const WeightMatrix& w, const PreparedActs& x,
                      size_t n_tokens, float* y);
// pack_weight_panels's halves (null where the dtype or CPU has no load-time panels); row r's
// panel (r a multiple of 16) starts at r * panel_row_bytes(w.dtype, w.cols).
std::shared_ptr<const void> pack_panels_vnni_avx512(ThreadPool& pool, const WeightMatrix& w);
std::shared_ptr<const void> pack_panels_bf16_avx512(ThreadPool& pool, const WeightMatrix& w);

}  // namespace pith::kernels
