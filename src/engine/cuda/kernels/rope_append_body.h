// Body of the fused RoPE + KV append of a layer that stores K/V: q [n][n_heads][head_dim]
// rotated in place, k [n][n_kv][head_dim] rotated on its way into the pool (the k buffer itself
// is left as it was: nothing reads it after the append), v copied into the pool, all in one
// launch where rope(q), rope(k) and kv_append took three. Items of one grid-stride loop: q's
// pairs, k's pairs, k's unrotated tail (partial rotary: dims [2 n_pairs, head_dim) in both pair
// layouts), v's elements. Rounding as the three kernels: each rotated value is stored once in
// T, which the append then copied exactly.
#pragma once

#include "engine/cuda/kernels/block.h"
#include "engine/cuda/kernels/kv_body.h"
#include "engine/cuda/kernels/rope_body.h"

namespace pith::cuda::kern {

struct RopeAppendArgs {
  uint32_t n = 0, n_heads = 0, n_kv = 0, head_dim = 0, n_pairs = 0;
  bool split_half = false;
  const float* cos = nullptr;  // [n][n_pairs]
  const float* sin = nullptr;
  const uint32_t* pages = nullptr;  // per row: the (page, slot) its K/V go to
  const uint32_t* slots = nullptr;
  uint32_t layer = 0;  // within the geometry's run of layers
  KvGeometry g;

  PITH_HD size_t q_pairs() const { return size_t{n} * n_heads * n_pairs; }
  PITH_HD size_t k_pairs() const { return size_t{n} * n_kv * n_pairs; }
  PITH_HD size_t k_tail() const { return size_t{n} * n_kv * (head_dim - 2 * n_pairs); }
  PITH_HD size_t items() const {
    return q_pairs() + k_pairs() + k_tail() + size_t{n} * n_kv * head_dim;
  }
};

template <class T>
PITH_HD void rope_append_body(uint32_t block, uint32_t n_blocks, uint32_t t, T* q, const T* k,
                              const T* v, const RopeAppendArgs& a, T* pool) {
  const size_t q_pairs = a.q_pairs(), k_pairs = a.k_pairs(), k_tail = a.k_tail();
  const uint32_t tail = a.head_dim - 2 * a.n_pairs;
  grid_stride(block, n_blocks, t, kRopeThreads, a.items(), [&](size_t it) {
    if (it < q_pairs) {  // rope_body's item
      const size_t per_token = size_t{a.n_heads} * a.n_pairs;
      const size_t token = it / per_token, head = it % per_token / a.n_pairs, i = it % a.n_pairs;
      T* h = q + (token * a.n_heads + head) * a.head_dim;
      const size_t x = a.split_half ? i : 2 * i, y = a.split_half ? i + a.n_pairs : 2 * i + 1;
      const float c = a.cos[token * a.n_pairs + i], s = a.sin[token * a.n_pairs + i];
      const float x0 = to_f32(h[x]), x1 = to_f32(h[y]);
      store_f32(h + x, x0 * c - x1 * s);
      store_f32(h + y, x0 * s + x1 * c);
      return;
    }
    it -= q_pairs;
    if (it < k_pairs) {
      const size_t per_token = size_t{a.n_kv} * a.n_pairs;
      const size_t token = it / per_token, head = it % per_token / a.n_pairs, i = it % a.n_pairs;
      const T* h = k + (token * a.n_kv + head) * a.head_dim;
      T* dst = pool + a.g.offset(a.pages[token], a.layer, 0, a.slots[token]) + head * a.head_dim;
      const size_t x = a.split_half ? i : 2 * i, y = a.split_half ? i + a.n_pairs : 2 * i + 1;
      const float c = a.cos[token * a.n_pairs + i], s = a.sin[token * a.n_pairs + i];
      const float x0 = to_f32(h[x]), x1 = to_f32(h[y]);
      store_f32(dst + x, x0 * c - x1 * s);
      store_f32(dst + y, x0 * s + x1 * c);
      return;
    }
    it -= k_pairs;
    if (it < k_tail) {
      const size_t per_token = size_t{a.n_kv} * tail;
      const size_t token = it / per_token, head = it % per_token / tail,
                   j = 2 * a.n_pairs + it % tail;
      pool[a.g.offset(a.pages[token], a.layer, 0, a.slots[token]) + head * a.head_dim + j] =
          k[(token * a.n_kv + head) * a.head_dim + j];
      return;
    }
    it -= k_tail;
    const size_t kv_dim = size_t{a.n_kv} * a.head_dim, token = it / kv_dim;
    pool[a.g.offset(a.pages[token], a.layer, 1, a.slots[token]) + it % kv_dim] = v[it];
  });
}

}  // namespace pith::cuda::kern
