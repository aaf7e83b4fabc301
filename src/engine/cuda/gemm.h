// The backend's matrix products on cuBLASLt: y = x W^T against a row-major weight on the device.
//
// BF16 mode: BF16 weights and activations, FP32 accumulation, output BF16 (Q/K/V, gate/up) or
// F32 (the projections added to the F32 residual stream, the LM head's logits). F32 mode: F32
// everything with CUBLAS_COMPUTE_32F, which never uses TF32, so results match the CPU engine to
// F32 rounding. Descriptors and the heuristic's algorithm are cached per shape: a decode loop
// calls the same few shapes again and again.
//
// Skinny BF16 products (n <= 8 rows: decode steps) have a second kernel, the own GEMV
// (kernels/gemv_body.h), which only streams the weights. The first time such a shape runs
// outside a graph capture both are timed on it (interleaved, L2 flushed before each run, so
// the weights come from memory as in a real step) and the GEMV is kept where it was at least 5 %
// faster; the margin keeps the choice, and so the results' rounding, from flipping on noise.
// Matrices under kTimedMinBytes stay on cuBLASLt untimed: they read in about a microsecond,
// where launch latency decides and a timed choice could go either way from one process to the
// next (two servers on one model would then round differently).
// run_gated does the same for a gate/up projection and its gated activation: the GEMV with the
// activation as its epilogue against the product (either kernel) followed by gated_activation.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <map>
#include <memory>
#include <tuple>

#include <functional>

#include "backend/model_config.h"  // FfnActivation
#include "engine/cuda/device_memory.h"
#include "engine/cuda/paged_attention.h"  // DType

namespace pith::cuda {

// A weight matrix on the device: [rows = out features][cols = in features], row-major.
struct DeviceMatrix {
  const void* data = nullptr;
  DType dtype = DType::BF16;
  uint32_t rows = 0;
  uint32_t cols = 0;
};

class Gemm {
 public:
  // How skinny products are run: timed per shape (the default), always cuBLASLt, or always the
  // own GEMV where it fits (the last two for A/B measurements and tests).
  enum class Skinny { Timed, Cublas, Own };
  static constexpr size_t kTimedMinBytes = size_t{4} << 20;
  struct SkinnyStats {
    uint32_t own = 0;      // shapes decided for the own GEMV
    uint32_t cublas = 0;   // shapes decided for cuBLASLt
    uint32_t fused = 0;    // gate/up shapes decided for the GEMV with the activation epilogue
    uint32_t unfused = 0;  // gate/up shapes decided for the product, then gated_activation
  };

  explicit Gemm(size_t workspace_bytes = size_t{32} << 20);
  ~Gemm();
  Gemm(const Gemm&) = delete;
  Gemm& operator=(const Gemm&) = delete;

  size_t workspace_bytes() const { return workspace_.bytes(); }

  // y[t][o] = sum_i w[o][i] * x[t][i] for t < n, o < w.rows. x is [n][w.cols] of w.dtype; y is
  // [n][ldy] of y_type (F32, or w.dtype), ldy >= w.rows (0: w.rows). Enqueued on `stream`.
  void run(const DeviceMatrix& w, const void* x, uint32_t n, void* y, DType y_type,
           cudaStream_t stream, uint32_t ldy = 0);

  // out [n][ff] = act(x W_gate^T) * (x W_up^T) for w = [2 ff][cols] (gate rows, then up rows),
  // out in x's type. `scratch` ([n][2 ff] of that type) holds the product when the activation
  // runs as its own kernel (wide products, adapters in the way, or where that measured faster).
  void run_gated(const DeviceMatrix& w, const void* x, uint32_t n, void* out, FfnActivation act,
                 void* scratch, cudaStream_t stream);

  void set_skinny(Skinny policy) { skinny_ = policy; }
  SkinnyStats skinny_stats() const;

 private:
  struct Plan;
  // (rows, cols, n, ldy, weight type, output type, alignments of w, x, y)
  using Key = std::tuple<uint32_t, uint32_t, uint32_t, uint32_t, int, int, int, int, int>;

  const Plan& plan(const Key& key);
  void run_cublas(const Key& key, const DeviceMatrix& w, const void* x, void* y,
                  cudaStream_t stream);
  // Whether the own GEMV runs this skinny shape: decided (timed) on its first eager call.
  bool own_gemv(const Key& key, const DeviceMatrix& w, const void* x, uint32_t n, void* y,
                DType y_type, uint32_t ldy, cudaStream_t stream);
  // Times `first` and `second` on `stream` (cold L2, interleaved, medians of five): whether
  // the second was at least 5 % faster. Synchronises the stream; never inside a capture.
  bool second_is_faster(cudaStream_t stream, const std::function<void()>& first,
                        const std::function<void()>& second);
  static bool capturing(cudaStream_t stream);

  cublasLtHandle_t handle_ = nullptr;
  DeviceBuffer workspace_;
  std::map<Key, std::unique_ptr<Plan>> plans_;
  Skinny skinny_ = Skinny::Timed;
  std::map<Key, bool> own_;    // decided skinny shapes: true = the own GEMV
  std::map<Key, bool> fused_;  // decided gated shapes (activation in the key's y type slot)
};

}  // namespace pith::cuda
