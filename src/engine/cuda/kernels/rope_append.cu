// Launcher of the fused RoPE + KV append (rope_append_body.h).
#include "engine/cuda/kernels.h"
#include "engine/cuda/kernels/launch.h"
#include "engine/cuda/kernels/launch_check.h"
#include "engine/cuda/kernels/rope_append_body.h"

namespace pith::cuda {
namespace {

template <class T>
__global__ void __launch_bounds__(kern::kRopeThreads)
    rope_append_kernel(const T* q_src, T* q_dst, const T* k, const T* v, kern::RopeAppendArgs a,
                       T* pool) {
  PITH_EACH_THREAD(t) kern::rope_append_body(blockIdx.x, gridDim.x, t, q_src, q_dst, k, v, a, pool);
}

}  // namespace

void rope_append(const QkvRows& src, void* q_dst, DType type, uint32_t n, uint32_t n_heads,
                 uint32_t n_kv, uint32_t head_dim, uint32_t n_pairs, bool split_half,
                 const float* cos, const float* sin, const uint32_t* pages, const uint32_t* slots,
                 uint32_t layer, const KvPoolLayout& layout, void* pool, cudaStream_t stream) {
  require(2 * n_pairs <= head_dim, "rope_append", "more rotary pairs than the head has");
  require(layer < layout.n_layers, "rope_append", "layer out of range");
  require(size_t{n_kv} * head_dim == layout.kv_dim_of(layer), "rope_append",
          "K/V rows do not match the layer's pool shape");
  require(
      src.q_ld >= n_heads * head_dim && src.k_ld >= n_kv * head_dim && src.v_ld >= n_kv * head_dim,
      "rope_append", "a row stride shorter than its row");
  // In place, q is read at its stride and written packed: rows would overwrite each other.
  require(src.q != q_dst || src.q_ld == n_heads * head_dim, "rope_append",
          "q rotated in place must be packed");
  kern::RopeAppendArgs a;
  a.n = n;
  a.n_heads = n_heads;
  a.n_kv = n_kv;
  a.head_dim = head_dim;
  a.n_pairs = n_pairs;
  a.split_half = split_half;
  a.q_moves = src.q != q_dst;
  a.q_ld = src.q_ld;
  a.k_ld = src.k_ld;
  a.v_ld = src.v_ld;
  a.cos = cos;
  a.sin = sin;
  a.pages = pages;
  a.slots = slots;
  a.g = kv_run_geometry(layout, layer, 1);
  a.layer = 0;  // the run is this one layer
  if (a.items() == 0) return;
  const uint32_t blocks = kern::elementwise_blocks(a.items(), kern::kRopeThreads);
  if (type == DType::F32)
    kern::launch(blocks, kern::kRopeThreads, stream, PITH_KERNEL(rope_append_kernel))(
        static_cast<const float*>(src.q), static_cast<float*>(q_dst),
        static_cast<const float*>(src.k), static_cast<const float*>(src.v), a,
        static_cast<float*>(pool));
  else
    kern::launch(blocks, kern::kRopeThreads, stream, PITH_KERNEL(rope_append_kernel))(
        static_cast<const kern::Bf16*>(src.q), static_cast<kern::Bf16*>(q_dst),
        static_cast<const kern::Bf16*>(src.k), static_cast<const kern::Bf16*>(src.v), a,
        static_cast<kern::Bf16*>(pool));
  check_launch("rope_append");
}

}  // namespace pith::cuda
