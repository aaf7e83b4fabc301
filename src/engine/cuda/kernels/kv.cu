// Launchers of the KV pool kernels (kv_body.h): append rows at (page, slot), copy slots.
#include "engine/cuda/kernels.h"
#include "engine/cuda/kernels/kv_body.h"
#include "engine/cuda/kernels/launch_check.h"

namespace pith::cuda {
namespace {

template <class T>
__global__ void __launch_bounds__(kern::kKvThreads)
    kv_append_kernel(const T* k, const T* v, uint32_t n, const uint32_t* pages,
                     const uint32_t* slots, uint32_t layer, kern::KvGeometry g, T* pool) {
  kern::kv_append_body(blockIdx.x, gridDim.x, threadIdx.x, k, v, n, pages, slots, layer, g, pool);
}

template <class T>
__global__ void __launch_bounds__(kern::kKvThreads)
    kv_copy_kernel(uint32_t src_page, uint32_t dst_page, uint32_t src_slot, uint32_t dst_slot,
                   uint32_t n, kern::KvGeometry g, T* pool) {
  kern::kv_copy_body(blockIdx.x, gridDim.x, threadIdx.x, src_page, dst_page, src_slot, dst_slot, n,
                     g, pool);
}

kern::KvGeometry geometry(const KvPoolLayout& layout) {
  kern::KvGeometry g;
  g.page_elems = layout.page_elems();
  g.block_elems = size_t{layout.page_size} * layout.kv_dim();
  g.kv_dim = static_cast<uint32_t>(layout.kv_dim());
  g.n_layers = layout.n_layers;
  return g;
}

}  // namespace

void kv_append(const void* k, const void* v, uint32_t n, const uint32_t* pages,
               const uint32_t* slots, uint32_t layer, const KvPoolLayout& layout, void* pool,
               cudaStream_t stream) {
  require(layer < layout.n_layers, "kv_append", "layer out of range");
  kern::KvGeometry g = geometry(layout);
  size_t total = size_t{n} * g.kv_dim;
  if (total == 0) return;
  uint32_t blocks = kern::elementwise_blocks(total, kern::kKvThreads);
  if (layout.dtype == DType::F32)
    kv_append_kernel<<<blocks, kern::kKvThreads, 0, stream>>>(
        static_cast<const float*>(k), static_cast<const float*>(v), n, pages, slots, layer, g,
        static_cast<float*>(pool));
  else
    kv_append_kernel<<<blocks, kern::kKvThreads, 0, stream>>>(
        static_cast<const kern::Bf16*>(k), static_cast<const kern::Bf16*>(v), n, pages, slots,
        layer, g, static_cast<kern::Bf16*>(pool));
  check_launch("kv_append");
}

void kv_copy(uint32_t src_page, uint32_t dst_page, uint32_t src_slot, uint32_t dst_slot, uint32_t n,
             const KvPoolLayout& layout, void* pool, cudaStream_t stream) {
  require(src_slot + size_t{n} <= layout.page_size && dst_slot + size_t{n} <= layout.page_size,
          "kv_copy", "slot range past the end of the page");
  if (n == 0 || (src_page == dst_page && src_slot == dst_slot)) return;
  kern::KvGeometry g = geometry(layout);
  size_t columns = size_t{g.n_layers} * 2 * g.kv_dim;
  if (columns == 0) return;
  uint32_t blocks = kern::elementwise_blocks(columns, kern::kKvThreads);
  if (layout.dtype == DType::F32)
    kv_copy_kernel<<<blocks, kern::kKvThreads, 0, stream>>>(src_page, dst_page, src_slot, dst_slot,
                                                            n, g, static_cast<float*>(pool));
  else
    kv_copy_kernel<<<blocks, kern::kKvThreads, 0, stream>>>(src_page, dst_page, src_slot, dst_slot,
                                                            n, g, static_cast<kern::Bf16*>(pool));
  check_launch("kv_copy");
}

}  // namespace pith::cuda
