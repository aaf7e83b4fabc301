// matmul's front end: input checks, activation preparation (bf16 rounding / int8
// quantisation, in per-thread scratch), dispatch to the per-ISA kernels; plus the portable
// scalar kernel, the f64 reference and row dequantisation.
#include "engine/kernels/matmul.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "common/error.h"
#include "common/fp16.h"
#include "engine/kernels/matmul_kernels.h"
#include "engine/kernels/vector_ops.h"
#include "formats/iquants.h"
#include "formats/kquants.h"
#include "formats/legacy_quants.h"
#include "formats/mxfp4.h"

namespace pith {

void dequantize_row(DType dtype, const void* src, float* dst, size_t n) {
  switch (dtype) {
    case DType::F32: {
      const float* s = static_cast<const float*>(src);
      for (size_t i = 0; i < n; ++i) dst[i] = s[i];
      return;
    }
    case DType::F16:
      return f16_to_f32_row(static_cast<const uint16_t*>(src), dst, n);
    case DType::BF16:
      return bf16_to_f32_row(static_cast<const uint16_t*>(src), dst, n);
    case DType::Q8_0: {
      const BlockQ8_0* b = static_cast<const BlockQ8_0*>(src);
      for (size_t k = 0; k < n / 32; ++k) {
        float d = f16_to_f32(b[k].d);
        for (size_t j = 0; j < 32; ++j) dst[k * 32 + j] = d * b[k].qs[j];
      }
      return;
    }
    case DType::Q4_0: {
      const BlockQ4_0* b = static_cast<const BlockQ4_0*>(src);
      for (size_t k = 0; k < n / 32; ++k) {
        float d = f16_to_f32(b[k].d);
        for (size_t j = 0; j < 16; ++j) {
          dst[k * 32 + j] = d * (static_cast<int>(b[k].qs[j] & 0x0f) - 8);
          dst[k * 32 + j + 16] = d * (static_cast<int>(b[k].qs[j] >> 4) - 8);
        }
      }
      return;
    }
    case DType::Q4_1:
      return dequantize_q4_1(static_cast<const BlockQ4_1*>(src), dst, n);
    case DType::Q5_0:
      return dequantize_q5_0(static_cast<const BlockQ5_0*>(src), dst, n);
    case DType::Q5_1:
      return dequantize_q5_1(static_cast<const BlockQ5_1*>(src), dst, n);
    case DType::Q2_K:
      return dequantize_q2_k(static_cast<const BlockQ2_K*>(src), dst, n);
    case DType::Q3_K:
      return dequantize_q3_k(static_cast<const BlockQ3_K*>(src), dst, n);
    case DType::Q4_K:
      return dequantize_q4_k(static_cast<const BlockQ4_K*>(src), dst, n);
    case DType::Q5_K:
      return dequantize_q5_k(static_cast<const BlockQ5_K*>(src), dst, n);
    case DType::Q6_K:
      return dequantize_q6_k(static_cast<const BlockQ6_K*>(src), dst, n);
    case DType::IQ4_NL:
      return dequantize_iq4_nl(static_cast<const BlockIQ4_NL*>(src), dst, n);
    case DType::IQ4_XS:
      return dequantize_iq4_xs(static_cast<const BlockIQ4_XS*>(src), dst, n);
    case DType::MXFP4:
      return dequantize_mxfp4(static_cast<const BlockMXFP4*>(src), dst, n);
  }
  fail("dequantize_row: unsupported dtype {}", static_cast<uint32_t>(dtype));
}

void matmul_reference(const WeightMatrix& w, const float* x, size_t n_tokens, float* y) {
  std::vector<float> row(w.cols);
  for (size_t o = 0; o < w.rows; ++o) {
    dequantize_row(w.dtype, w.row(o), row.data(), w.cols);
    for (size_t t = 0; t < n_tokens; ++t) {
      double acc = 0;
      const float* xt = x + t * w.cols;
      for (size_t i = 0; i < w.cols; ++i) acc += double(row[i]) * double(xt[i]);
      y[t * w.rows + o] = static_cast<float>(acc);
    }
  }
}

namespace kernels {

void quantize_act_q8_scalar(const float* x, ActQ8* out, size_t n) {
  for (size_t b = 0; b < n / 32; ++b) {
    const float* xb = x + b * 32;
    float m = 0;
    for (size_t j = 0; j < 32; ++j) m = std::max(m, std::fabs(xb[j]));
    out[b].d = f16_to_f32(f32_to_f16(m / 127.0f));
    const float id = m != 0.0f ? 127.0f / m : 0.0f;
    int32_t sum = 0;
    for (size_t j = 0; j < 32; ++j) {
      out[b].qs[j] = static_cast<int8_t>(std::nearbyint(xb[j] * id));
      sum += out[b].qs[j];
    }
    out[b].s = f16_to_f32(f32_to_f16(m / 127.0f * static_cast<float>(sum)));
  }
}

namespace {

// Block b of a 32-block quant row times one block of activations:
// d * d_a * Σ (q - offset) a, plus m * s_a for the "+ m" types; integer sums exact.
float block32_dot(DType dtype, const uint8_t* row, size_t b, const ActQ8& a) {
  int32_t s = 0;
  float d = 0, m = 0;
  auto dot4 = [&](const uint8_t qs[16], uint32_t high, int offset) {
    for (size_t j = 0; j < 32; ++j) {
      const int q = nibble_quant(qs, j) | static_cast<int>(((high >> j) & 1u) << 4);
      s += (q - offset) * int32_t{a.qs[j]};
    }
  };
  switch (dtype) {
    case DType::Q8_0: {
      const auto& blk = reinterpret_cast<const BlockQ8_0*>(row)[b];
      d = f16_to_f32(blk.d);
      for (size_t j = 0; j < 32; ++j) s += int32_t{blk.qs[j]} * a.qs[j];
      break;
    }
    case DType::Q4_0: {
      const auto& blk = reinterpret_cast<const BlockQ4_0*>(row)[b];
      d = f16_to_f32(blk.d);
      dot4(blk.qs, 0, 8);
      break;
    }
    case DType::Q4_1: {
      const auto& blk = reinterpret_cast<const BlockQ4_1*>(row)[b];
      d = f16_to_f32(blk.d), m = f16_to_f32(blk.m);
      dot4(blk.qs, 0, 0);
      break;
    }
    case DType::Q5_0: {
      const auto& blk = reinterpret_cast<const BlockQ5_0*>(row)[b];
      d = f16_to_f32(blk.d);
      dot4(blk.qs, q5_high_bits(blk.qh), 16);
      break;
    }
    case DType::Q5_1: {
      const auto& blk = reinterpret_cast<const BlockQ5_1*>(row)[b];
      d = f16_to_f32(blk.d), m = f16_to_f32(blk.m);
      dot4(blk.qs, q5_high_bits(blk.qh), 0);
      break;
    }
    case DType::IQ4_NL:
    case DType::IQ4_XS: {
      const uint8_t* qs;
      if (dtype == DType::IQ4_NL) {
        const auto& blk = reinterpret_cast<const BlockIQ4_NL*>(row)[b];
        d = f16_to_f32(blk.d), qs = blk.qs;
      } else {
        const auto& blk = reinterpret_cast<const BlockIQ4_XS*>(row)[b / 8];
        d = f16_to_f32(blk.d) * static_cast<float>(iq4xs_subblock_scale(blk, int(b % 8)));
        qs = blk.qs + 16 * (b % 8);
      }
      for (size_t j = 0; j < 32; ++j) s += int32_t{kIq4nlLevels[nibble_quant(qs, j)]} * a.qs[j];
      break;
    }
    case DType::MXFP4: {
      const auto& blk = reinterpret_cast<const BlockMXFP4*>(row)[b];
      d = mxfp4_half_scale(blk.e);
      for (size_t j = 0; j < 32; ++j) s += int32_t{kMxfp4Levels[nibble_quant(blk.qs, j)]} * a.qs[j];
      break;
    }
    default:
      fail("block32_dot: {} is not a 32-block quant type", dtype_info(dtype).name);
  }
  return static_cast<float>(s) * (d * a.d) + m * a.s;
}

}  // namespace

size_t decode_row_block(const WeightMatrix& w, size_t n_threads, size_t align) {
  const size_t by_bytes = (size_t{256} << 10) / std::max<size_t>(1, w.row_bytes());
  const size_t by_balance = (w.rows + 4 * n_threads - 1) / (4 * n_threads);
  const size_t rows = std::max<size_t>(16, std::min(by_bytes, by_balance));
  return (rows + align - 1) / align * align;
}

// Portable kernel with the same math as the SIMD ones: one row at a time against every token.
void matmul_scalar(ThreadPool& pool, const WeightMatrix& w, const PreparedActs& x, size_t n_tokens,
                   float* y) {
  constexpr size_t kRowsPerTask = 16;
  const size_t n_tasks = (w.rows + kRowsPerTask - 1) / kRowsPerTask;
  const bool quant = is_block32_quant(w.dtype);
  std::vector<std::vector<float>> scratch(pool.size(), std::vector<float>(w.cols));
  pool.parallel_for(n_tasks, [&](size_t task, size_t worker) {
    float* row = scratch[worker].data();
    const size_t end = std::min(w.rows, (task + 1) * kRowsPerTask);
    for (size_t o = task * kRowsPerTask; o < end; ++o) {
      if (is_kquant(w.dtype)) {
        const auto dot = w.dtype == DType::Q2_K   ? dot_q2k_scalar
                         : w.dtype == DType::Q3_K ? dot_q3k_scalar
                         : w.dtype == DType::Q4_K ? dot_q4k_scalar
                         : w.dtype == DType::Q5_K ? dot_q5k_scalar
                                                  : dot_q6k_scalar;
        for (size_t t = 0; t < n_tokens; ++t)
          y[t * w.rows + o] = dot(w.row(o), x.q8k + t * x.blocks_per_token, x.blocks_per_token);
      } else if (quant) {
        // Integer dot per block, scaled by both block scales (dequantise gives d * q).
        for (size_t t = 0; t < n_tokens; ++t) {
          const ActQ8* a = x.q8 + t * x.blocks_per_token;
          float acc = 0;
          for (size_t b = 0; b < x.blocks_per_token; ++b)
            acc += block32_dot(w.dtype, w.row(o), b, a[b]);
          y[t * w.rows + o] = acc;
        }
      } else {
        dequantize_row(w.dtype, w.row(o), row, w.cols);
        for (size_t t = 0; t < n_tokens; ++t) {
          const float* xt = x.f32 + t * w.cols;
          float acc = 0;
          for (size_t i = 0; i < w.cols; ++i) acc += row[i] * xt[i];
          y[t * w.rows + o] = acc;
        }
      }
    }
  });
}

}  // namespace kernels

namespace {

// Per-thread scratch for prepared activations. A cache, not shared state: each thread that
// calls matmul reuses its own buffer, so steady-state forwards do not allocate.
template <typename T>
T* scratch(size_t n) {
  thread_local std::vector<uint8_t> buf;
  if (buf.size() < n * sizeof(T)) buf.resize(n * sizeof(T));
  return reinterpret_cast<T*>(buf.data());
}

}  // namespace

void matmul(ThreadPool& pool, const WeightMatrix& w, const float* x, size_t n_tokens, float* y) {
  matmul(pool, w, x, n_tokens, y, best_isa());
}

bool weight_panels_fit(size_t matrix_bytes, size_t panel_bytes, size_t ram_bytes) {
  return ram_bytes == 0 || matrix_bytes + panel_bytes <= ram_bytes / 10 * 8;
}

bool weight_panels_apply(const WeightMatrix& w) {
  if (w.data == nullptr || w.rows == 0) return false;
  switch (best_isa()) {
    case KernelIsa::Avx2:
      return w.dtype == DType::Q4_K || (w.dtype == DType::BF16 && w.cols % 32 == 0);
    case KernelIsa::Avx512:
      if (kernels::is_block32_quant(w.dtype) || w.dtype == DType::Q4_K)
        return cpu_features().avx512vnni;
      return w.dtype == DType::BF16 && w.cols % 32 == 0 && cpu_features().avx512bf16;
    case KernelIsa::Scalar:
      return false;
  }
  return false;
}

std::shared_ptr<const void> pack_weight_panels(ThreadPool& pool, const WeightMatrix& w) {
  if (!weight_panels_apply(w)) return nullptr;
  // AVX2 decodes Q4_K and BF16 from the same panels (gemv_panels_avx2.cpp); its other kernels
  // read rows.
  if (best_isa() == KernelIsa::Avx2) return kernels::pack_panels_avx2(pool, w);
  if (best_isa() != KernelIsa::Avx512) return nullptr;
  if (kernels::is_block32_quant(w.dtype) || w.dtype == DType::Q4_K)
    return kernels::pack_panels_vnni_avx512(pool, w);
  if (w.dtype == DType::BF16) return kernels::pack_panels_bf16_avx512(pool, w);
  return nullptr;
}

size_t panel_row_bytes(DType dtype, size_t cols) {
  if (dtype == DType::Q4_K) return cols / kQK * 148;
  if (dtype == DType::IQ4_XS) return cols / kQK * 140;
  return row_bytes(dtype, cols);
}

namespace {

void check_matmul_args(const WeightMatrix& w, KernelIsa isa) {
  const DTypeInfo& info = dtype_info(w.dtype);
  if (w.cols == 0 || w.cols % info.block_size != 0)
    fail("matmul: {} weight has {} columns, not a positive multiple of its block size {}",
         info.name, w.cols, info.block_size);
  if (w.data == nullptr && w.rows > 0) fail("matmul: weight matrix has no data");
  if (!isa_supported(isa))
    fail("matmul: kernel ISA '{}' is not supported by this CPU", isa_name(isa));
}

// Converts the activations to the weight's dot type (in the calling thread's scratch).
kernels::PreparedActs prepare_acts(ThreadPool& pool, const WeightMatrix& w, const float* x,
                                   size_t n_tokens, KernelIsa isa) {
  const size_t cols = w.cols;
  kernels::PreparedActs acts;
  // Activation preparation, split over tokens when there are many.
  auto per_token = [&](auto&& fn) {
    if (n_tokens >= 8)
      pool.parallel_for(n_tokens, [&](size_t t, size_t) { fn(t); });
    else
      for (size_t t = 0; t < n_tokens; ++t) fn(t);
  };
  switch (w.dtype) {
    case DType::F32:
    case DType::F16:
      acts.f32 = x;
      break;
    case DType::BF16: {
      float* xr = scratch<float>(n_tokens * cols);
      uint16_t* xb = nullptr;
      if (isa == KernelIsa::Avx512 && cpu_features().avx512bf16)
        xb = scratch<uint16_t>(n_tokens * cols);
      per_token([&](size_t t) {
        for (size_t i = t * cols; i < (t + 1) * cols; ++i) {
          uint16_t b = f32_to_bf16(x[i]);
          xr[i] = bf16_to_f32(b);
          if (xb) xb[i] = b;
        }
      });
      acts.f32 = xr;
      acts.bf16 = xb;
      break;
    }
    case DType::Q8_0:
    case DType::Q4_0:
    case DType::Q4_1:
    case DType::Q5_0:
    case DType::Q5_1:
    case DType::IQ4_NL:
    case DType::IQ4_XS:
    case DType::MXFP4: {
      acts.blocks_per_token = cols / 32;
      kernels::ActQ8* q = scratch<kernels::ActQ8>(n_tokens * acts.blocks_per_token);
      const bool simd = isa != KernelIsa::Scalar;
      per_token([&](size_t t) {
        if (simd)
          kernels::quantize_act_q8_avx2(x + t * cols, q + t * acts.blocks_per_token, cols);
        else
          kernels::quantize_act_q8_scalar(x + t * cols, q + t * acts.blocks_per_token, cols);
      });
      acts.q8 = q;
      break;
    }
    case DType::Q2_K:
    case DType::Q3_K:
    case DType::Q4_K:
    case DType::Q5_K:
    case DType::Q6_K: {
      acts.blocks_per_token = cols / kQK;
      kernels::ActQ8K* q = scratch<kernels::ActQ8K>(n_tokens * acts.blocks_per_token);
      const bool simd = isa != KernelIsa::Scalar;
      per_token([&](size_t t) {
        if (simd)
          kernels::quantize_act_q8k_avx2(x + t * cols, q + t * acts.blocks_per_token, cols);
        else
          kernels::quantize_act_q8k(x + t * cols, q + t * acts.blocks_per_token, cols);
      });
      acts.q8k = q;
      break;
    }
  }
  return acts;
}

void run_kernel(ThreadPool& pool, const WeightMatrix& w, const kernels::PreparedActs& acts,
                size_t n_tokens, float* y, KernelIsa isa, size_t path_tokens) {
  switch (isa) {
    case KernelIsa::Scalar:
      return kernels::matmul_scalar(pool, w, acts, n_tokens, y);
    case KernelIsa::Avx2:
      return kernels::matmul_avx2(pool, w, acts, n_tokens, y);
    case KernelIsa::Avx512:
      return kernels::matmul_avx512(pool, w, acts, n_tokens, y, path_tokens);
  }
}

// The activations of tokens [t0, ...) of a prepared set.
kernels::PreparedActs offset_acts(const kernels::PreparedActs& a, size_t t0, size_t cols) {
  kernels::PreparedActs o = a;
  if (o.f32) o.f32 += t0 * cols;
  if (o.bf16) o.bf16 += t0 * cols;
  if (o.q8) o.q8 += t0 * a.blocks_per_token;
  if (o.q8k) o.q8k += t0 * a.blocks_per_token;
  return o;
}

}  // namespace

void matmul(ThreadPool& pool, const WeightMatrix& w, const float* x, size_t n_tokens, float* y,
            KernelIsa isa) {
  check_matmul_args(w, isa);
  if (n_tokens == 0 || w.rows == 0) return;
  run_kernel(pool, w, prepare_acts(pool, w, x, n_tokens, isa), n_tokens, y, isa, n_tokens);
}

void matmul_blocks(ThreadPool& pool, const WeightMatrix& w, const float* x, size_t n_tokens,
                   const MatmulBlockFn& consume) {
  const KernelIsa isa = best_isa();
  check_matmul_args(w, isa);
  if (n_tokens == 0 || w.rows == 0) return;
  const kernels::PreparedActs acts = prepare_acts(pool, w, x, n_tokens, isa);
  const size_t n_blocks = (w.rows + kMatmulBlockRows - 1) / kMatmulBlockRows;
  // AVX2: the path and the row-independent activation work (GEMM packing) are decided once
  // for all n_tokens, exactly as matmul does, then every block runs on one thread.
  kernels::Avx2BlockActs avx2;
  if (isa == KernelIsa::Avx2) avx2 = kernels::prepare_avx2_blocks(pool, w, acts, n_tokens);
  static_assert(kMatmulBlockTokens % kernels::kGemmTokenGroup == 0 &&
                kMatmulBlockTokens % kernels::kGemmLaneGroup == 0);
  pool.parallel_for(n_blocks, [&](size_t b, size_t worker) {
    thread_local ThreadPool inline_pool(1);
    thread_local std::vector<float> ybuf;
    const size_t r0 = b * kMatmulBlockRows, nr = std::min(kMatmulBlockRows, w.rows - r0);
    for (size_t t0 = 0; t0 < n_tokens; t0 += kMatmulBlockTokens) {
      const size_t nt = std::min(kMatmulBlockTokens, n_tokens - t0);
      if (ybuf.size() < nt * nr) ybuf.resize(nt * nr);
      if (isa == KernelIsa::Avx2) {
        kernels::matmul_avx2_rows(w, avx2, t0, t0 + nt, r0, r0 + nr, ybuf.data(), nr);
      } else {
        // Other ISAs keep no per-call activation state worth sharing: run the kernel on the
        // block's rows with a one-thread pool, on the path the whole product would take.
        WeightMatrix sub{w.dtype, nr, w.cols, w.row(r0)};
        static_assert(kMatmulBlockRows % 16 == 0);  // block rows start whole panels
        if (w.panels != nullptr)
          sub.panels =
              static_cast<const uint8_t*>(w.panels) + r0 * panel_row_bytes(w.dtype, w.cols);
        run_kernel(inline_pool, sub, offset_acts(acts, t0, w.cols), nt, ybuf.data(), isa, n_tokens);
      }
      consume(MatmulBlock{worker, r0, nr, t0, nt, ybuf.data()});
    }
  });
}

}  // namespace pith
