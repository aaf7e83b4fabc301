// The radix prefix cache over a real (tiny) KV pool, without a model.
#include "control/prefix_cache.h"

#include <gtest/gtest.h>

#include <numeric>

namespace pith {

namespace {

constexpr uint32_t kPage = 4;

struct Fixture {
  SlotPool pool{64, "KV pages"};
  RefCounts refs{pool};
  PrefixCache cache{refs, kPage};

  // Allocates pages as an inferlet would, computes nothing (the cache never reads K/V).
  std::vector<uint32_t> alloc(uint32_t n) {
    std::vector<uint32_t> p;
    EXPECT_TRUE(refs.allocate(n, p));
    return p;
  }
  void drop(const std::vector<uint32_t>& pages) { refs.release(pages); }
};

std::vector<int32_t> seq(int32_t start, size_t n) {
  std::vector<int32_t> v(n);
  std::iota(v.begin(), v.end(), start);
  return v;
}

}  // namespace

TEST(PrefixCache, MatchesWholePagesOfTheLongestCachedPrefix) {
  Fixture f;
  auto prompt = seq(100, 10);  // 2 full pages + 2 tokens
  auto pages = f.alloc(3);
  EXPECT_EQ(f.cache.insert(prompt, pages), 2u);  // only full pages are cached
  EXPECT_EQ(f.cache.stats().cached_pages, 2u);

  auto other = prompt;
  other[6] = -1;  // diverges inside the second page
  std::vector<uint32_t> got;
  EXPECT_EQ(f.cache.match(other, got), 4u);
  EXPECT_EQ(got, (std::vector<uint32_t>{pages[0]}));
  got.clear();
  EXPECT_EQ(f.cache.match(prompt, got), 8u);
  EXPECT_EQ(got, (std::vector<uint32_t>{pages[0], pages[1]}));
  EXPECT_EQ(f.refs.count(pages[0]), 4u);  // inferlet + cache + two matches
  EXPECT_EQ(f.cache.stats().hit_tokens, 12u);
  EXPECT_EQ(f.cache.stats().miss_tokens, 6u + 2u);
}

// K/V computed under a LoRA adapter is another model's: entries are keyed by adapter too.
TEST(PrefixCache, EntriesOfOneAdapterNeverMatchAnotherOrTheBase) {
  Fixture f;
  auto prompt = seq(100, 8);
  auto base_pages = f.alloc(2), a_pages = f.alloc(2);
  EXPECT_EQ(f.cache.insert(prompt, base_pages), 2u);
  std::vector<uint32_t> got;
  EXPECT_EQ(f.cache.match(prompt, got, /*adapter=*/7), 0u);
  EXPECT_TRUE(got.empty());
  EXPECT_EQ(f.cache.insert(prompt, a_pages, 7), 2u);  // its own copy beside the base's
  EXPECT_EQ(f.cache.match(prompt, got, 7), 8u);
  EXPECT_EQ(got, a_pages);
  got.clear();
  EXPECT_EQ(f.cache.match(prompt, got), 8u);
  EXPECT_EQ(got, base_pages);
  got.clear();
  EXPECT_EQ(f.cache.match(prompt, got, 8), 0u);
  EXPECT_EQ(f.cache.stats().cached_pages, 4u);
}

TEST(PrefixCache, ConcurrentInsertsOfOnePrefixKeepOneCopy) {
  Fixture f;
  auto prompt = seq(7, 8);
  auto a = f.alloc(2), b = f.alloc(2);
  EXPECT_EQ(f.cache.insert(prompt, a), 2u);
  EXPECT_EQ(f.cache.insert(prompt, b), 0u);  // second inserter's pages are not adopted
  f.drop(b);
  EXPECT_EQ(f.refs.count(b[0]), 0u);
  std::vector<uint32_t> got;
  f.cache.match(prompt, got);
  EXPECT_EQ(got, a);
  f.drop(got);
  f.drop(a);
  EXPECT_EQ(f.cache.stats().cached_pages, 2u);
}

TEST(PrefixCache, EvictsLeastRecentlyUsedUnreferencedLeavesOnly) {
  Fixture f;
  // Two prompts sharing their first page: tree root -> P0 -> {P1a, P1b}.
  auto a = seq(0, 8), b = seq(0, 8);
  b[5] = 999;
  auto pa = f.alloc(2), pb = f.alloc(2);
  f.cache.insert(a, pa);
  f.cache.insert(b, pb);
  f.drop(pa);
  f.drop(pb);  // pb[0] was not adopted (shared first page): it is free now
  EXPECT_EQ(f.cache.stats().cached_pages, 3u);
  uint32_t free_before = f.refs.n_free();

  // Use prompt a again (it becomes most recent), then hold b's leaf as a running inferlet.
  std::vector<uint32_t> held;
  f.cache.match(b, held);
  std::vector<uint32_t> tmp;
  f.cache.match(a, tmp);
  f.drop(tmp);

  // b's leaf is referenced: evicting must take a's leaf (the only unreferenced leaf) and then
  // stop: the shared internal page is still needed by b's path.
  EXPECT_EQ(f.cache.evictable_pages(), 1u);
  EXPECT_EQ(f.cache.evict(10), 1u);
  EXPECT_EQ(f.refs.n_free(), free_before + 1);
  std::vector<uint32_t> again;
  EXPECT_EQ(f.cache.match(a, again), 4u);  // the shared first page survived
  f.drop(again);

  // Once b is released, everything can go, leaves before their parents.
  f.drop(held);
  EXPECT_EQ(f.cache.evictable_pages(), 2u);
  EXPECT_EQ(f.cache.evict(10), 2u);
  EXPECT_EQ(f.cache.stats().cached_pages, 0u);
  EXPECT_EQ(f.refs.n_free(), f.pool.capacity());
}

TEST(PrefixCache, LruOrderAcrossLeaves) {
  Fixture f;
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < 3; ++i) {
    prompts.push_back(seq(1000 * i, 4));
    auto p = f.alloc(1);
    f.cache.insert(prompts.back(), p);
    f.drop(p);
  }
  // Touch prompt 0: prompt 1 is now the least recently used.
  std::vector<uint32_t> t;
  f.cache.match(prompts[0], t);
  f.drop(t);
  EXPECT_EQ(f.cache.evict(1), 1u);
  t.clear();
  EXPECT_EQ(f.cache.match(prompts[1], t), 0u);
  EXPECT_EQ(f.cache.match(prompts[0], t), 4u);
  EXPECT_EQ(f.cache.match(prompts[2], t), 4u);
  f.drop(t);
}

}  // namespace pith
