// The CUDA host simulation's runtime and cuBLASLt (src/engine/cuda/sim) against the semantics
// the backend relies on: queued work runs only when waited for, pageable sources are staged,
// copies and kernel arguments are checked against device memory, a synchronising call breaks a
// capture, graphs replay, cuBLASLt's products and alignment rules. If these were wrong, the GPU
// tests run on the simulation would prove nothing.
#include <cublasLt.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "common/fp16.h"
#include "engine/cuda/sim/launch.h"

namespace {

using pith::cuda::sim::launch;

void fill_kernel(float* out, float v) {
  out[blockIdx.x * blockDim.x + threadIdx.x] = v;
}

struct Sim : ::testing::Test {
  void SetUp() override {
    ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&dev, 64 * sizeof(float)), cudaSuccess);
    ASSERT_EQ(cudaMallocHost(&pinned, 64 * sizeof(float)), cudaSuccess);
  }
  void TearDown() override {
    cudaFree(dev);
    cudaFreeHost(pinned);
    cudaStreamDestroy(stream);
    cudaGetLastError();
  }
  cudaStream_t stream = nullptr;
  float* dev = nullptr;
  float* pinned = nullptr;
};

TEST_F(Sim, NewDeviceMemoryReadsAsNaN) {
  std::vector<float> host(64);
  ASSERT_EQ(cudaMemcpy(host.data(), dev, 64 * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
  for (float v : host) EXPECT_TRUE(std::isnan(v));
}

TEST_F(Sim, QueuedWorkRunsOnlyWhenWaitedFor) {
  pinned[0] = 7;
  launch(dim3(2), dim3(32), stream, [](auto... a) { fill_kernel(a...); })(dev, 3.0f);
  ASSERT_EQ(cudaMemcpyAsync(pinned, dev, 64 * sizeof(float), cudaMemcpyDeviceToHost, stream),
            cudaSuccess);
  EXPECT_EQ(pinned[0], 7);  // not waited for yet
  cudaEvent_t done;
  ASSERT_EQ(cudaEventCreateWithFlags(&done, cudaEventDisableTiming), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(done, stream), cudaSuccess);
  ASSERT_EQ(cudaEventSynchronize(done), cudaSuccess);
  EXPECT_EQ(pinned[0], 3);
  EXPECT_EQ(pinned[63], 3);
  cudaEventDestroy(done);
}

TEST_F(Sim, PageableSourcesAreStagedAndPageableDestinationsWait) {
  std::vector<float> src(64, 1.0f), dst(64, 0.0f);
  ASSERT_EQ(cudaMemcpyAsync(dev, src.data(), 64 * sizeof(float), cudaMemcpyHostToDevice, stream),
            cudaSuccess);
  src.assign(64, 2.0f);  // allowed: the runtime staged the old contents
  ASSERT_EQ(cudaMemcpyAsync(dst.data(), dev, 64 * sizeof(float), cudaMemcpyDeviceToHost, stream),
            cudaSuccess);
  EXPECT_EQ(dst[5], 1.0f);  // returned after the copy into pageable memory finished
}

TEST_F(Sim, CopiesAndKernelArgumentsAreCheckedAgainstDeviceMemory) {
  std::vector<float> host(65);
  EXPECT_EQ(cudaMemcpyAsync(host.data(), dev, 65 * sizeof(float), cudaMemcpyDeviceToHost, stream),
            cudaErrorInvalidValue);  // one past the allocation
  EXPECT_EQ(cudaMemcpyAsync(dev, dev, 4, cudaMemcpyHostToDevice, stream), cudaErrorInvalidValue);
  cudaGetLastError();
  launch(dim3(1), dim3(32), stream, [](auto... a) { fill_kernel(a...); })(host.data(), 1.0f);
  EXPECT_EQ(cudaGetLastError(), cudaErrorIllegalAddress);
  launch(dim3(0), dim3(32), stream, [](auto... a) { fill_kernel(a...); })(dev, 1.0f);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidConfiguration);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

TEST_F(Sim, ASynchronisingCallBreaksACaptureAndGraphsReplay) {
  const auto before = pith::cuda::sim::stats();
  ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(stream), cudaErrorStreamCaptureUnsupported);
  cudaGraph_t graph = nullptr;
  EXPECT_EQ(cudaStreamEndCapture(stream, &graph), cudaErrorStreamCaptureInvalidated);
  EXPECT_EQ(graph, nullptr);
  EXPECT_EQ(pith::cuda::sim::stats().invalidated_captures, before.invalidated_captures + 1);
  cudaGetLastError();

  float scale = 5.0f;
  ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  launch(dim3(2), dim3(32), stream, [](auto... a) { fill_kernel(a...); })(dev, scale);
  ASSERT_EQ(cudaMemcpyAsync(pinned, dev, 64 * sizeof(float), cudaMemcpyDeviceToHost, stream),
            cudaSuccess);
  ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
  EXPECT_EQ(pith::cuda::sim::stats().captures, before.captures + 1);
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  scale = 9.0f;  // kernel arguments were copied at capture
  for (int i = 0; i < 2; ++i) {
    pinned[10] = 0;
    ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    EXPECT_EQ(pinned[10], 5.0f);
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
}

TEST_F(Sim, TimingEventsAreNotReadyUntilWaitedFor) {
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  cudaEventRecord(a, stream);
  cudaEventRecord(b, stream);
  float ms = -1;
  EXPECT_EQ(cudaEventElapsedTime(&ms, a, b), cudaErrorNotReady);
  ASSERT_EQ(cudaEventSynchronize(b), cudaSuccess);
  EXPECT_EQ(cudaEventElapsedTime(&ms, a, b), cudaSuccess);
  EXPECT_GE(ms, 0.0f);
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  cudaGetLastError();
}

// y = x W^T as gemm.cpp asks for it (row-major W [rows][cols], the "TN" product), BF16 in, F32
// out; and a pointer less aligned than the preference promised is refused.
TEST_F(Sim, CublasLtProductAndAlignment) {
  const uint32_t rows = 3, cols = 5, n = 2;
  std::vector<uint16_t> w(rows * cols), x(n * cols);
  for (size_t i = 0; i < w.size(); ++i) w[i] = pith::f32_to_bf16(0.25f * float(i % 7) - 0.5f);
  for (size_t i = 0; i < x.size(); ++i) x[i] = pith::f32_to_bf16(float(i) - 4.0f);
  void *dw, *dx, *dy;
  ASSERT_EQ(cudaMalloc(&dw, w.size() * 2 + 2), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&dx, x.size() * 2), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&dy, n * rows * 4), cudaSuccess);
  cudaMemcpy(dw, w.data(), w.size() * 2, cudaMemcpyHostToDevice);
  cudaMemcpy(dx, x.data(), x.size() * 2, cudaMemcpyHostToDevice);
  cublasLtHandle_t h;
  cublasLtMatmulDesc_t desc;
  cublasLtMatrixLayout_t la, lb, ld;
  cublasLtMatmulPreference_t pref;
  cublasLtCreate(&h);
  cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F);
  const cublasOperation_t t = CUBLAS_OP_T;
  cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &t, sizeof t);
  cublasLtMatrixLayoutCreate(&la, CUDA_R_16BF, cols, rows, cols);
  cublasLtMatrixLayoutCreate(&lb, CUDA_R_16BF, cols, n, cols);
  cublasLtMatrixLayoutCreate(&ld, CUDA_R_32F, rows, n, rows);
  cublasLtMatmulPreferenceCreate(&pref);
  cublasLtMatmulHeuristicResult_t res;
  int found = 0;
  ASSERT_EQ(cublasLtMatmulAlgoGetHeuristic(h, desc, la, lb, ld, ld, pref, 1, &res, &found),
            CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(found, 1);
  const float one = 1, zero = 0;
  ASSERT_EQ(cublasLtMatmul(h, desc, &one, dw, la, dx, lb, &zero, dy, ld, dy, ld, &res.algo, nullptr,
                           0, stream),
            CUBLAS_STATUS_SUCCESS);
  std::vector<float> y(n * rows);
  ASSERT_EQ(cudaMemcpy(y.data(), dy, y.size() * 4, cudaMemcpyDeviceToHost), cudaSuccess);
  for (uint32_t r = 0; r < n; ++r)
    for (uint32_t o = 0; o < rows; ++o) {
      float ref = 0;
      for (uint32_t i = 0; i < cols; ++i)
        ref += pith::bf16_to_f32(w[o * cols + i]) * pith::bf16_to_f32(x[r * cols + i]);
      EXPECT_FLOAT_EQ(y[r * rows + o], ref) << r << "," << o;
    }
  // The default preference promises 256-byte alignment; dw + 2 bytes breaks it.
  EXPECT_EQ(cublasLtMatmul(h, desc, &one, static_cast<char*>(dw) + 2, la, dx, lb, &zero, dy, ld, dy,
                           ld, &res.algo, nullptr, 0, stream),
            CUBLAS_STATUS_INVALID_VALUE);
  cublasLtMatmulPreferenceDestroy(pref);
  cublasLtMatrixLayoutDestroy(la);
  cublasLtMatrixLayoutDestroy(lb);
  cublasLtMatrixLayoutDestroy(ld);
  cublasLtMatmulDescDestroy(desc);
  cublasLtDestroy(h);
  cudaFree(dw);
  cudaFree(dx);
  cudaFree(dy);
}

}  // namespace
