// Launchers of the KV pool kernels (kv_body.h): append rows at (page, slot), copy slots.
// 16-byte vectors when kv_dim and the pointers allow (every real model: kv_dim = heads * 64+).
#include "engine/cuda/kernels.h"
#include "engine/cuda/kernels/kv_body.h"
#include "engine/cuda/kernels/launch.h"
#include "engine/cuda/kernels/launch_check.h"

namespace pith::cuda {
namespace {

template <uint32_t N, class T>
__global__ void __launch_bounds__(kern::kKvThreads)
    kv_append_kernel(const T* k, const T* v, uint32_t n, const uint32_t* pages,
                     const uint32_t* slots, uint32_t layer, kern::KvGeometry g, T* pool) {
  PITH_EACH_THREAD(t)
  kern::kv_append_body<N>(blockIdx.x, gridDim.x, t, k, v, n, pages, slots, layer, g, pool);
}

template <uint32_t N, class T>
__global__ void __launch_bounds__(kern::kKvThreads)
    kv_copy_kernel(uint32_t src_page, uint32_t dst_page, uint32_t src_slot, uint32_t dst_slot,
                   uint32_t n, kern::KvGeometry g, T* pool) {
  PITH_EACH_THREAD(t)
  kern::kv_copy_body<N>(blockIdx.x, gridDim.x, t, src_page, dst_page, src_slot, dst_slot, n, g,
                        pool);
}

uint32_t blocks_for(size_t steps) {
  return kern::elementwise_blocks(steps, kern::kKvThreads);
}

template <class T>
void kv_append_typed(const T* k, const T* v, uint32_t n, const uint32_t* pages,
                     const uint32_t* slots, uint32_t layer, kern::KvGeometry g, T* pool,
                     cudaStream_t stream) {
  constexpr uint32_t V = kern::kVec<T>;
  size_t total = size_t{n} * g.kv_dim;
  // Every pool offset is page * page_elems + base + a multiple of kv_dim, so an aligned pool and
  // kv_dim, page_elems and base all multiples of V suffice.
  if (kern::vector_ok<V>(k, g.kv_dim, g.kv_dim) && kern::vector_ok<V>(v, g.kv_dim, g.kv_dim) &&
      kern::vector_ok<V>(pool, g.kv_dim, g.page_elems) && g.base % V == 0)
    kern::launch(blocks_for(total / V), kern::kKvThreads, stream, PITH_KERNEL(kv_append_kernel<V>))(
        k, v, n, pages, slots, layer, g, pool);
  else
    kern::launch(blocks_for(total), kern::kKvThreads, stream, PITH_KERNEL(kv_append_kernel<1>))(
        k, v, n, pages, slots, layer, g, pool);
}

template <class T>
void kv_copy_typed(uint32_t src_page, uint32_t dst_page, uint32_t src_slot, uint32_t dst_slot,
                   uint32_t n, kern::KvGeometry g, T* pool, cudaStream_t stream) {
  constexpr uint32_t V = kern::kVec<T>;
  size_t columns = size_t{g.n_layers} * 2 * g.kv_dim;
  if (kern::vector_ok<V>(pool, g.kv_dim, g.page_elems) && g.base % V == 0)
    kern::launch(blocks_for(columns / V), kern::kKvThreads, stream, PITH_KERNEL(kv_copy_kernel<V>))(
        src_page, dst_page, src_slot, dst_slot, n, g, pool);
  else
    kern::launch(blocks_for(columns), kern::kKvThreads, stream, PITH_KERNEL(kv_copy_kernel<1>))(
        src_page, dst_page, src_slot, dst_slot, n, g, pool);
}

}  // namespace

kern::KvGeometry kv_run_geometry(const KvPoolLayout& layout, uint32_t first, uint32_t count) {
  kern::KvGeometry g;
  g.page_elems = layout.page_elems();
  g.kv_dim = static_cast<uint32_t>(layout.kv_dim_of(first));
  g.block_elems = size_t{layout.page_size} * g.kv_dim;
  g.n_layers = count;
  g.base = layout.layer_offset(first);
  return g;
}

void kv_append(const void* k, const void* v, uint32_t n, const uint32_t* pages,
               const uint32_t* slots, uint32_t layer, const KvPoolLayout& layout, void* pool,
               cudaStream_t stream) {
  require(layer < layout.n_layers, "kv_append", "layer out of range");
  kern::KvGeometry g = kv_run_geometry(layout, layer, 1);
  if (size_t{n} * g.kv_dim == 0) return;
  if (layout.dtype == DType::F32)
    kv_append_typed(static_cast<const float*>(k), static_cast<const float*>(v), n, pages, slots, 0,
                    g, static_cast<float*>(pool), stream);
  else
    kv_append_typed(static_cast<const kern::Bf16*>(k), static_cast<const kern::Bf16*>(v), n, pages,
                    slots, 0, g, static_cast<kern::Bf16*>(pool), stream);
  check_launch("kv_append");
}

void kv_copy(uint32_t src_page, uint32_t dst_page, uint32_t src_slot, uint32_t dst_slot, uint32_t n,
             const KvPoolLayout& layout, void* pool, cudaStream_t stream) {
  require(src_slot + size_t{n} <= layout.page_size && dst_slot + size_t{n} <= layout.page_size,
          "kv_copy", "slot range past the end of the page");
  if (n == 0 || (src_page == dst_page && src_slot == dst_slot)) return;
  // One launch per run of consecutive layers of one shape (one launch for a uniform pool).
  for (uint32_t first = 0, count = 0; first < layout.n_layers; first += count) {
    count = 1;
    while (first + count < layout.n_layers &&
           layout.kv_dim_of(first + count) == layout.kv_dim_of(first))
      ++count;
    kern::KvGeometry g = kv_run_geometry(layout, first, count);
    if (g.kv_dim == 0) continue;
    if (layout.dtype == DType::F32)
      kv_copy_typed(src_page, dst_page, src_slot, dst_slot, n, g, static_cast<float*>(pool),
                    stream);
    else
      kv_copy_typed(src_page, dst_page, src_slot, dst_slot, n, g, static_cast<kern::Bf16*>(pool),
                    stream);
  }
  check_launch("kv_copy");
}

}  // namespace pith::cuda
