#include "engine/kernels/matmul.h"

#include <vector>

#include "common/error.h"
#include "common/fp16.h"

namespace pith {

void dequantize_row(DType dtype, const void* src, float* dst, size_t n) {
  switch (dtype) {
    case DType::F32: {
      const float* s = static_cast<const float*>(src);
      for (size_t i = 0; i < n; ++i) dst[i] = s[i];
      return;
    }
    case DType::F16: {
      const uint16_t* s = static_cast<const uint16_t*>(src);
      for (size_t i = 0; i < n; ++i) dst[i] = f16_to_f32(s[i]);
      return;
    }
    case DType::BF16: {
      const uint16_t* s = static_cast<const uint16_t*>(src);
      for (size_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(s[i]);
      return;
    }
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

// Portable baseline: rows split across the pool, each row dequantised once and applied to
// every token. The SIMD kernels replace this per dtype.
void matmul(ThreadPool& pool, const WeightMatrix& w, const float* x, size_t n_tokens, float* y) {
  constexpr size_t kRowsPerTask = 16;
  size_t n_tasks = (w.rows + kRowsPerTask - 1) / kRowsPerTask;
  std::vector<std::vector<float>> scratch(pool.size(), std::vector<float>(w.cols));
  pool.parallel_for(n_tasks, [&](size_t task, size_t worker) {
    float* row = scratch[worker].data();
    size_t end = std::min(w.rows, (task + 1) * kRowsPerTask);
    for (size_t o = task * kRowsPerTask; o < end; ++o) {
      dequantize_row(w.dtype, w.row(o), row, w.cols);
      for (size_t t = 0; t < n_tokens; ++t) {
        const float* xt = x + t * w.cols;
        float acc = 0;
        for (size_t i = 0; i < w.cols; ++i) acc += row[i] * xt[i];
        y[t * w.rows + o] = acc;
      }
    }
  });
}

}  // namespace pith
