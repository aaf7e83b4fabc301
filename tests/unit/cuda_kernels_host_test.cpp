// The CUDA backend's kernel bodies (src/engine/cuda/kernels/*_body.h) run on the CPU over
// every (block, thread) of their launch grid, against the CPU engine's reference: embedding and
// row moves, residual add + RMSNorm, RoPE, KV append/copy in the device pool layout, SwiGLU,
// row adds/conversions, and the softmax + top-K reduction with its tie rule. Catches index,
// boundary and rounding bugs without a GPU (races are compute-sanitizer's job on a GPU).
// Needs no CUDA toolkit: the bodies compile as plain C++ when nvcc is not the compiler.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <utility>
#include <vector>

#include "common/fp16.h"
#include "cuda_kernels_host_util.h"
#include "engine/cuda/attention/paged_kv.h"
#include "engine/cuda/kernels/activation_body.h"
#include "engine/cuda/kernels/kv_body.h"
#include "engine/cuda/kernels/lora_body.h"
#include "engine/cuda/kernels/norm_body.h"
#include "engine/cuda/kernels/rope_append_body.h"
#include "engine/cuda/kernels/rope_body.h"
#include "engine/cuda/kernels/rows_body.h"
#include "engine/cuda/kernels/topk_body.h"
#include "engine/kernels/vector_ops.h"
#include "engine/rope.h"
#include "engine/token_distribution.h"

namespace pith::cuda {
namespace {

// ---- rows --------------------------------------------------------------------------------

// The element-wise bodies move N elements per step: N = 1 on any rows, the launchers' 16-byte
// vectors (4 F32, 8 BF16) on rows whose length is a multiple of N.
template <uint32_t N>
void check_embed_rows(uint32_t d) {
  const uint32_t vocab = 37;
  std::vector<float> table = random_floats(size_t{vocab} * d, 1);
  std::vector<Bf16> table16 = to_bf16(table);
  std::vector<int32_t> tokens{5, 0, 36, 5, 17};
  const uint32_t n = static_cast<uint32_t>(tokens.size());
  for (uint32_t blocks : grids(size_t{n} * d / N, kern::kRowThreads)) {
    std::vector<float> out(size_t{n} * d, NAN), out16(size_t{n} * d, NAN);
    run_grid(blocks, kern::kRowThreads, [&](uint32_t b, uint32_t nb, uint32_t t) {
      kern::embed_rows_body<N>(b, nb, t, table.data(), tokens.data(), n, d, out.data());
      kern::embed_rows_body<N>(b, nb, t, table16.data(), tokens.data(), n, d, out16.data());
    });
    for (uint32_t i = 0; i < n; ++i)
      for (uint32_t j = 0; j < d; ++j) {
        size_t src = size_t(tokens[i]) * d + j;
        ASSERT_EQ(out[size_t{i} * d + j], table[src]) << "N=" << N;
        ASSERT_EQ(out16[size_t{i} * d + j], bf16_to_f32(table16[src].bits)) << "N=" << N;
      }
  }
}

TEST(CudaKernelsHost, EmbedRowsF32AndBf16Tables) {
  check_embed_rows<1>(301);
  check_embed_rows<4>(304);
  check_embed_rows<8>(304);
}

template <uint32_t N>
void check_gather_scatter(uint32_t d) {
  const uint32_t slots = 9;
  std::vector<float> pool = random_floats(size_t{slots} * d, 2);
  std::vector<uint32_t> idx{8, 2, 5};
  const uint32_t n = 3;
  for (uint32_t blocks : grids(size_t{n} * d / N, kern::kRowThreads)) {
    std::vector<float> rows(size_t{n} * d, NAN);
    run_grid(blocks, kern::kRowThreads, [&](uint32_t b, uint32_t nb, uint32_t t) {
      kern::gather_rows_body<N>(b, nb, t, pool.data(), idx.data(), n, d, rows.data());
    });
    for (uint32_t i = 0; i < n; ++i)
      for (uint32_t j = 0; j < d; ++j) ASSERT_EQ(rows[size_t{i} * d + j], pool[idx[i] * d + j]);

    std::vector<float> back(size_t{slots} * d, -7.0f);
    run_grid(blocks, kern::kRowThreads, [&](uint32_t b, uint32_t nb, uint32_t t) {
      kern::scatter_rows_body<N>(b, nb, t, rows.data(), idx.data(), n, d, back.data());
    });
    for (uint32_t s = 0; s < slots; ++s) {
      bool written = std::find(idx.begin(), idx.end(), s) != idx.end();
      for (uint32_t j = 0; j < d; ++j)
        ASSERT_EQ(back[s * d + j], written ? pool[s * d + j] : -7.0f) << s << "," << j;
    }
  }
}

TEST(CudaKernelsHost, VectorsOnlyOnAlignedWholeRows) {
  alignas(32) float f32[16] = {};
  alignas(32) Bf16 b16[32] = {};
  EXPECT_TRUE(kern::vector_ok<4>(f32, 8, 12));
  EXPECT_FALSE(kern::vector_ok<4>(f32 + 1, 8, 12));  // 4-byte aligned only
  EXPECT_FALSE(kern::vector_ok<4>(f32, 6, 12));      // ragged row
  EXPECT_FALSE(kern::vector_ok<4>(f32, 8, 10));      // row starts off the vector grid
  EXPECT_TRUE(kern::vector_ok<8>(b16, 16, 24));
  EXPECT_FALSE(kern::vector_ok<8>(b16 + 4, 16, 24));
  EXPECT_EQ(kern::kVec<float>, 4u);
  EXPECT_EQ(kern::kVec<Bf16>, 8u);
}

TEST(CudaKernelsHost, GatherAndScatterRows) {
  check_gather_scatter<1>(130);
  check_gather_scatter<4>(132);
}

// ---- norm --------------------------------------------------------------------------------

template <uint32_t N, class T>
void check_add_rmsnorm(uint32_t n, uint32_t d, bool with_delta) {
  const float eps = 1e-5f;
  std::vector<float> residual = random_floats(size_t{n} * d, 3 + d, 2.0f);
  std::vector<float> delta = random_floats(size_t{n} * d, 4 + d);
  std::vector<float> weight = random_floats(d, 5 + d);
  std::vector<float> want_res = residual, want_out(size_t{n} * d);
  for (uint32_t i = 0; i < n; ++i) {
    float* r = want_res.data() + size_t{i} * d;
    if (with_delta) add(delta.data() + size_t{i} * d, r, d);
    rmsnorm(r, weight.data(), want_out.data() + size_t{i} * d, d, eps);
  }
  std::vector<T> out(size_t{n} * d);
  auto sh = std::make_unique<kern::NormShared>();
  for (uint32_t row = 0; row < n; ++row) {
    kern::HostBlock blk{row, 0, kern::kNormThreads};
    kern::add_rmsnorm_body<N>(blk, *sh, residual.data(), with_delta ? delta.data() : nullptr,
                              weight.data(), d, eps, out.data());
  }
  for (size_t i = 0; i < want_out.size(); ++i) {
    ASSERT_EQ(residual[i], want_res[i]) << i;
    float want = want_out[i];
    if constexpr (std::is_same_v<T, float>)
      ASSERT_NEAR(out[i], want, 2e-6f * (1 + std::fabs(want))) << "d=" << d << " i=" << i;
    else
      expect_bf16_near(f(out[i]), bf16_to_f32(f32_to_bf16(want)), "rmsnorm", i);
  }
}

TEST(CudaKernelsHost, AddRmsNormRaggedRows) {
  for (uint32_t d : {1u, 31u, 256u, 257u, 1000u, 4096u}) {
    check_add_rmsnorm<1, float>(3, d, true);
    check_add_rmsnorm<1, float>(2, d, false);
    check_add_rmsnorm<1, Bf16>(3, d, true);
    if (d % 4 != 0) continue;  // the vector path's condition
    check_add_rmsnorm<4, float>(3, d, true);
    check_add_rmsnorm<4, float>(2, d, false);
    check_add_rmsnorm<4, Bf16>(3, d, true);
  }
}

// ---- rope --------------------------------------------------------------------------------

template <class T>
void check_rope(uint32_t n, uint32_t n_heads, uint32_t head_dim, bool split_half = false,
                uint32_t rotary_dim = 0) {
  const uint32_t np = (rotary_dim ? rotary_dim : head_dim) / 2;
  std::vector<float> x = random_floats(size_t{n} * n_heads * head_dim, 6 + head_dim);
  // Real angles: the backend uploads RopeTable::angles per token.
  RopeTable table(2 * np, 500000.0f, {});
  std::vector<float> cos_v(size_t{n} * np), sin_v(size_t{n} * np);
  for (uint32_t i = 0; i < n; ++i)
    table.angles(7 * i + 3, &cos_v[size_t{i} * np], &sin_v[size_t{i} * np]);

  std::vector<T> dev(x.size());
  for (size_t i = 0; i < x.size(); ++i) kern::store_f32(&dev[i], x[i]);
  std::vector<float> want(x.size());
  for (size_t i = 0; i < x.size(); ++i) want[i] = f(dev[i]);  // the stored (rounded) input
  const auto rotate = split_half ? apply_rope_split_half : apply_rope;
  for (uint32_t i = 0; i < n; ++i)
    rotate(want.data() + size_t{i} * n_heads * head_dim, n_heads, np, &cos_v[size_t{i} * np],
           &sin_v[size_t{i} * np], head_dim);

  size_t pairs = size_t{n} * n_heads * np;
  run_grid(kern::elementwise_blocks(pairs, kern::kRopeThreads), kern::kRopeThreads,
           [&](uint32_t b, uint32_t nb, uint32_t t) {
             kern::rope_body(b, nb, t, dev.data(), n, n_heads, head_dim, np, split_half,
                             cos_v.data(), sin_v.data());
           });
  for (size_t i = 0; i < x.size(); ++i) {
    if constexpr (std::is_same_v<T, float>)
      ASSERT_NEAR(dev[i], want[i], 1e-6f) << i;
    else
      expect_bf16_near(f(dev[i]), bf16_to_f32(f32_to_bf16(want[i])), "rope", i);
  }
}

TEST(CudaKernelsHost, RopeMatchesApplyRope) {
  check_rope<float>(5, 3, 64);
  check_rope<float>(1, 32, 128);
  check_rope<float>(3, 2, 6);  // head_dim not a multiple of anything convenient
  check_rope<Bf16>(5, 3, 64);
  check_rope<Bf16>(2, 8, 128);
}

TEST(CudaKernelsHost, RopeSplitHalfAndPartialRotary) {
  check_rope<float>(5, 3, 64, true);
  check_rope<float>(2, 4, 256, true);
  check_rope<Bf16>(3, 8, 128, true);
  check_rope<float>(4, 2, 128, false, 32);  // a quarter of each head turns, the rest stays
  check_rope<float>(4, 2, 256, true, 64);
  check_rope<Bf16>(3, 4, 256, true, 64);
}

// ---- KV pool ------------------------------------------------------------------------------

kern::KvGeometry geometry_of(const KvPoolLayout& l) {
  // The launcher's reduction of KvPoolLayout (kv.cu): strides only.
  return {l.page_elems(), size_t{l.page_size} * l.kv_dim(), static_cast<uint32_t>(l.kv_dim()),
          l.n_layers, 0};
}
// The same for the run of `count` layers from `first` of a pool whose layers differ.
kern::KvGeometry geometry_of(const KvPoolLayout& l, uint32_t first, uint32_t count) {
  const auto kv_dim = static_cast<uint32_t>(l.kv_dim_of(first));
  return {l.page_elems(), size_t{l.page_size} * kv_dim, kv_dim, count, l.layer_offset(first)};
}

template <uint32_t N, class T>
void check_kv_append(DType dtype) {
  KvPoolLayout layout;
  layout.dtype = dtype;
  layout.n_layers = 3;
  layout.n_kv_heads = 2;
  layout.head_dim = 12;
  layout.page_size = 4;
  const uint32_t n_pages = 5, kv_dim = static_cast<uint32_t>(layout.kv_dim());
  std::vector<T> pool(n_pages * layout.page_elems());
  for (auto& e : pool) kern::store_f32(&e, -3.0f);
  std::vector<uint32_t> pages{4, 4, 0, 2, 4}, slots{0, 3, 3, 1, 2};
  const uint32_t n = 5, layer = 1;
  std::vector<T> k(size_t{n} * kv_dim), v(size_t{n} * kv_dim);
  for (size_t i = 0; i < k.size(); ++i) {
    kern::store_f32(&k[i], static_cast<float>(i));
    kern::store_f32(&v[i], -static_cast<float>(i) - 0.5f);
  }
  kern::KvGeometry g = geometry_of(layout);
  for (uint32_t blocks : grids(size_t{n} * kv_dim / N, kern::kKvThreads)) {
    run_grid(blocks, kern::kKvThreads, [&](uint32_t b, uint32_t nb, uint32_t t) {
      kern::kv_append_body<N>(b, nb, t, k.data(), v.data(), n, pages.data(), slots.data(), layer, g,
                              pool.data());
    });
  }
  std::vector<float> want(pool.size(), -3.0f);
  for (uint32_t i = 0; i < n; ++i)
    for (uint32_t c = 0; c < kv_dim; ++c) {
      want[layout.block_offset(pages[i], layer, 0) + slots[i] * kv_dim + c] = f(k[i * kv_dim + c]);
      want[layout.block_offset(pages[i], layer, 1) + slots[i] * kv_dim + c] = f(v[i * kv_dim + c]);
    }
  for (size_t i = 0; i < pool.size(); ++i) ASSERT_EQ(f(pool[i]), want[i]) << i;
}

TEST(CudaKernelsHost, KvAppendWritesThePoolLayout) {
  check_kv_append<1, float>(DType::F32);
  check_kv_append<4, float>(DType::F32);
  check_kv_append<1, Bf16>(DType::BF16);
  check_kv_append<8, Bf16>(DType::BF16);
}

// memmove of every (layer, k|v) block's slot range, on the reference's flat copy of the pool.
void reference_kv_copy(std::vector<float>& pool, const KvPoolLayout& l, uint32_t src_page,
                       uint32_t dst_page, uint32_t src_slot, uint32_t dst_slot, uint32_t n) {
  for (uint32_t layer = 0; layer < l.n_layers; ++layer)
    for (uint32_t kv = 0; kv < 2; ++kv)
      std::memmove(pool.data() + l.block_offset(dst_page, layer, kv) + dst_slot * l.kv_dim(),
                   pool.data() + l.block_offset(src_page, layer, kv) + src_slot * l.kv_dim(),
                   n * l.kv_dim() * sizeof(float));
}

template <uint32_t N>
void check_kv_copy() {
  KvPoolLayout layout;
  layout.dtype = DType::F32;
  layout.n_layers = 2;
  layout.n_kv_heads = 3;
  layout.head_dim = 4;
  layout.page_size = 8;
  const uint32_t n_pages = 3;
  struct Case {
    uint32_t src_page, dst_page, src_slot, dst_slot, n;
  };
  for (Case c : {Case{0, 2, 1, 5, 3}, Case{1, 1, 0, 3, 5}, Case{1, 1, 3, 0, 5}, Case{2, 0, 0, 0, 8},
                 Case{1, 1, 2, 2, 4}, Case{0, 1, 4, 4, 0}}) {
    std::vector<float> pool(n_pages * layout.page_elems());
    for (size_t i = 0; i < pool.size(); ++i) pool[i] = static_cast<float>(i);
    std::vector<float> want = pool;
    reference_kv_copy(want, layout, c.src_page, c.dst_page, c.src_slot, c.dst_slot, c.n);
    kern::KvGeometry g = geometry_of(layout);
    size_t groups = size_t{layout.n_layers} * 2 * layout.kv_dim() / N;
    run_grid(kern::elementwise_blocks(groups, kern::kKvThreads), kern::kKvThreads,
             [&](uint32_t b, uint32_t nb, uint32_t t) {
               kern::kv_copy_body<N>(b, nb, t, c.src_page, c.dst_page, c.src_slot, c.dst_slot, c.n,
                                     g, pool.data());
             });
    EXPECT_EQ(pool, want) << c.src_page << "/" << c.src_slot << " -> " << c.dst_page << "/"
                          << c.dst_slot << " n=" << c.n << " N=" << N;
  }
}

TEST(CudaKernelsHost, KvCopyHasMemmoveSemantics) {
  check_kv_copy<1>();
  check_kv_copy<4>();
}

// gemma4's pool: the global layers (here 1 and 2) have their own KV heads and head size, so
// each layer's blocks sit at its own offset. Appends into one layer and a copy over the runs
// of equal shapes (as kv.cu launches them) touch exactly that layer's (and every layer's) rows.
TEST(CudaKernelsHost, KvPoolWithPerLayerShapes) {
  KvPoolLayout layout;
  layout.dtype = DType::F32;
  layout.n_layers = 4;
  layout.page_size = 4;
  layout.layers = {{2, 8}, {1, 16}, {1, 16}, {2, 8}};
  ASSERT_EQ(layout.page_elems(), size_t{2} * 4 * (16 + 16 + 16 + 16));
  EXPECT_EQ(layout.block_offset(1, 2, 1), layout.page_elems() + 2 * 2 * 4 * 16 + 4 * 16);
  const uint32_t n_pages = 3;
  std::vector<float> pool(n_pages * layout.page_elems(), -3.0f);
  for (uint32_t layer : {1u, 3u}) {  // one global and one sliding layer
    const auto kv_dim = static_cast<uint32_t>(layout.kv_dim_of(layer));
    std::vector<uint32_t> pages{2, 0, 2}, slots{1, 3, 0};
    std::vector<float> k(3 * kv_dim), v(3 * kv_dim);
    for (size_t i = 0; i < k.size(); ++i) {
      k[i] = 100.0f * layer + static_cast<float>(i);
      v[i] = -k[i];
    }
    std::vector<float> want = pool;
    for (uint32_t i = 0; i < 3; ++i)
      for (uint32_t c = 0; c < kv_dim; ++c) {
        want[layout.block_offset(pages[i], layer, 0) + slots[i] * kv_dim + c] = k[i * kv_dim + c];
        want[layout.block_offset(pages[i], layer, 1) + slots[i] * kv_dim + c] = v[i * kv_dim + c];
      }
    const kern::KvGeometry g = geometry_of(layout, layer, 1);
    run_grid(kern::elementwise_blocks(3 * kv_dim / 4, kern::kKvThreads), kern::kKvThreads,
             [&](uint32_t b, uint32_t nb, uint32_t t) {
               kern::kv_append_body<4>(b, nb, t, k.data(), v.data(), 3, pages.data(), slots.data(),
                                       0, g, pool.data());
             });
    ASSERT_EQ(pool, want) << "layer " << layer;
  }
  for (size_t i = 0; i < pool.size(); ++i) pool[i] = static_cast<float>(i);
  std::vector<float> want = pool;
  const uint32_t src_page = 1, dst_page = 1, src_slot = 0, dst_slot = 1, n = 3;
  for (uint32_t layer = 0; layer < layout.n_layers; ++layer)
    for (uint32_t kv = 0; kv < 2; ++kv) {
      const size_t kv_dim = layout.kv_dim_of(layer);
      std::memmove(want.data() + layout.block_offset(dst_page, layer, kv) + dst_slot * kv_dim,
                   want.data() + layout.block_offset(src_page, layer, kv) + src_slot * kv_dim,
                   n * kv_dim * sizeof(float));
    }
  // The runs kv.cu forms: {0}, {1, 2}, {3}.
  for (auto [first, count] : {std::pair{0u, 1u}, std::pair{1u, 2u}, std::pair{3u, 1u}}) {
    const kern::KvGeometry g = geometry_of(layout, first, count);
    const size_t groups = size_t{count} * 2 * g.kv_dim;
    run_grid(kern::elementwise_blocks(groups, kern::kKvThreads), kern::kKvThreads,
             [&](uint32_t b, uint32_t nb, uint32_t t) {
               kern::kv_copy_body<1>(b, nb, t, src_page, dst_page, src_slot, dst_slot, n, g,
                                     pool.data());
             });
  }
  EXPECT_EQ(pool, want);
}

// The fused RoPE + append against the three kernels it replaces (rope(q), rope(k), kv_append)
// on the same inputs, from separate q/k/v rows (q in place) and from one fused QKV projection's
// rows (q written to its own buffer): q bit for bit, the pool bit for bit, the sources left as
// they were. Adjacent and
// split-half pairs, partial rotary, F32 and BF16, a layer of a pool whose layers differ in shape
// (gemma4), over grids of one block and of many.
template <class T>
void check_rope_append(uint32_t n_heads, uint32_t n_kv, uint32_t head_dim, uint32_t n_pairs,
                       bool split_half) {
  KvPoolLayout layout;
  layout.dtype = std::is_same_v<T, float> ? DType::F32 : DType::BF16;
  layout.n_layers = 3;
  layout.page_size = 4;
  layout.layers = {{2 * n_kv, 8}, {n_kv, head_dim}, {2 * n_kv, 8}};
  const uint32_t layer = 1, n = 5, n_pages = 4, kv_dim = n_kv * head_dim;
  std::vector<uint32_t> pages{3, 0, 3, 1, 2}, slots{0, 2, 3, 1, 1};
  std::vector<float> cos_v(size_t{n} * n_pairs), sin_v(cos_v.size());
  RopeTable table(2 * n_pairs, 10000.0f, {});
  for (uint32_t i = 0; i < n; ++i)
    table.angles(5 * i + 2, &cos_v[size_t{i} * n_pairs], &sin_v[size_t{i} * n_pairs]);
  auto fill = [](std::vector<T>& x, uint32_t seed) {
    const std::vector<float> src = random_floats(x.size(), seed, 2.0f);
    for (size_t i = 0; i < x.size(); ++i) kern::store_f32(&x[i], src[i]);
  };
  std::vector<T> q(size_t{n} * n_heads * head_dim), k(size_t{n} * kv_dim), v(k.size());
  fill(q, 1), fill(k, 2), fill(v, 3);
  std::vector<T> pool(n_pages * layout.page_elems());
  fill(pool, 4);
  const kern::KvGeometry g = geometry_of(layout, layer, 1);

  // The three kernels.
  std::vector<T> q_want = q, k_rot = k, pool_want = pool;
  auto rope_all = [&](std::vector<T>& x, uint32_t heads) {
    run_grid(kern::elementwise_blocks(size_t{n} * heads * n_pairs, kern::kRopeThreads),
             kern::kRopeThreads, [&](uint32_t b, uint32_t nb, uint32_t t) {
               kern::rope_body(b, nb, t, x.data(), n, heads, head_dim, n_pairs, split_half,
                               cos_v.data(), sin_v.data());
             });
  };
  rope_all(q_want, n_heads);
  rope_all(k_rot, n_kv);
  run_grid(kern::elementwise_blocks(size_t{n} * kv_dim, kern::kKvThreads), kern::kKvThreads,
           [&](uint32_t b, uint32_t nb, uint32_t t) {
             kern::kv_append_body<1>(b, nb, t, k_rot.data(), v.data(), n, pages.data(),
                                     slots.data(), 0, g, pool_want.data());
           });

  kern::RopeAppendArgs a;
  a.n = n, a.n_heads = n_heads, a.n_kv = n_kv, a.head_dim = head_dim, a.n_pairs = n_pairs;
  a.split_half = split_half, a.cos = cos_v.data(), a.sin = sin_v.data();
  a.pages = pages.data(), a.slots = slots.data(), a.layer = 0, a.g = g;
  const uint32_t qd = n_heads * head_dim, width = qd + 2 * kv_dim;
  // The fused QKV projection's rows: q | k | v per token.
  std::vector<T> qkv(size_t{n} * width);
  for (uint32_t i = 0; i < n; ++i) {
    std::copy_n(q.begin() + size_t{i} * qd, qd, qkv.begin() + size_t{i} * width);
    std::copy_n(k.begin() + size_t{i} * kv_dim, kv_dim, qkv.begin() + size_t{i} * width + qd);
    std::copy_n(v.begin() + size_t{i} * kv_dim, kv_dim,
                qkv.begin() + size_t{i} * width + qd + kv_dim);
  }
  const std::vector<T> k_before = k, qkv_before = qkv;
  for (const bool fused : {false, true}) {
    a.q_moves = fused;
    a.q_ld = fused ? width : qd;
    a.k_ld = a.v_ld = fused ? width : kv_dim;
    for (uint32_t blocks : grids(a.items(), kern::kRopeThreads)) {
      std::vector<T> q_got = fused ? std::vector<T>(q.size()) : q, pool_got = pool;
      const T* q_src = fused ? qkv.data() : q_got.data();
      const T* k_src = fused ? qkv.data() + qd : k.data();
      const T* v_src = fused ? qkv.data() + qd + kv_dim : v.data();
      run_grid(blocks, kern::kRopeThreads, [&](uint32_t b, uint32_t nb, uint32_t t) {
        kern::rope_append_body(b, nb, t, q_src, q_got.data(), k_src, v_src, a, pool_got.data());
      });
      const std::string what =
          fmt::format("{} heads {}/{} hd {} pairs {}{}{} blocks {}",
                      std::is_same_v<T, float> ? "f32" : "bf16", n_heads, n_kv, head_dim, n_pairs,
                      split_half ? " split" : "", fused ? " fused" : "", blocks);
      for (size_t i = 0; i < q.size(); ++i)
        ASSERT_EQ(f(q_got[i]), f(q_want[i])) << what << " q " << i;
      for (size_t i = 0; i < pool.size(); ++i)
        ASSERT_EQ(f(pool_got[i]), f(pool_want[i])) << what << " pool " << i;
      for (size_t i = 0; i < k.size(); ++i)
        ASSERT_EQ(f(k[i]), f(k_before[i])) << what << " k " << i;
      for (size_t i = 0; i < qkv.size(); ++i)
        ASSERT_EQ(f(qkv[i]), f(qkv_before[i])) << what << " qkv " << i;
    }
  }
}

TEST(CudaKernelsHost, RopeAppendEqualsRopeThenAppend) {
  check_rope_append<float>(8, 2, 16, 8, false);
  check_rope_append<float>(8, 2, 16, 8, true);
  check_rope_append<float>(4, 1, 32, 4, true);  // a quarter of each head turns (phi4-mini-like)
  check_rope_append<Bf16>(8, 4, 16, 8, false);
  check_rope_append<Bf16>(6, 2, 24, 6, true);  // partial rotary, split halves
}

// ---- activations ---------------------------------------------------------------------------

template <uint32_t N, class T>
void check_swiglu(uint32_t n, uint32_t ff, uint32_t ld) {
  // Fused gate|up GEMM output: gate at column 0, up at column ff of rows of width ld >= 2 ff.
  std::vector<T> fused(size_t{n} * ld);
  std::vector<float> src = random_floats(fused.size(), 9 + ff, 3.0f);
  for (size_t i = 0; i < src.size(); ++i) kern::store_f32(&fused[i], src[i]);
  std::vector<T> out(size_t{n} * ff);
  for (uint32_t blocks : grids(size_t{n} * ff / N, kern::kActivationThreads))
    run_grid(blocks, kern::kActivationThreads, [&](uint32_t b, uint32_t nb, uint32_t t) {
      kern::swiglu_body<N>(b, nb, t, fused.data(), fused.data() + ff, n, ff, ld, out.data());
    });
  for (uint32_t i = 0; i < n; ++i) {
    std::vector<float> gate(ff), up(ff), want(ff);
    for (uint32_t j = 0; j < ff; ++j) {
      gate[j] = f(fused[size_t{i} * ld + j]);
      up[j] = f(fused[size_t{i} * ld + ff + j]);
    }
    swiglu(gate.data(), up.data(), want.data(), ff);
    for (uint32_t j = 0; j < ff; ++j) {
      float got = f(out[size_t{i} * ff + j]);
      if constexpr (std::is_same_v<T, float>)
        ASSERT_NEAR(got, want[j], 1e-5f * (1 + std::fabs(want[j]))) << i << "," << j;
      else
        expect_bf16_near(got, bf16_to_f32(f32_to_bf16(want[j])), "swiglu", j);
    }
  }
}

TEST(CudaKernelsHost, SwigluWithLeadingDimension) {
  check_swiglu<1, float>(3, 100, 200);
  check_swiglu<1, float>(4, 257, 530);
  check_swiglu<4, float>(4, 256, 520);
  check_swiglu<1, Bf16>(3, 100, 200);
  check_swiglu<8, Bf16>(2, 1000, 2048);
}

template <uint32_t N>
void check_add_convert(size_t total) {
  std::vector<float> x = random_floats(total, 11);
  std::vector<Bf16> x16 = to_bf16(x);
  std::vector<float> base = random_floats(total, 12);
  for (uint32_t blocks : grids(total / N, kern::kActivationThreads)) {
    std::vector<float> r32 = base, r16 = base;
    std::vector<float> c32(total);
    std::vector<Bf16> c16(total);
    run_grid(blocks, kern::kActivationThreads, [&](uint32_t b, uint32_t nb, uint32_t t) {
      kern::add_rows_body<N>(b, nb, t, r32.data(), x.data(), total);
      kern::add_rows_body<N>(b, nb, t, r16.data(), x16.data(), total);
      kern::convert_rows_body<N>(b, nb, t, x.data(), total, c32.data());
      kern::convert_rows_body<N>(b, nb, t, x.data(), total, c16.data());
    });
    for (size_t i = 0; i < total; ++i) {
      ASSERT_EQ(r32[i], base[i] + x[i]) << "N=" << N;
      ASSERT_EQ(r16[i], base[i] + bf16_to_f32(x16[i].bits)) << "N=" << N;
      ASSERT_EQ(c32[i], x[i]) << "N=" << N;
      ASSERT_EQ(c16[i].bits, f32_to_bf16(x[i])) << "N=" << N;
    }
  }
}

TEST(CudaKernelsHost, AddAndConvertRows) {
  check_add_convert<1>(3 * 333);
  check_add_convert<4>(3 * 332);
  check_add_convert<8>(3 * 336);
}

// ---- softmax + top-K -----------------------------------------------------------------------

struct TopKResult {
  std::vector<int32_t> ids;
  std::vector<float> probs;
};

// Token masks as softmax_topk takes them: a word offset per row (kNone: none), the words.
struct StagedMasks {
  std::vector<uint32_t> at, words;
  kern::TokenMasks view() const { return {at.empty() ? nullptr : at.data(), words.data()}; }
};
StagedMasks stage_masks(const std::vector<TokenMask>& masks) {
  StagedMasks s;
  for (const TokenMask& m : masks) {
    s.at.push_back(m.empty() ? kern::TokenMasks::kNone : static_cast<uint32_t>(s.words.size()));
    for (uint64_t w : m) {
      s.words.push_back(static_cast<uint32_t>(w));
      s.words.push_back(static_cast<uint32_t>(w >> 32));
    }
  }
  return s;
}

// softmax_topk's two phases over their whole grids. masks: empty, or one per row (an empty
// mask: none).
TopKResult run_topk(const std::vector<float>& logits, uint32_t rows, uint32_t vocab,
                    const std::vector<uint32_t>& ks, uint32_t k_max,
                    const std::vector<TokenMask>& masks = {}) {
  const StagedMasks staged = stage_masks(masks);
  kern::TopKWorkspace w = kern::topk_workspace(rows, vocab, k_max);
  const size_t guard = 256;  // past the layout's end: must stay untouched
  std::vector<unsigned char> ws(w.bytes + guard, 0xcd);
  auto chunk_sh = std::make_unique<kern::TopKChunkShared>();
  for (uint32_t row = 0; row < rows; ++row)
    for (uint32_t c = 0; c < w.n_chunks; ++c)
      kern::topk_chunk_body(kern::HostBlock{c, row, kern::kTopKThreads}, *chunk_sh, logits.data(),
                            vocab, ks.data(), staged.view(), w, ws.data());
  TopKResult r{std::vector<int32_t>(size_t{rows} * k_max, -1),
               std::vector<float>(size_t{rows} * k_max, -1.0f)};
  auto merge_sh = std::make_unique<kern::TopKMergeShared>();
  for (uint32_t row = 0; row < rows; ++row)
    kern::topk_merge_body(kern::HostBlock{row, 0, kern::kMergeThreads}, *merge_sh, vocab, ks.data(),
                          staged.view(), w, ws.data(), r.ids.data(), r.probs.data());
  for (size_t i = w.bytes; i < ws.size(); ++i) EXPECT_EQ(ws[i], 0xcd) << "workspace overrun";
  return r;
}

void check_topk(const std::vector<float>& logits, uint32_t rows, uint32_t vocab,
                const std::vector<uint32_t>& ks, uint32_t k_max,
                const std::vector<TokenMask>& masks = {}) {
  TopKResult got = run_topk(logits, rows, vocab, ks, k_max, masks);
  for (uint32_t r = 0; r < rows; ++r) {
    const float* row = logits.data() + size_t{r} * vocab;
    const bool masked = !masks.empty() && !masks[r].empty();
    TokenDistribution want =
        top_k_distribution(row, vocab, std::min(ks[r], k_max), masked ? masks[r].data() : nullptr);
    size_t k = want.ids.size();
    // A masked row with fewer allowed tokens than its k ends in -1 entries of probability 0.
    const size_t row_k = masked ? std::min<size_t>({ks[r], k_max, vocab}) : k;
    for (size_t i = k; i < row_k; ++i) {
      ASSERT_EQ(got.ids[size_t{r} * k_max + i], -1) << "row " << r << " entry " << i;
      ASSERT_EQ(got.probs[size_t{r} * k_max + i], 0.0f) << "row " << r << " entry " << i;
    }
    std::vector<int32_t> ids(got.ids.begin() + size_t{r} * k_max,
                             got.ids.begin() + size_t{r} * k_max + k);
    ASSERT_EQ(ids, want.ids) << "row " << r << " k " << ks[r] << " vocab " << vocab;
    for (size_t i = 0; i < k; ++i)
      ASSERT_NEAR(got.probs[size_t{r} * k_max + i], want.probs[i], 2e-6 + 1e-5 * want.probs[i])
          << "row " << r << " entry " << i;
    // Entries past the row's k are left alone.
    for (size_t i = row_k; i < k_max; ++i) ASSERT_EQ(got.ids[size_t{r} * k_max + i], -1);
  }
}

TEST(CudaKernelsHost, TopKKeepsOnlyAllowedTokens) {
  // Chunks of 2048: masks allowing nothing, one token, fewer than k, tokens in one chunk
  // only, most tokens, every token; an unmasked row between masked ones; greedy rows whose
  // best token is disallowed; ties among allowed tokens.
  const uint32_t rows = 9, vocab = 10000, words = (vocab + 63) / 64;
  std::vector<float> logits = random_floats(size_t{rows} * vocab, 81, 3.0f);
  for (uint32_t i = 0; i < vocab; i += 7) logits[size_t{8} * vocab + i] = 1.5f;  // ties, row 8
  auto mask = [&](auto allow) {
    TokenMask m(words, 0);
    for (uint32_t i = 0; i < vocab; ++i)
      if (allow(i)) m[i / 64] |= uint64_t{1} << (i % 64);
    return m;
  };
  auto best = [&](uint32_t r) {
    return static_cast<uint32_t>(std::max_element(logits.begin() + size_t{r} * vocab,
                                                  logits.begin() + size_t{r + 1} * vocab) -
                                 (logits.begin() + size_t{r} * vocab));
  };
  const uint32_t best5 = best(5);
  std::vector<TokenMask> masks = {
      mask([](uint32_t) { return false; }),
      mask([](uint32_t i) { return i == 4321; }),
      mask([](uint32_t i) { return i % 997 == 3; }),        // 11 tokens, k 64
      mask([](uint32_t i) { return i >= 8192 && i % 2; }),  // the last chunk only
      {},
      mask([=](uint32_t i) { return i != best5; }),  // greedy, the best one disallowed
      mask([](uint32_t i) { return i % 10 != 0; }),
      mask([](uint32_t) { return true; }),
      mask([](uint32_t i) { return i % 3 == 0; }),
  };
  check_topk(logits, rows, vocab, {5, 5, 64, 300, 64, 1, 1000, 50, 200}, 1024, masks);
  // The same rows with their k at the limit of a smaller call.
  check_topk(logits, rows, vocab, std::vector<uint32_t>(rows, 1), 1, masks);
}

TEST(CudaKernelsHost, TopKMatchesCpuOnRandomRowsWithDifferentK) {
  for (uint32_t vocab : {1u, 5u, 2047u, 2048u, 2049u, 10000u}) {
    const uint32_t rows = 5;
    std::vector<float> logits = random_floats(size_t{rows} * vocab, 20 + vocab, 3.0f);
    check_topk(logits, rows, vocab, {1, 0, 7, 64, 50}, 64);
  }
}

TEST(CudaKernelsHost, TopKExactTiesGoToLowerIds) {
  // Quantised logits: thousands of exact ties around every threshold, across chunk borders.
  const uint32_t rows = 4, vocab = 9000;
  std::vector<float> logits = random_floats(size_t{rows} * vocab, 31, 2.0f);
  for (auto& x : logits) x = std::round(x * 2) / 2;
  check_topk(logits, rows, vocab, {1, 40, 300, 1024}, 1024);
  // Negative and -inf entries (masked tokens), zeros of both signs.
  logits.assign(size_t{rows} * vocab, -INFINITY);
  for (uint32_t r = 0; r < rows; ++r)
    for (uint32_t i = r; i < vocab; i += 3)
      logits[size_t{r} * vocab + i] = (i % 7 == 0) ? -0.0f : -1.0f * (i % 5);
  check_topk(logits, rows, vocab, {3, 100, 1024, 17}, 1024);
}

TEST(CudaKernelsHost, TopKBeyondDistinctValues) {
  // Three distinct values: k far above that is filled by ties in id order.
  const uint32_t rows = 3, vocab = 5000;
  std::vector<float> logits(size_t{rows} * vocab);
  for (size_t i = 0; i < logits.size(); ++i) logits[i] = static_cast<float>((i * 7919) % 3);
  check_topk(logits, rows, vocab, {1000, 2, 513}, 1000);
  // All equal: the first k ids.
  std::fill(logits.begin(), logits.end(), 0.25f);
  check_topk(logits, rows, vocab, {1000, 1, 999}, 1000);
}

TEST(CudaKernelsHost, TopKKLargerThanVocabulary) {
  const uint32_t rows = 2, vocab = 300;
  std::vector<float> logits = random_floats(size_t{rows} * vocab, 41);
  check_topk(logits, rows, vocab, {1024, 299}, 1024);
}

TEST(CudaKernelsHost, TopKLargeVocabulary) {
  const uint32_t rows = 2, vocab = 128256;
  std::vector<float> logits = random_floats(size_t{rows} * vocab, 51, 4.0f);
  logits[77] = logits[128000] = 40.0f;  // a tie at the very top, chunks apart
  check_topk(logits, rows, vocab, {20, 1024}, 1024);
  check_topk(logits, rows, vocab, {50, 1}, 50);
}

TEST(CudaKernelsHost, TopKManyRowsUseLargeChunks) {
  // Enough rows for 8192-entry chunks (ragged last chunk), a different k on every row,
  // greedy rows among them, quantised logits for ties.
  const uint32_t rows = 300, vocab = 30000;
  ASSERT_EQ(kern::topk_workspace(rows, vocab, 200).chunk, 8192u);
  std::vector<float> logits = random_floats(size_t{rows} * vocab, 61, 3.0f);
  for (auto& x : logits) x = std::round(x * 8) / 8;
  std::vector<uint32_t> ks(rows);
  for (uint32_t r = 0; r < rows; ++r) ks[r] = r % 5 == 0 ? 1 : (r * 37) % 201;
  check_topk(logits, rows, vocab, ks, 200);
}

TEST(CudaKernelsHost, TopKRowsWithNaNsStayInTheirSlots) {
  // A broken model's NaN logits: every row still takes only its own candidates (the workspace
  // guard in run_topk), and a greedy row still names a real maximum.
  const uint32_t rows = 3, vocab = 5000;
  std::vector<float> logits = random_floats(size_t{rows} * vocab, 71, 3.0f);
  for (uint32_t r = 0; r < rows; ++r)
    for (uint32_t i = r; i < vocab; i += 11) logits[size_t{r} * vocab + i] = NAN;
  const std::vector<uint32_t> ks{1, 1, 40};
  TopKResult got = run_topk(logits, rows, vocab, ks, 40);
  for (uint32_t r = 0; r < rows; ++r) {
    const float* row = logits.data() + size_t{r} * vocab;
    float best = -INFINITY;
    for (uint32_t i = 0; i < vocab; ++i)
      if (row[i] > best) best = row[i];
    const int32_t id = got.ids[size_t{r} * 40];
    ASSERT_GE(id, 0);
    EXPECT_EQ(row[id], best) << "row " << r;
    for (uint32_t i = 1; i < ks[r]; ++i) EXPECT_FALSE(std::isnan(row[got.ids[size_t{r} * 40 + i]]));
  }
}

TEST(CudaKernelsHost, WorkspaceCoversEveryRowsCandidates) {
  kern::TopKWorkspace w = kern::topk_workspace(256, 256000, 1024);
  EXPECT_EQ(w.chunk, 8192u);
  EXPECT_EQ(w.n_chunks, 32u);
  EXPECT_GE(w.bytes, w.ids_at + size_t{256} * 32 * 1024 * sizeof(int32_t));
  EXPECT_GE(w.ids_at, w.logits_at + size_t{256} * 32 * 1024 * sizeof(float));
  EXPECT_GE(w.logits_at, size_t{256} * 32 * 2 * sizeof(float));
  // One row: small chunks, so the vocabulary spreads over many blocks.
  EXPECT_EQ(kern::topk_workspace(1, 128256, 50).chunk, 2048u);
  // The bound covers every smaller call, whatever chunk size that call picks.
  for (uint32_t vocab : {1u, 2049u, 4097u, 32000u, 128256u, 256000u}) {
    const uint32_t rows = 64, k_max = 1024;
    size_t bound = kern::topk_workspace_bound(rows, vocab, k_max);
    for (uint32_t r = 1; r <= rows; ++r)
      for (uint32_t k : {1u, 50u, 512u, 513u, 1000u, 1024u})
        ASSERT_LE(kern::topk_workspace(r, vocab, k).bytes, bound) << vocab << " " << r << " " << k;
  }
}

TEST(CudaKernelsHost, OrderKeysFollowFloatOrder) {
  std::vector<float> v{-INFINITY, -1e30f, -2.0f, -1.0f, -1e-30f, -0.0f,
                       0.0f,      1e-30f, 1.0f,  3e38f, INFINITY};
  for (size_t i = 0; i + 1 < v.size(); ++i) {
    EXPECT_LE(kern::order_key(v[i]), kern::order_key(v[i + 1])) << v[i];
    EXPECT_EQ(kern::key_logit(kern::order_key(v[i])), v[i]);
  }
  EXPECT_LT(kern::order_key(NAN), kern::order_key(-INFINITY));
  EXPECT_LT(kern::order_key(-NAN), kern::order_key(-INFINITY));
}

// LoRA rows: gather one adapter's token rows, add its scaled delta into a strided output at a
// column offset (the fused gate|up rows), F32 and BF16 alike; rows of other tokens untouched.
TEST(CudaKernelsHost, LoraGatherAndScaledAddIntoStridedRows) {
  const uint32_t T = 7, d = 5, n = 3, ldy = 12, col0 = 4;
  const std::vector<uint32_t> idx = {5, 1, 3};
  const auto src = random_floats(size_t{T} * d, 1), v = random_floats(size_t{n} * d, 2);
  const auto y0 = random_floats(size_t{T} * ldy, 3);
  const auto src16 = to_bf16(src);
  for (uint32_t nb : grids(size_t{n} * d, kern::kLoraThreads)) {
    std::vector<float> g(size_t{n} * d, -1), y = y0;
    std::vector<Bf16> g16(size_t{n} * d), y16 = to_bf16(y0);
    run_grid(nb, kern::kLoraThreads, [&](uint32_t b, uint32_t nbk, uint32_t t) {
      kern::lora_gather_body(b, nbk, t, src.data(), idx.data(), n, d, g.data());
      kern::lora_gather_body(b, nbk, t, src16.data(), idx.data(), n, d, g16.data());
      kern::lora_add_body(b, nbk, t, v.data(), idx.data(), n, d, 0.5f, y.data(), ldy, col0);
      kern::lora_add_body(b, nbk, t, v.data(), idx.data(), n, d, 0.5f, y16.data(), ldy, col0);
    });
    for (uint32_t i = 0; i < n; ++i)
      for (uint32_t j = 0; j < d; ++j) {
        EXPECT_EQ(g[i * d + j], src[idx[i] * d + j]);
        EXPECT_EQ(g16[i * d + j].bits, src16[idx[i] * d + j].bits);
      }
    for (uint32_t r = 0; r < T; ++r)
      for (uint32_t c = 0; c < ldy; ++c) {
        float want = y0[r * ldy + c];
        for (uint32_t i = 0; i < n; ++i)
          if (idx[i] == r && c >= col0 && c < col0 + d) want += 0.5f * v[i * d + c - col0];
        EXPECT_FLOAT_EQ(y[r * ldy + c], want) << r << "," << c;
        EXPECT_NEAR(f(y16[r * ldy + c]), want, 0.02f * (1 + std::abs(want))) << r << "," << c;
      }
  }
}

}  // namespace
}  // namespace pith::cuda
