// KvPool and EmbedPool: sizing from a budget, free lists (all-or-nothing, double free), the
// page layout (tiles do not overlap), per-token writes and copies between pages.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <set>

#include "common/error.h"
#include "engine/embed_pool.h"
#include "engine/kv_pool.h"

namespace pith {
namespace {

const KvShape kShape{3, 2, 8, 4, {}};  // 3 layers, 2 KV heads of 8, 4-token pages

TEST(KvPool, SizesFromBudget) {
  EXPECT_EQ(kShape.page_floats(), size_t{3} * 2 * 4 * 16);
  KvPool pool(kShape, kShape.page_bytes() * 10 + 5);
  EXPECT_EQ(pool.n_pages(), 10u);
  EXPECT_EQ(pool.n_free(), 10u);
  EXPECT_THROW(KvPool(kShape, kShape.page_bytes() - 1), Error);
  EXPECT_THROW(KvPool(KvShape{0, 2, 8, 4, {}}, 1 << 20), Error);
  EXPECT_THROW(KvPool(KvShape{3, 2, 8, 0, {}}, 1 << 20), Error);
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
  const size_t tile = size_t{kShape.page_size} * kShape.head_dim;
  std::set<const float*> starts;
  for (uint32_t p = 0; p < 2; ++p)
    for (uint32_t l = 0; l < kShape.n_layers; ++l)
      for (uint32_t h = 0; h < kShape.n_kv_heads; ++h) {
        starts.insert(pool.k(p, l, h));
        starts.insert(pool.v(p, l, h));
      }
  ASSERT_EQ(starts.size(), size_t{2} * 3 * 2 * 2);
  std::vector<const float*> v(starts.begin(), starts.end());
  for (size_t i = 1; i < v.size(); ++i) EXPECT_EQ(v[i] - v[i - 1], ptrdiff_t(tile));
}

TEST(KvPool, WriteScattersHeadsAndCopyMovesAllLayers) {
  KvPool pool(kShape, kShape.page_bytes() * 2);
  const uint32_t kvd = kShape.kv_dim(), hd = kShape.head_dim;
  std::vector<float> k(kvd), v(kvd);
  for (uint32_t l = 0; l < 3; ++l)
    for (uint32_t s = 0; s < 4; ++s) {
      for (uint32_t i = 0; i < kvd; ++i) {
        k[i] = float(l * 1000 + s * 100 + i);
        v[i] = -k[i];
      }
      pool.write(0, s, l, k.data(), v.data());
    }
  EXPECT_EQ(pool.k(0, 2, 1)[3 * hd + 5], float(2 * 1000 + 3 * 100 + hd + 5));
  EXPECT_EQ(pool.v(0, 1, 0)[2 * hd + 7], -float(1 * 1000 + 2 * 100 + 7));

  pool.copy(0, 1, 1, 0, 3);  // slots 1..3 of page 0 -> slots 0..2 of page 1
  for (uint32_t l = 0; l < 3; ++l)
    for (uint32_t h = 0; h < 2; ++h)
      for (uint32_t s = 0; s < 3; ++s)
        for (uint32_t i = 0; i < hd; ++i) {
          EXPECT_EQ(pool.k(1, l, h)[s * hd + i], pool.k(0, l, h)[(s + 1) * hd + i]);
          EXPECT_EQ(pool.v(1, l, h)[s * hd + i], pool.v(0, l, h)[(s + 1) * hd + i]);
        }
  // Overlapping copy inside one page behaves like memmove.
  float before = pool.k(0, 0, 0)[0 * hd + 2];
  pool.copy(0, 0, 0, 1, 3);
  EXPECT_EQ(pool.k(0, 0, 0)[1 * hd + 2], before);
  EXPECT_THROW(pool.copy(0, 1, 2, 0, 3), Error);  // past the page end
  EXPECT_THROW(pool.copy(0, 5, 0, 0, 1), Error);  // bad page
}

// Layers of different shapes (gemma4: sliding layers with 2 KV heads of 8, a global layer with
// 1 head of 16): each layer's tiles have its own size, they partition the page, and writes and
// copies use each layer's shape.
TEST(KvPool, PerLayerShapesPartitionThePage) {
  const KvShape shape{3, 2, 8, 4, {{2, 8}, {1, 16}, {2, 8}}};
  EXPECT_EQ(shape.page_floats(), size_t{2} * 4 * (16 + 16 + 16));
  KvPool pool(shape, shape.page_bytes() * 2);
  std::vector<std::pair<const float*, size_t>> tiles;  // start, floats
  for (uint32_t p = 0; p < 2; ++p)
    for (uint32_t l = 0; l < 3; ++l)
      for (uint32_t h = 0; h < shape.heads_of(l); ++h) {
        const size_t n = size_t{4} * shape.head_dim_of(l);
        tiles.push_back({pool.k(p, l, h), n});
        tiles.push_back({pool.v(p, l, h), n});
      }
  std::sort(tiles.begin(), tiles.end());
  ASSERT_EQ(tiles.size(), size_t{2} * (4 + 2 + 4));
  EXPECT_EQ(tiles.front().first, pool.page(0));
  for (size_t i = 1; i < tiles.size(); ++i)
    EXPECT_EQ(tiles[i].first, tiles[i - 1].first + tiles[i - 1].second);
  EXPECT_EQ(tiles.back().first + tiles.back().second, pool.page(1) + shape.page_floats());

  std::vector<float> k(16), v(16);
  std::iota(k.begin(), k.end(), 1.0f);
  std::iota(v.begin(), v.end(), 100.0f);
  pool.write(0, 2, 1, k.data(), v.data());  // the global layer: one head of 16
  EXPECT_EQ(pool.k(0, 1, 0)[2 * 16 + 15], 16.0f);
  EXPECT_EQ(pool.v(0, 1, 0)[2 * 16 + 0], 100.0f);
  pool.write(0, 1, 2, k.data(), v.data());  // a sliding layer: two heads of 8
  EXPECT_EQ(pool.k(0, 2, 1)[1 * 8 + 0], 9.0f);
  pool.copy(0, 1, 2, 3, 1);
  EXPECT_EQ(pool.k(1, 1, 0)[3 * 16 + 15], 16.0f);
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
