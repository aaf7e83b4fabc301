// Launchers of the Gated DeltaNet kernels and the hybrid attention's query gate
// (delta_net_body.h).
#include "engine/cuda/kernels.h"
#include "engine/cuda/kernels/delta_chunked_body.h"
#include "engine/cuda/kernels/delta_net_body.h"
#include "engine/cuda/kernels/launch.h"
#include "engine/cuda/kernels/launch_check.h"

namespace pith::cuda {
namespace {

uint32_t blocks_for(size_t steps) {
  return kern::elementwise_blocks(steps, kern::kActivationThreads);
}

template <class T>
__global__ void __launch_bounds__(kern::kActivationThreads)
    conv_kernel(kern::DeltaSequences seqs, const float* weight_t, const T* x, float* out,
                uint32_t C, uint32_t K) {
  PITH_EACH_THREAD(t)
  kern::causal_conv_silu_body(blockIdx.x, gridDim.x, t, seqs, weight_t, x, out, C, K);
}

template <class T>
__global__ void __launch_bounds__(kern::kActivationThreads)
    conv_rows_kernel(kern::DeltaSequences seqs, const float* weight_t, const T* x, float* out,
                     uint32_t n_rows, uint32_t C, uint32_t K) {
  PITH_EACH_THREAD(t)
  kern::causal_conv_silu_rows_body(blockIdx.x, gridDim.x, t, seqs, weight_t, x, out, n_rows, C, K);
}

template <class T>
__global__ void __launch_bounds__(kern::kActivationThreads)
    conv_window_kernel(kern::DeltaSequences seqs, const T* x, uint32_t C, uint32_t K) {
  PITH_EACH_THREAD(t) kern::causal_conv_window_body(blockIdx.x, gridDim.x, t, seqs, x, C, K);
}

template <class T>
void conv_typed(const kern::DeltaSequences& seqs, const float* weight_t, const T* x, float* out,
                uint32_t n_rows, uint32_t C, uint32_t K, cudaStream_t stream) {
  const size_t per_sequence = size_t{seqs.n_seqs} * C;
  if (n_rows <= seqs.n_seqs) {  // a token a sequence (decode): each thread has one row anyway
    kern::launch(blocks_for(per_sequence), kern::kActivationThreads, stream,
                 PITH_KERNEL(conv_kernel))(seqs, weight_t, x, out, C, K);
    return;
  }
  kern::launch(blocks_for(size_t{n_rows} * C), kern::kActivationThreads, stream,
               PITH_KERNEL(conv_rows_kernel))(seqs, weight_t, x, out, n_rows, C, K);
  kern::launch(blocks_for(per_sequence), kern::kActivationThreads, stream,
               PITH_KERNEL(conv_window_kernel))(seqs, x, C, K);
}

__global__ void __launch_bounds__(kern::kHeadNormThreads)
    l2norm_kernel(float* mixed, uint32_t C, uint32_t heads, uint32_t dk, float eps) {
  PITH_SHARED(kern::NormShared, sh);
  kern::l2norm_heads_body(kern::DeviceBlock::current(), sh, mixed, C, heads, dk, eps);
}

template <class T>
__global__ void __launch_bounds__(kern::kActivationThreads)
    gates_kernel(const T* b, const T* a, const float* dt_bias, const float* A, size_t total,
                 uint32_t Hv, float* beta, float* g) {
  PITH_EACH_THREAD(t)
  kern::delta_gates_body(blockIdx.x, gridDim.x, t, b, a, dt_bias, A, total, Hv, beta, g);
}

template <class T>
__global__ void __launch_bounds__(kern::kDeltaThreads) delta_rule_kernel(kern::DeltaRuleParams p) {
  PITH_SHARED(kern::DeltaShared, sh);
  kern::ThreadStates<kern::DeltaThread> states;
  auto* mine = &states;  // (a pointer: nvcc misreads a reference capture here)
  kern::delta_rule_block<T>(
      p, blockIdx.x, blockIdx.y, sh,
      [&](auto&& phase) {
        PITH_EACH_THREAD(t) phase(t);
        __syncthreads();
      },
      [mine](uint32_t t) -> kern::DeltaThread& { return (*mine)(t); });
}

__global__ void __launch_bounds__(kern::kChunkThreads)
    delta_chunk_prep_kernel(kern::DeltaRuleParams p, kern::DeltaChunkScratch x) {
  PITH_SHARED(kern::DeltaPrepShared, sh);
  kern::delta_chunk_prep_block(p, x, blockIdx.x, blockIdx.y, sh, [&](auto&& phase) {
    PITH_EACH_THREAD(t) phase(t);
    __syncthreads();
  });
}

template <class T>
__global__ void __launch_bounds__(kern::kChunkThreads)
    delta_chunk_state_kernel(kern::DeltaRuleParams p, kern::DeltaChunkScratch x) {
  PITH_SHARED(kern::DeltaChunkShared, sh);
  kern::delta_chunk_state_block<T>(p, x, blockIdx.x, blockIdx.y, sh, [&](auto&& phase) {
    PITH_EACH_THREAD(t) phase(t);
    __syncthreads();
  });
}

template <class T>
__global__ void __launch_bounds__(kern::kActivationThreads)
    split_kernel(const T* src, size_t n_rows, uint32_t hd, T* q, T* gate) {
  PITH_EACH_THREAD(t)
  kern::split_query_gate_body(blockIdx.x, gridDim.x, t, src, n_rows, hd, q, gate);
}

template <class T>
__global__ void __launch_bounds__(kern::kActivationThreads)
    sigmoid_gate_kernel(T* x, const T* gate, size_t total) {
  PITH_EACH_THREAD(t) kern::sigmoid_gate_body(blockIdx.x, gridDim.x, t, x, gate, total);
}

}  // namespace

void causal_conv_silu(const kern::DeltaSequences& seqs, const float* weight_t, const void* x,
                      DType type, float* out, uint32_t n_rows, uint32_t C, uint32_t K,
                      cudaStream_t stream) {
  require(K >= 2 && K - 1 <= kern::kMaxConvHistory, "causal_conv_silu", "unsupported kernel width");
  if (size_t{seqs.n_seqs} * C == 0) return;
  if (type == DType::F32)
    conv_typed(seqs, weight_t, static_cast<const float*>(x), out, n_rows, C, K, stream);
  else
    conv_typed(seqs, weight_t, static_cast<const kern::Bf16*>(x), out, n_rows, C, K, stream);
  check_launch("causal_conv_silu");
}

void l2norm_heads(float* mixed, uint32_t n, uint32_t C, uint32_t heads, uint32_t dk, float eps,
                  cudaStream_t stream) {
  const size_t rows = size_t{n} * heads;
  if (rows == 0) return;
  require(rows <= 0x7fffffffu, "l2norm_heads", "too many rows");
  kern::launch(static_cast<uint32_t>(rows), kern::kHeadNormThreads, stream,
               PITH_KERNEL(l2norm_kernel))(mixed, C, heads, dk, eps);
  check_launch("l2norm_heads");
}

void delta_gates(const void* b, const void* a, DType type, const float* dt_bias, const float* A,
                 uint32_t n, uint32_t Hv, float* beta, float* g, cudaStream_t stream) {
  const size_t total = size_t{n} * Hv;
  if (total == 0) return;
  if (type == DType::F32)
    kern::launch(blocks_for(total), kern::kActivationThreads, stream, PITH_KERNEL(gates_kernel))(
        static_cast<const float*>(b), static_cast<const float*>(a), dt_bias, A, total, Hv, beta, g);
  else
    kern::launch(blocks_for(total), kern::kActivationThreads, stream, PITH_KERNEL(gates_kernel))(
        static_cast<const kern::Bf16*>(b), static_cast<const kern::Bf16*>(a), dt_bias, A, total, Hv,
        beta, g);
  check_launch("delta_gates");
}

void delta_rule(const kern::DeltaRuleParams& p, DType out_type, cudaStream_t stream) {
  if (p.seqs.n_seqs == 0) return;
  require(p.dk <= kern::kDeltaMaxPerLane * kern::kWarp, "delta_rule", "k_dim above 256");
  require(size_t{p.seqs.n_seqs} * p.Hv <= 0x7fffffffu, "delta_rule", "too many blocks");
  const dim3 grid(p.seqs.n_seqs * p.Hv, (p.dv + kern::kDeltaRows - 1) / kern::kDeltaRows);
  if (out_type == DType::F32)
    kern::launch(grid, kern::kDeltaThreads, stream, PITH_KERNEL(delta_rule_kernel<float>))(p);
  else
    kern::launch(grid, kern::kDeltaThreads, stream, PITH_KERNEL(delta_rule_kernel<kern::Bf16>))(p);
  check_launch("delta_rule");
}

void delta_rule_chunked(const kern::DeltaRuleParams& p, const kern::DeltaChunkScratch& scratch,
                        uint32_t max_chunks, DType out_type, cudaStream_t stream) {
  if (p.seqs.n_seqs == 0 || max_chunks == 0) return;
  require(p.dk <= kern::kChunkMaxDk, "delta_rule_chunked", "k_dim above 256");
  require(size_t{p.seqs.n_seqs} * p.Hv <= 0x7fffffffu, "delta_rule_chunked", "too many blocks");
  require(max_chunks <= 65535, "delta_rule_chunked", "too many chunks in one sequence");
  const uint32_t heads = p.seqs.n_seqs * p.Hv;
  kern::launch(dim3(heads, max_chunks), kern::kChunkThreads, stream,
               PITH_KERNEL(delta_chunk_prep_kernel))(p, scratch);
  check_launch("delta_rule_chunked (prep)");
  const dim3 grid(heads, (p.dv + kern::kChunkRows - 1) / kern::kChunkRows);
  if (out_type == DType::F32)
    kern::launch(grid, kern::kChunkThreads, stream, PITH_KERNEL(delta_chunk_state_kernel<float>))(
        p, scratch);
  else
    kern::launch(grid, kern::kChunkThreads, stream,
                 PITH_KERNEL(delta_chunk_state_kernel<kern::Bf16>))(p, scratch);
  check_launch("delta_rule_chunked");
}

void split_query_gate(const void* src, DType type, uint32_t n_rows, uint32_t hd, void* q,
                      void* gate, cudaStream_t stream) {
  const size_t total = size_t{n_rows} * hd;
  if (total == 0) return;
  if (type == DType::F32)
    kern::launch(blocks_for(total), kern::kActivationThreads, stream, PITH_KERNEL(split_kernel))(
        static_cast<const float*>(src), n_rows, hd, static_cast<float*>(q),
        static_cast<float*>(gate));
  else
    kern::launch(blocks_for(total), kern::kActivationThreads, stream, PITH_KERNEL(split_kernel))(
        static_cast<const kern::Bf16*>(src), n_rows, hd, static_cast<kern::Bf16*>(q),
        static_cast<kern::Bf16*>(gate));
  check_launch("split_query_gate");
}

void sigmoid_gate(void* x, const void* gate, DType type, size_t total, cudaStream_t stream) {
  if (total == 0) return;
  if (type == DType::F32)
    kern::launch(blocks_for(total), kern::kActivationThreads, stream,
                 PITH_KERNEL(sigmoid_gate_kernel))(static_cast<float*>(x),
                                                   static_cast<const float*>(gate), total);
  else
    kern::launch(blocks_for(total), kern::kActivationThreads, stream,
                 PITH_KERNEL(sigmoid_gate_kernel))(static_cast<kern::Bf16*>(x),
                                                   static_cast<const kern::Bf16*>(gate), total);
  check_launch("sigmoid_gate");
}

}  // namespace pith::cuda
