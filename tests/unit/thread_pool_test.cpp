#include "common/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <numeric>
#include <set>
#include <vector>

namespace pith {

TEST(ThreadPool, RunsEveryTaskExactlyOnce) {
  ThreadPool pool(4);
  for (size_t n : {1u, 2u, 3u, 17u, 1000u}) {
    std::vector<std::atomic<int>> hits(n);
    pool.parallel_for(n, [&](size_t i, size_t) { hits[i].fetch_add(1); });
    for (size_t i = 0; i < n; ++i) EXPECT_EQ(hits[i].load(), 1) << "n=" << n << " i=" << i;
  }
}

TEST(ThreadPool, WorkerIndexIsInRangeAndExclusive) {
  ThreadPool pool(3);
  std::vector<std::atomic<int>> busy(pool.size());
  std::atomic<bool> overlap{false};
  pool.parallel_for(300, [&](size_t, size_t w) {
    ASSERT_LT(w, pool.size());
    if (busy[w].fetch_add(1) != 0) overlap = true;
    volatile int spin = 0;
    for (int k = 0; k < 1000; ++k) spin = spin + k;
    busy[w].fetch_sub(1);
  });
  EXPECT_FALSE(overlap.load());
}

TEST(ThreadPool, ManyConsecutiveJobsSeeEarlierResults) {
  // Back-to-back jobs, each reading what the previous one wrote: catches a worker that runs
  // a stale job or a parallel_for that returns before its workers are done.
  ThreadPool pool(2);
  std::vector<int64_t> v(64, 1);
  for (int round = 0; round < 2000; ++round) {
    pool.parallel_for(v.size(), [&](size_t i, size_t) { v[i] = v[i] + v[(i + 1) % v.size()] % 7; });
  }
  int64_t sum = std::accumulate(v.begin(), v.end(), int64_t{0});
  // Recompute sequentially is not equivalent (parallel reads race by design), so check a
  // property that holds either way: every entry grew each round.
  for (auto x : v) EXPECT_GE(x, 2000);
  EXPECT_GT(sum, 0);
}

TEST(ThreadPool, SingleThreadRunsInline) {
  ThreadPool pool(1);
  std::set<size_t> workers;
  pool.parallel_for(10, [&](size_t, size_t w) { workers.insert(w); });
  EXPECT_EQ(workers, std::set<size_t>{0});
}

}  // namespace pith
