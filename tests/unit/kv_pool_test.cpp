// KvPool and EmbedPool: sizing from a budget, free lists (all-or-nothing, double free), the
// page layout (tiles do not overlap), per-token writes and copies between pages.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>

#include "common/error.h"
#include "engine/embed_pool.h"
#include "engine/kv_pool.h"

namespace pith {
namespace {

const KvShape kShape{3, 2, 8, 4, {}};  // 3 layers, 2 KV heads of 8, 4-token pages

TEST(KvPool, SizesFromBudget) {
  EXPECT_EQ(kShape.page_elems(), size_t{3} * 2 * 4 * 16);
  EXPECT_EQ(kShape.page_bytes(), kShape.page_elems() * 4);
  KvPool pool(kShape, kShape.page_bytes() * 10 + 5);
  EXPECT_EQ(pool.n_pages(), 10u);
  EXPECT_EQ(pool.n_free(), 10u);
  EXPECT_THROW(KvPool(kShape, kShape.page_bytes() - 1), Error);
  EXPECT_THROW(KvPool(KvShape{0, 2, 8, 4, {}}, 1 << 20), Error);
  EXPECT_THROW(KvPool(KvShape{3, 2, 8, 0, {}}, 1 << 20), Error);
  EXPECT_THROW(KvPool(KvShape{3, 2, 8, 4, {}, KvDType::Auto}, 1 << 20), Error);
  // 16-bit elements: half the bytes per page, twice the pages in the same budget.
  const KvShape half{3, 2, 8, 4, {}, KvDType::F16};
  EXPECT_EQ(half.page_bytes() * 2, kShape.page_bytes());
  EXPECT_EQ(KvPool(half, kShape.page_bytes() * 10).n_pages(), 20u);
}

TEST(KvPool, AllocateFreeAllOrNothing) {
  KvPool pool(kShape, kShape.page_bytes() * 4);
  auto a = pool.allocate(3);
  EXPECT_EQ(a, (std::vector<uint32_t>{0, 1, 2}));
  EXPECT_TRUE(pool.allocated(1));
  EXPECT_THROW(pool.allocate(2), Error);  // only one left
  EXPECT_EQ(pool.n_free(), 1u);
  pool.free(std::vector<uint32_t>{2, 0});
  EXPECT_FALSE(pool.allocated(0));
  EXPECT_EQ(pool.n_free(), 3u);
  auto b = pool.allocate(3);
  std::set<uint32_t> got(b.begin(), b.end());
  EXPECT_EQ(got, (std::set<uint32_t>{0, 2, 3}));
}

TEST(KvPool, BadFreeChangesNothing) {
  KvPool pool(kShape, kShape.page_bytes() * 4);
  auto a = pool.allocate(2);                                    // 0, 1
  EXPECT_THROW(pool.free(std::vector<uint32_t>{0, 3}), Error);  // 3 not allocated
  EXPECT_THROW(pool.free(std::vector<uint32_t>{0, 9}), Error);  // out of range
  EXPECT_THROW(pool.free(std::vector<uint32_t>{1, 1}), Error);  // listed twice
  EXPECT_TRUE(pool.allocated(0));
  EXPECT_TRUE(pool.allocated(1));
  EXPECT_EQ(pool.n_free(), 2u);
  pool.free(a);
  EXPECT_THROW(pool.free(a), Error);  // double free
  EXPECT_EQ(pool.n_free(), 4u);
}

// Every (page, layer, k|v, head) tile is distinct and the tiles of a page tile it exactly.
TEST(KvPool, TilesPartitionThePage) {
  KvPool pool(kShape, kShape.page_bytes() * 2);
  const size_t tile = size_t{kShape.page_size} * kShape.head_dim * sizeof(float);
  std::set<const std::byte*> starts;
  for (uint32_t p = 0; p < 2; ++p)
    for (uint32_t l = 0; l < kShape.n_layers; ++l)
      for (uint32_t h = 0; h < kShape.n_kv_heads; ++h) {
        starts.insert(pool.k(p, l, h));
        starts.insert(pool.v(p, l, h));
      }
  ASSERT_EQ(starts.size(), size_t{2} * 3 * 2 * 2);
  std::vector<const std::byte*> v(starts.begin(), starts.end());
  for (size_t i = 1; i < v.size(); ++i) EXPECT_EQ(v[i] - v[i - 1], ptrdiff_t(tile));
}

// One (page, layer, k|v, head, slot) row read back as f32, element d.
float at(const KvPool& pool, uint32_t page, uint32_t layer, uint32_t kv, uint32_t head,
         uint32_t slot, uint32_t d) {
  std::vector<float> row(pool.shape().head_dim_of(layer));
  pool.read(page, layer, kv, head, slot, row.data());
  return row[d];
}

class KvPoolDType : public ::testing::TestWithParam<KvDType> {};

// Per-token writes scatter heads, copies move every layer (memmove inside a page), for each
// element type; the values (integers below 2^8) are exact in all three.
TEST_P(KvPoolDType, WriteScattersHeadsAndCopyMovesAllLayers) {
  KvShape shape = kShape;
  shape.dtype = GetParam();
  KvPool pool(shape, shape.page_bytes() * 2);
  const uint32_t kvd = shape.kv_dim(), hd = shape.head_dim;
  std::vector<float> k(kvd), v(kvd);
  for (uint32_t l = 0; l < 3; ++l)
    for (uint32_t s = 0; s < 4; ++s) {
      for (uint32_t i = 0; i < kvd; ++i) {
        k[i] = float(l * 64 + s * 16 + i);
        v[i] = -k[i];
      }
      pool.write(0, s, l, k.data(), v.data());
    }
  EXPECT_EQ(at(pool, 0, 2, 0, 1, 3, 5), float(2 * 64 + 3 * 16 + hd + 5));
  EXPECT_EQ(at(pool, 0, 1, 1, 0, 2, 7), -float(1 * 64 + 2 * 16 + 7));

  pool.copy(0, 1, 1, 0, 3);  // slots 1..3 of page 0 -> slots 0..2 of page 1
  for (uint32_t l = 0; l < 3; ++l)
    for (uint32_t h = 0; h < 2; ++h)
      for (uint32_t s = 0; s < 3; ++s)
        for (uint32_t i = 0; i < hd; ++i)
          for (uint32_t kv = 0; kv < 2; ++kv)
            EXPECT_EQ(at(pool, 1, l, kv, h, s, i), at(pool, 0, l, kv, h, s + 1, i));
  // Overlapping copy inside one page behaves like memmove.
  float before = at(pool, 0, 0, 0, 0, 0, 2);
  pool.copy(0, 0, 0, 1, 3);
  EXPECT_EQ(at(pool, 0, 0, 0, 0, 1, 2), before);
  EXPECT_THROW(pool.copy(0, 1, 2, 0, 3), Error);  // past the page end
  EXPECT_THROW(pool.copy(0, 5, 0, 0, 1), Error);  // bad page
}

// Writes round to the nearest representable value: within half a unit in the last place of
// the type (2^-11 relative for f16, 2^-8 for bf16), exact for f32.
TEST_P(KvPoolDType, WritesRoundToNearest) {
  KvShape shape = kShape;
  shape.dtype = GetParam();
  KvPool pool(shape, shape.page_bytes());
  std::vector<float> k(shape.kv_dim()), v(shape.kv_dim());
  for (uint32_t i = 0; i < k.size(); ++i) {
    k[i] = 1.0f / float(i + 3) - 0.01f * float(i);
    v[i] = 1000.0f * std::sin(float(i));
  }
  pool.write(0, 1, 0, k.data(), v.data());
  const double rel = GetParam() == KvDType::F32 ? 0 : GetParam() == KvDType::F16 ? 0x1p-11 : 0x1p-8;
  for (uint32_t h = 0; h < 2; ++h)
    for (uint32_t d = 0; d < shape.head_dim; ++d) {
      const uint32_t i = h * shape.head_dim + d;
      EXPECT_LE(std::abs(at(pool, 0, 0, 0, h, 1, d) - k[i]), rel * std::abs(k[i])) << i;
      EXPECT_LE(std::abs(at(pool, 0, 0, 1, h, 1, d) - v[i]), rel * std::abs(v[i])) << i;
    }
}

INSTANTIATE_TEST_SUITE_P(Types, KvPoolDType,
                         ::testing::Values(KvDType::F32, KvDType::F16, KvDType::BF16),
                         [](const ::testing::TestParamInfo<KvDType>& info) {
                           return std::string(kv_dtype_name(info.param));
                         });

// Layers of different shapes (gemma4: sliding layers with 2 KV heads of 8, a global layer with
// 1 head of 16): each layer's tiles have its own size, they partition the page, and writes and
// copies use each layer's shape.
TEST(KvPool, PerLayerShapesPartitionThePage) {
  const KvShape shape{3, 2, 8, 4, {{2, 8}, {1, 16}, {2, 8}}};
  EXPECT_EQ(shape.page_elems(), size_t{2} * 4 * (16 + 16 + 16));
  KvPool pool(shape, shape.page_bytes() * 2);
  std::vector<std::pair<const std::byte*, size_t>> tiles;  // start, bytes
  for (uint32_t p = 0; p < 2; ++p)
    for (uint32_t l = 0; l < 3; ++l)
      for (uint32_t h = 0; h < shape.heads_of(l); ++h) {
        const size_t n = size_t{4} * shape.head_dim_of(l) * sizeof(float);
        tiles.push_back({pool.k(p, l, h), n});
        tiles.push_back({pool.v(p, l, h), n});
      }
  std::sort(tiles.begin(), tiles.end());
  ASSERT_EQ(tiles.size(), size_t{2} * (4 + 2 + 4));
  EXPECT_EQ(tiles.front().first, pool.page(0));
  for (size_t i = 1; i < tiles.size(); ++i)
    EXPECT_EQ(tiles[i].first, tiles[i - 1].first + tiles[i - 1].second);
  EXPECT_EQ(tiles.back().first + tiles.back().second, pool.page(1) + shape.page_bytes());

  std::vector<float> k(16), v(16);
  std::iota(k.begin(), k.end(), 1.0f);
  std::iota(v.begin(), v.end(), 100.0f);
  pool.write(0, 2, 1, k.data(), v.data());  // the global layer: one head of 16
  EXPECT_EQ(at(pool, 0, 1, 0, 0, 2, 15), 16.0f);
  EXPECT_EQ(at(pool, 0, 1, 1, 0, 2, 0), 100.0f);
  pool.write(0, 1, 2, k.data(), v.data());  // a sliding layer: two heads of 8
  EXPECT_EQ(at(pool, 0, 2, 0, 1, 1, 0), 9.0f);
  pool.copy(0, 1, 2, 3, 1);
  EXPECT_EQ(at(pool, 1, 1, 0, 0, 3, 15), 16.0f);
  EXPECT_THROW(KvPool(KvShape{3, 2, 8, 4, {{2, 8}}}, 1 << 20), Error);  // shapes for 1 of 3
}

TEST(EmbedPool, AllocateFreeAndData) {
  EmbedPool e(4, 3);
  EXPECT_THROW(EmbedPool(0, 3), Error);
  auto s = e.allocate(2);
  EXPECT_EQ(s, (std::vector<uint32_t>{0, 1}));
  e.data(1)[3] = 7.0f;
  e.set_position(1, 42);
  EXPECT_EQ(e.data(1)[3], 7.0f);
  EXPECT_EQ(e.position(1), 42u);
  EXPECT_THROW(e.allocate(2), Error);
  EXPECT_THROW(e.free(std::vector<uint32_t>{0, 2}), Error);
  EXPECT_TRUE(e.allocated(0));
  e.free(s);
  EXPECT_EQ(e.n_free(), 3u);
  EXPECT_THROW(e.free(std::vector<uint32_t>{0}), Error);
}

}  // namespace
}  // namespace pith
