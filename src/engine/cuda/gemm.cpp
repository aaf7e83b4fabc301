// cuBLASLt GEMM wrapper. See gemm.h.
//
// cuBLASLt is column-major. A row-major W [rows][cols] is the column-major [cols x rows] matrix
// with leading dimension cols, so y^T (column-major [rows x n], i.e. row-major y [n][rows]) =
// op_T(W_cm) * x_cm, where x_cm is x's row-major [n][cols] seen as column-major [cols x n]:
// the "TN" product, no copies.
#include "engine/cuda/gemm.h"

#include <algorithm>
#include <bit>
#include <vector>

#include "common/error.h"
#include "engine/cuda/cuda_check.h"
#include "engine/cuda/kernels.h"

namespace pith::cuda {

namespace {

cudaDataType_t cuda_type(DType t) {
  return t == DType::F32 ? CUDA_R_32F : CUDA_R_16BF;
}

// Largest power-of-two alignment (<= 16 bytes) of a pointer: cuBLASLt picks vectorised kernels
// only for pointers that allow them, and must be told when they do not.
int alignment(const void* p) {
  const auto a = reinterpret_cast<uintptr_t>(p);
  return a == 0 ? 16 : static_cast<int>(std::min<uintptr_t>(16, a & (~a + 1)));
}

}  // namespace

struct Gemm::Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulAlgo_t algo{};

  ~Plan() {
    if (d) cublasLtMatrixLayoutDestroy(d);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (desc) cublasLtMatmulDescDestroy(desc);
  }
};

Gemm::Gemm(size_t workspace_bytes) {
  PITH_CUBLAS_CHECK(cublasLtCreate(&handle_));
  workspace_.reserve(workspace_bytes);
}

Gemm::~Gemm() {
  plans_.clear();
  if (handle_) cublasLtDestroy(handle_);
}

const Gemm::Plan& Gemm::plan(const Key& key) {
  auto it = plans_.find(key);
  if (it != plans_.end()) return *it->second;
  // Distinct batch sizes are bounded in practice; drop the cache rather than grow forever.
  if (plans_.size() >= 4096) plans_.clear();

  const auto [rows, cols, n, ldy, w_type, y_type, align_w, align_x, align_y] = key;
  auto p = std::make_unique<Plan>();
  const cudaDataType_t in = cuda_type(static_cast<DType>(w_type));
  const cudaDataType_t out = cuda_type(static_cast<DType>(y_type));
  PITH_CUBLAS_CHECK(cublasLtMatmulDescCreate(&p->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t op_t = CUBLAS_OP_T, op_n = CUBLAS_OP_N;
  PITH_CUBLAS_CHECK(
      cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_t, sizeof(op_t)));
  PITH_CUBLAS_CHECK(
      cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_n, sizeof(op_n)));
  PITH_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p->a, in, cols, rows, cols));
  PITH_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p->b, in, cols, n, cols));
  PITH_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p->d, out, rows, n, ldy));

  cublasLtMatmulPreference_t pref = nullptr;
  PITH_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  const uint64_t ws = workspace_.bytes();
  const uint32_t aw = align_w, ax = align_x, ay = align_y;
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  cublasStatus_t status = cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws));
  if (status == CUBLAS_STATUS_SUCCESS)
    status = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
                                                  &aw, sizeof(aw));
  if (status == CUBLAS_STATUS_SUCCESS)
    status = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                                                  &ax, sizeof(ax));
  if (status == CUBLAS_STATUS_SUCCESS)
    status = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
                                                  &ay, sizeof(ay));
  if (status == CUBLAS_STATUS_SUCCESS)
    status = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES,
                                                  &ay, sizeof(ay));
  if (status == CUBLAS_STATUS_SUCCESS)
    status = cublasLtMatmulAlgoGetHeuristic(handle_, p->desc, p->a, p->b, p->d, p->d, pref, 1,
                                            &result, &found);
  cublasLtMatmulPreferenceDestroy(pref);
  PITH_CUBLAS_CHECK(status);
  if (found == 0)
    throw std::runtime_error(fmt::format(
        "cuBLASLt has no algorithm for a [{}][{}] x [{}][{}] GEMM ({} -> {})", n, cols, rows, cols,
        w_type == int(DType::F32) ? "f32" : "bf16", y_type == int(DType::F32) ? "f32" : "bf16"));
  p->algo = result.algo;
  return *plans_.emplace(key, std::move(p)).first->second;
}

void Gemm::run_cublas(const Key& key, const DeviceMatrix& w, const void* x, void* y,
                      cudaStream_t stream) {
  const Plan& p = plan(key);
  const float alpha = 1.0f, beta = 0.0f;
  PITH_CUBLAS_CHECK(cublasLtMatmul(handle_, p.desc, &alpha, w.data, p.a, x, p.b, &beta, y, p.d, y,
                                   p.d, &p.algo, workspace_.get(), workspace_.bytes(), stream));
}

void Gemm::run(const DeviceMatrix& w, const void* x, uint32_t n, void* y, DType y_type,
               cudaStream_t stream, uint32_t ldy) {
  if (n == 0) return;
  if (ldy == 0) ldy = w.rows;
  PITH_CHECK(ldy >= w.rows);
  PITH_CHECK(y_type == DType::F32 || y_type == w.dtype);
  const Key key{w.rows,       w.cols,      n, ldy, int(w.dtype), int(y_type), alignment(w.data),
                alignment(x), alignment(y)};
  const bool big = size_t{w.rows} * w.cols * elem_bytes(w.dtype) >= kTimedMinBytes;
  if (w.dtype == DType::BF16 && skinny_ != Skinny::Cublas && gemv_bf16_fits(n, w.cols, w.data, x) &&
      (skinny_ == Skinny::Own || (big && own_gemv(key, w, x, n, y, y_type, ldy, stream)))) {
    gemv_bf16(w.data, w.rows, w.cols, x, n, y, y_type, ldy, stream);
    return;
  }
  run_cublas(key, w, x, y, stream);
}

bool Gemm::capturing(cudaStream_t stream) {
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  PITH_CUDA_CHECK(cudaStreamIsCapturing(stream, &capture));
  return capture != cudaStreamCaptureStatusNone;
}

bool Gemm::own_gemv(const Key& key, const DeviceMatrix& w, const void* x, uint32_t n, void* y,
                    DType y_type, uint32_t ldy, cudaStream_t stream) {
  auto it = own_.find(key);
  if (it != own_.end()) return it->second;
  // Inside a graph capture nothing may synchronise: cuBLASLt this time, timed on an eager call.
  if (capturing(stream)) return false;
  const bool own = second_is_faster(
      stream, [&] { run_cublas(key, w, x, y, stream); },
      [&] { gemv_bf16(w.data, w.rows, w.cols, x, n, y, y_type, ldy, stream); });
  own_.emplace(key, own);
  return own;
}

void Gemm::run_gated(const DeviceMatrix& w, const void* x, uint32_t n, void* out, FfnActivation act,
                     void* scratch, cudaStream_t stream) {
  if (n == 0) return;
  PITH_CHECK(w.rows % 2 == 0);
  const uint32_t ff = w.rows / 2;
  const size_t e = elem_bytes(w.dtype);
  auto unfused = [&] {
    run(w, x, n, scratch, w.dtype, stream);
    gated_activation(scratch, static_cast<char*>(scratch) + size_t{ff} * e, n, ff, w.rows, out,
                     w.dtype, act, stream);
  };
  auto fused = [&] { gemv_gated_bf16(w.data, ff, w.cols, x, n, out, w.dtype, act, stream); };
  const bool big = size_t{w.rows} * w.cols * e >= kTimedMinBytes;
  if (w.dtype != DType::BF16 || skinny_ == Skinny::Cublas ||
      !gemv_bf16_fits(n, w.cols, w.data, x) || (skinny_ == Skinny::Timed && !big))
    return unfused();
  if (skinny_ == Skinny::Own) return fused();
  const Key key{w.rows,       w.cols,        n, w.rows, int(w.dtype), int(act), alignment(w.data),
                alignment(x), alignment(out)};
  auto it = fused_.find(key);
  if (it == fused_.end()) {
    if (capturing(stream)) return unfused();
    unfused();  // the product's own choice first, so the comparison is against the better one
    it = fused_.emplace(key, second_is_faster(stream, unfused, fused)).first;
  }
  if (it->second)
    fused();
  else
    unfused();
}

bool Gemm::second_is_faster(cudaStream_t stream, const std::function<void()>& first,
                            const std::function<void()>& second) {
  // A buffer twice the L2's size, written before each timed run, evicts the weights: a decode
  // step reads every matrix from memory once. Without room for it the runs are timed warm.
  int device = 0, l2 = 0;
  PITH_CUDA_CHECK(cudaGetDevice(&device));
  PITH_CUDA_CHECK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, device));
  DeviceBuffer flush;
  try {
    flush.reserve(std::max<size_t>(2 * size_t(l2), size_t{1} << 20));
  } catch (const std::exception&) {
    cudaGetLastError();  // the failed cudaMalloc's error, which a launch check would report
    flush.release();
  }
  Event start(true), end(true);
  std::vector<float> t_first, t_second;
  constexpr int kReps = 5;
  for (int rep = 0; rep <= kReps; ++rep) {  // rep 0 warms both up (plans, module loads)
    for (int c = 0; c < 2; ++c) {
      const bool second_now = (c + rep) % 2 == 1;  // alternate which runs first
      if (flush.get()) PITH_CUDA_CHECK(cudaMemsetAsync(flush.get(), rep, flush.bytes(), stream));
      start.record(stream);
      (second_now ? second : first)();
      end.record(stream);
      end.synchronize();
      if (rep > 0) (second_now ? t_second : t_first).push_back(end.elapsed_since(start));
    }
  }
  std::sort(t_first.begin(), t_first.end());
  std::sort(t_second.begin(), t_second.end());
  return t_second[kReps / 2] < 0.95f * t_first[kReps / 2];
}

Gemm::SkinnyStats Gemm::skinny_stats() const {
  SkinnyStats s;
  for (const auto& [key, own] : own_) ++(own ? s.own : s.cublas);
  for (const auto& [key, fused] : fused_) ++(fused ? s.fused : s.unfused);
  return s;
}

}  // namespace pith::cuda
