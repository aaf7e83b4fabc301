// CUDA host simulation: cuBLASLt's matmul (include/cublasLt.h) on the CPU. D = alpha op(A)
// op(B) + beta C over column-major layouts, F32 accumulation, the result rounded to D's type.
// The heuristic returns an algorithm only for what cuBLASLt runs (compute 32F, F32 or BF16
// inputs of one type, D of the inputs' type or F32, shapes that agree), and remembers the
// preference's minimum alignments, which the matmul then checks against its pointers: a
// library kernel picked for aligned buffers faults on others.
#include <cublasLt.h>

#include <cstring>
#include <memory>
#include <vector>

#include "common/fp16.h"
#include "engine/cuda/sim/launch.h"

struct cublasLtContext {};
struct cublasLtMatmulDescOpaque {
  cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
  cudaDataType_t scale = CUDA_R_32F;
  cublasOperation_t trans_a = CUBLAS_OP_N, trans_b = CUBLAS_OP_N;
};
struct cublasLtMatrixLayoutOpaque {
  cudaDataType_t type = CUDA_R_32F;
  uint64_t rows = 0, cols = 0;
  int64_t ld = 0;
};
struct cublasLtMatmulPreferenceOpaque {
  uint64_t workspace = 0;
  uint32_t align[4] = {256, 256, 256, 256};  // A, B, C, D: cuBLASLt's defaults
};

namespace {

size_t elem(cudaDataType_t t) {
  return t == CUDA_R_32F ? 4 : 2;
}

// F32 or BF16, the types supported() admits.
float load(const void* base, cudaDataType_t t, size_t i) {
  if (t == CUDA_R_32F) return static_cast<const float*>(base)[i];
  return pith::bf16_to_f32(static_cast<const uint16_t*>(base)[i]);
}

void store(void* base, cudaDataType_t t, size_t i, float v) {
  if (t == CUDA_R_32F)
    static_cast<float*>(base)[i] = v;
  else
    static_cast<uint16_t*>(base)[i] = pith::f32_to_bf16(v);
}

// op(M)'s (rows, cols) for a stored layout.
std::pair<uint64_t, uint64_t> op_shape(const cublasLtMatrixLayoutOpaque& l, cublasOperation_t op) {
  return op == CUBLAS_OP_T ? std::pair{l.cols, l.rows} : std::pair{l.rows, l.cols};
}

bool layout_ok(const cublasLtMatrixLayoutOpaque& l) {
  return l.ld >= static_cast<int64_t>(std::max<uint64_t>(l.rows, 1));
}

bool supported(const cublasLtMatmulDescOpaque& desc, const cublasLtMatrixLayoutOpaque& a,
               const cublasLtMatrixLayoutOpaque& b, const cublasLtMatrixLayoutOpaque& c,
               const cublasLtMatrixLayoutOpaque& d) {
  if (desc.compute != CUBLAS_COMPUTE_32F || desc.scale != CUDA_R_32F) return false;
  if (a.type != b.type || (a.type != CUDA_R_32F && a.type != CUDA_R_16BF)) return false;
  if (d.type != a.type && d.type != CUDA_R_32F) return false;
  if (c.type != d.type || c.rows != d.rows || c.cols != d.cols) return false;
  if (!layout_ok(a) || !layout_ok(b) || !layout_ok(c) || !layout_ok(d)) return false;
  const auto [m, k] = op_shape(a, desc.trans_a);
  const auto [k2, n] = op_shape(b, desc.trans_b);
  return k == k2 && d.rows == m && d.cols == n;
}

size_t span_bytes(const cublasLtMatrixLayoutOpaque& l) {
  return l.cols == 0 ? 0 : ((l.cols - 1) * l.ld + l.rows) * elem(l.type);
}

bool aligned(const void* p, uint64_t alignment) {
  return alignment == 0 || reinterpret_cast<uintptr_t>(p) % alignment == 0;
}

}  // namespace

cublasStatus_t cublasLtCreate(cublasLtHandle_t* handle) {
  *handle = new cublasLtContext;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtDestroy(cublasLtHandle_t handle) {
  delete handle;
  return CUBLAS_STATUS_SUCCESS;
}

const char* cublasLtGetStatusName(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_SUCCESS:
      return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED:
      return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED:
      return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE:
      return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_EXECUTION_FAILED:
      return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_NOT_SUPPORTED:
      return "CUBLAS_STATUS_NOT_SUPPORTED";
  }
  return "CUBLAS_STATUS_UNKNOWN";
}

const char* cublasLtGetStatusString(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_SUCCESS:
      return "success";
    case CUBLAS_STATUS_NOT_INITIALIZED:
      return "the library was not initialized";
    case CUBLAS_STATUS_ALLOC_FAILED:
      return "the resource allocation failed";
    case CUBLAS_STATUS_INVALID_VALUE:
      return "an invalid numeric value was used as an argument";
    case CUBLAS_STATUS_EXECUTION_FAILED:
      return "the GPU program failed to execute";
    case CUBLAS_STATUS_NOT_SUPPORTED:
      return "the functionality requested is not supported";
  }
  return "unknown error";
}

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t* desc, cublasComputeType_t compute,
                                        cudaDataType_t scale_type) {
  *desc = new cublasLtMatmulDescOpaque{compute, scale_type};
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t desc) {
  delete desc;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t desc,
                                              cublasLtMatmulDescAttributes_t attr, const void* buf,
                                              size_t size) {
  if (size != sizeof(cublasOperation_t)) return CUBLAS_STATUS_INVALID_VALUE;
  cublasOperation_t op;
  std::memcpy(&op, buf, size);
  if (op != CUBLAS_OP_N && op != CUBLAS_OP_T) return CUBLAS_STATUS_INVALID_VALUE;
  if (attr == CUBLASLT_MATMUL_DESC_TRANSA)
    desc->trans_a = op;
  else if (attr == CUBLASLT_MATMUL_DESC_TRANSB)
    desc->trans_b = op;
  else
    return CUBLAS_STATUS_INVALID_VALUE;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t* layout, cudaDataType_t type,
                                          uint64_t rows, uint64_t cols, int64_t ld) {
  *layout = new cublasLtMatrixLayoutOpaque{type, rows, cols, ld};
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t layout) {
  delete layout;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t* pref) {
  *pref = new cublasLtMatmulPreferenceOpaque;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref) {
  delete pref;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t pref,
                                                    cublasLtMatmulPreferenceAttributes_t attr,
                                                    const void* buf, size_t size) {
  if (attr == CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES) {
    if (size != sizeof(uint64_t)) return CUBLAS_STATUS_INVALID_VALUE;
    std::memcpy(&pref->workspace, buf, size);
    return CUBLAS_STATUS_SUCCESS;
  }
  const int slot = static_cast<int>(attr) - CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES;
  if (slot < 0 || slot > 3 || size != sizeof(uint32_t)) return CUBLAS_STATUS_INVALID_VALUE;
  std::memcpy(&pref->align[slot], buf, size);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc,
                                              cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b,
                                              cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t d,
                                              cublasLtMatmulPreference_t pref, int requested,
                                              cublasLtMatmulHeuristicResult_t* results,
                                              int* found) {
  if (!handle || !desc || !a || !b || !c || !d || !pref || requested < 1)
    return CUBLAS_STATUS_INVALID_VALUE;
  *found = 0;
  if (!supported(*desc, *a, *b, *c, *d)) return CUBLAS_STATUS_NOT_SUPPORTED;
  results[0] = {};
  for (int i = 0; i < 4; ++i) results[0].algo.data[i] = pref->align[i];
  results[0].state = CUBLAS_STATUS_SUCCESS;
  results[0].wavesCount = 1;
  *found = 1;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmul(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, const void* alpha,
                              const void* A, cublasLtMatrixLayout_t a, const void* B,
                              cublasLtMatrixLayout_t b, const void* beta, const void* C,
                              cublasLtMatrixLayout_t c, void* D, cublasLtMatrixLayout_t d,
                              const cublasLtMatmulAlgo_t* algo, void*, size_t,
                              cudaStream_t stream) {
  if (!handle || !desc || !a || !b || !c || !d || !algo) return CUBLAS_STATUS_INVALID_VALUE;
  if (!supported(*desc, *a, *b, *c, *d)) return CUBLAS_STATUS_NOT_SUPPORTED;
  using pith::cuda::sim::is_device;
  if (!is_device(A, span_bytes(*a)) || !is_device(B, span_bytes(*b)) ||
      !is_device(C, span_bytes(*c)) || !is_device(D, span_bytes(*d)))
    return CUBLAS_STATUS_INVALID_VALUE;
  if (!aligned(A, algo->data[0]) || !aligned(B, algo->data[1]) || !aligned(C, algo->data[2]) ||
      !aligned(D, algo->data[3]))
    return CUBLAS_STATUS_INVALID_VALUE;
  // Host pointer mode: the scalars are read now, the matrices when the stream gets there.
  const float al = *static_cast<const float*>(alpha), be = *static_cast<const float*>(beta);
  const auto la = *a, lb = *b, lc = *c, ld = *d;
  const auto ta = desc->trans_a, tb = desc->trans_b;
  pith::cuda::sim::enqueue(stream, [=] {
    const auto [m, k] = op_shape(la, ta);
    const uint64_t n = ld.cols;
    // op(A) as row-major [m][k] floats, then one column of op(B) at a time.
    std::vector<float> opa(m * k), col(k);
    for (uint64_t i = 0; i < m; ++i)
      for (uint64_t l = 0; l < k; ++l)
        opa[i * k + l] =
            ta == CUBLAS_OP_T ? load(A, la.type, i * la.ld + l) : load(A, la.type, l * la.ld + i);
    for (uint64_t j = 0; j < n; ++j) {
      for (uint64_t l = 0; l < k; ++l)
        col[l] =
            tb == CUBLAS_OP_T ? load(B, lb.type, l * lb.ld + j) : load(B, lb.type, j * lb.ld + l);
      for (uint64_t i = 0; i < m; ++i) {
        // Eight partial sums, as a GPU's split accumulators: the compiler vectorises the loop.
        float part[8] = {};
        const float* row = opa.data() + i * k;
        uint64_t l = 0;
        for (; l + 8 <= k; l += 8)
          for (int u = 0; u < 8; ++u) part[u] += row[l + u] * col[l + u];
        float acc = 0;
        for (; l < k; ++l) acc += row[l] * col[l];
        for (int u = 0; u < 8; ++u) acc += part[u];
        float v = al * acc;
        if (be != 0) v += be * load(C, lc.type, j * lc.ld + i);
        store(D, ld.type, j * ld.ld + i, v);
      }
    }
  });
  return CUBLAS_STATUS_SUCCESS;
}
