// ThreadPool: every task runs exactly once per job, worker indices are exclusive, parallel_for
// returns only after every task of its job has finished (so back-to-back jobs see each other's
// writes), sleeping workers wake for the next job, and the degenerate sizes run inline.
#include "common/thread_pool.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <set>
#include <thread>
#include <vector>

namespace pith {

namespace {
// One step of a deterministic recurrence that mixes a cell with its right neighbour, so a single
// wrong or missing cell spreads to the others and changes the final state.
uint64_t step(uint64_t self, uint64_t right, uint64_t round) {
  return self * 6364136223846793005ull + (right ^ (right >> 29)) + round;
}
}  // namespace

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
  std::atomic<bool> out_of_range{false}, overlap{false};
  pool.parallel_for(300, [&](size_t, size_t w) {
    if (w >= pool.size()) {
      out_of_range = true;
      return;
    }
    if (busy[w].fetch_add(1) != 0) overlap = true;
    volatile int spin = 0;
    for (int k = 0; k < 1000; ++k) spin = spin + k;
    busy[w].fetch_sub(1);
  });
  EXPECT_FALSE(out_of_range.load());
  EXPECT_FALSE(overlap.load());
}

TEST(ThreadPool, ManyConsecutiveJobsSeeEarlierResults) {
  // Round r computes next[i] = step(cur[i], cur[i + 1], r) from the cells round r - 1 wrote
  // (on any thread) into a second buffer, then the buffers swap. The result is deterministic, so
  // it must equal a sequential run bit for bit, and every round must have finished all its tasks
  // when parallel_for returns. Each thread's first task of a round waits until every thread has
  // one, and pool threads' tasks take longer than the caller's, so a parallel_for that returned
  // when the caller ran out of tasks (without waiting for the workers) fails the per-round count
  // at once; a worker running a stale job, or a task run twice or never, breaks the count or the
  // final state. Every 50th round pauses past the workers' spin window, so they go to sleep and
  // must be woken.
  constexpr size_t kCells = 61;  // not a multiple of the thread count
  constexpr uint64_t kRounds = 400;
  ThreadPool pool(3);
  std::vector<uint64_t> cur(kCells), next(kCells, 0), want(kCells), tmp(kCells);
  for (size_t i = 0; i < kCells; ++i) cur[i] = want[i] = i + 1;
  std::vector<std::atomic<uint64_t>> joined(pool.size());  // last round each thread joined
  std::atomic<size_t> arrived{0}, finished{0};
  for (uint64_t round = 1; round <= kRounds; ++round) {
    arrived.store(0);
    finished.store(0);
    pool.parallel_for(kCells, [&, round](size_t i, size_t w) {
      if (joined[w].exchange(round) != round) {
        arrived.fetch_add(1);
        while (arrived.load() < pool.size()) std::this_thread::yield();
      }
      const uint64_t value = step(cur[i], cur[(i + 1) % kCells], round);
      volatile uint64_t sink = 0;
      for (uint64_t k = w == 0 ? 0 : 20000; k > 0; --k) sink = sink + k;  // workers lag behind
      next[i] = value;
      finished.fetch_add(1);
    });
    ASSERT_EQ(finished.load(), kCells)
        << "parallel_for returned before its tasks finished, round " << round;
    std::swap(cur, next);
    for (size_t i = 0; i < kCells; ++i) tmp[i] = step(want[i], want[(i + 1) % kCells], round);
    std::swap(want, tmp);
    if (round % 50 == 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
      ASSERT_EQ(finished.load(), kCells)
          << "a task ran after parallel_for returned, round " << round;
    }
  }
  EXPECT_EQ(cur, want);
}

TEST(ThreadPool, EveryWorkerTakesPart) {
  // Tasks that wait until all workers have arrived: this completes only if the calling thread
  // and every pool thread run tasks of the same job concurrently (a hang fails by timeout).
  ThreadPool pool(3);
  std::atomic<size_t> arrived{0};
  std::vector<std::atomic<int>> per_worker(pool.size());
  pool.parallel_for(pool.size(), [&](size_t, size_t w) {
    per_worker[w].fetch_add(1);
    arrived.fetch_add(1);
    while (arrived.load() < pool.size()) std::this_thread::yield();
  });
  for (size_t w = 0; w < pool.size(); ++w) EXPECT_EQ(per_worker[w].load(), 1) << "worker " << w;
}

TEST(ThreadPool, SingleThreadRunsInline) {
  ThreadPool pool(1);
  std::set<size_t> workers;
  std::set<std::thread::id> threads;
  pool.parallel_for(10, [&](size_t, size_t w) {
    workers.insert(w);
    threads.insert(std::this_thread::get_id());
  });
  EXPECT_EQ(workers, std::set<size_t>{0});
  EXPECT_EQ(threads, std::set<std::thread::id>{std::this_thread::get_id()});
}

TEST(ThreadPool, ZeroTasksCallNothingAndOneTaskRunsInline) {
  ThreadPool pool(4);
  int calls = 0;
  pool.parallel_for(0, [&](size_t, size_t) { ++calls; });
  EXPECT_EQ(calls, 0);
  std::thread::id ran_on;
  pool.parallel_for(1, [&](size_t i, size_t w) {
    ++calls;
    EXPECT_EQ(i, 0u);
    EXPECT_EQ(w, 0u);
    ran_on = std::this_thread::get_id();
  });
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(ran_on, std::this_thread::get_id());
}

TEST(ThreadPool, ZeroThreadsMeansOnePerCore) {
  ThreadPool pool(0);
  EXPECT_EQ(pool.size(), std::max<size_t>(1, std::thread::hardware_concurrency()));
}

}  // namespace pith
