// Body of the fused RoPE + KV append of a layer that stores K/V: q rotated into q_dst
// [n][n_heads][head_dim] (in place when q_src is q_dst), k rotated on its way into the pool (the
// k rows themselves are left as they were: nothing reads them after the append), v copied into
// the pool, all in one launch where rope(q), rope(k) and kv_append took three. The sources may
// be rows of one fused QKV projection (row strides q_ld, k_ld, v_ld in elements). Items of one
// grid-stride loop: q's pairs, q's unrotated tail when q moves (partial rotary: dims
// [2 n_pairs, head_dim) in both pair layouts), k's pairs, k's tail, v's elements. Rounding as the
// three kernels: each rotated value is stored once in T, which the append then copied exactly.
#pragma once

#include "engine/cuda/kernels/block.h"
#include "engine/cuda/kernels/kv_body.h"
#include "engine/cuda/kernels/rope_body.h"

namespace pith::cuda::kern {

struct RopeAppendArgs {
  uint32_t n = 0, n_heads = 0, n_kv = 0, head_dim = 0, n_pairs = 0;
  bool split_half = false;
  bool q_moves = false;                   // q_src and q_dst differ: the tail is copied too
  uint32_t q_ld = 0, k_ld = 0, v_ld = 0;  // source row strides (elements)
  const float* cos = nullptr;             // [n][n_pairs]
  const float* sin = nullptr;
  const uint32_t* pages = nullptr;  // per row: the (page, slot) its K/V go to
  const uint32_t* slots = nullptr;
  uint32_t layer = 0;  // within the geometry's run of layers
  KvGeometry g;

  PITH_HD uint32_t tail() const { return head_dim - 2 * n_pairs; }
  PITH_HD size_t q_pairs() const { return size_t{n} * n_heads * n_pairs; }
  PITH_HD size_t q_tail() const { return q_moves ? size_t{n} * n_heads * tail() : 0; }
  PITH_HD size_t k_pairs() const { return size_t{n} * n_kv * n_pairs; }
  PITH_HD size_t k_tail() const { return size_t{n} * n_kv * tail(); }
  PITH_HD size_t items() const {
    return q_pairs() + q_tail() + k_pairs() + k_tail() + size_t{n} * n_kv * head_dim;
  }
};

// Pair i of a head at `src` rotated by its token's angle into `dst` (the same head's layout).
template <class T>
PITH_HD void rotate_pair(const RopeAppendArgs& a, size_t token, size_t i, const T* src, T* dst) {
  const size_t x = a.split_half ? i : 2 * i, y = a.split_half ? i + a.n_pairs : 2 * i + 1;
  const float c = a.cos[token * a.n_pairs + i], s = a.sin[token * a.n_pairs + i];
  const float x0 = to_f32(src[x]), x1 = to_f32(src[y]);
  store_f32(dst + x, x0 * c - x1 * s);
  store_f32(dst + y, x0 * s + x1 * c);
}

template <class T>
PITH_HD void rope_append_body(uint32_t block, uint32_t n_blocks, uint32_t t, const T* q_src,
                              T* q_dst, const T* k, const T* v, const RopeAppendArgs& a, T* pool) {
  const size_t q_pairs = a.q_pairs(), q_tail = a.q_tail(), k_pairs = a.k_pairs(),
               k_tail = a.k_tail();
  const uint32_t tail = a.tail();
  // (token, head, index) of item `it` of a part with `per_head` items per head.
  auto split = [](size_t it, uint32_t heads, uint32_t per_head, size_t& token, size_t& head) {
    const size_t per_token = size_t{heads} * per_head;
    token = it / per_token;
    head = it % per_token / per_head;
    return it % per_head;
  };
  grid_stride(block, n_blocks, t, kRopeThreads, a.items(), [&](size_t it) {
    size_t token, head;
    if (it < q_pairs) {
      const size_t i = split(it, a.n_heads, a.n_pairs, token, head);
      rotate_pair(a, token, i, q_src + token * a.q_ld + head * a.head_dim,
                  q_dst + (token * a.n_heads + head) * a.head_dim);
      return;
    }
    it -= q_pairs;
    if (it < q_tail) {
      const size_t j = 2 * a.n_pairs + split(it, a.n_heads, tail, token, head);
      q_dst[(token * a.n_heads + head) * a.head_dim + j] =
          q_src[token * a.q_ld + head * a.head_dim + j];
      return;
    }
    it -= q_tail;
    if (it < k_pairs) {
      const size_t i = split(it, a.n_kv, a.n_pairs, token, head);
      rotate_pair(
          a, token, i, k + token * a.k_ld + head * a.head_dim,
          pool + a.g.offset(a.pages[token], a.layer, 0, a.slots[token]) + head * a.head_dim);
      return;
    }
    it -= k_pairs;
    if (it < k_tail) {
      const size_t j = 2 * a.n_pairs + split(it, a.n_kv, tail, token, head);
      pool[a.g.offset(a.pages[token], a.layer, 0, a.slots[token]) + head * a.head_dim + j] =
          k[token * a.k_ld + head * a.head_dim + j];
      return;
    }
    it -= k_tail;
    const size_t kv_dim = size_t{a.n_kv} * a.head_dim;
    token = it / kv_dim;
    pool[a.g.offset(a.pages[token], a.layer, 1, a.slots[token]) + it % kv_dim] =
        v[token * a.v_ld + it % kv_dim];
  });
}

}  // namespace pith::cuda::kern
