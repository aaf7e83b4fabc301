#include "common/thread_pool.h"

#include <immintrin.h>

#include <chrono>

namespace pith {

namespace {
// How long a worker spins waiting for the next job before it sleeps. Long enough to bridge
// the gap between two matmuls of one forward pass, short enough that an idle pool is idle.
constexpr auto kSpin = std::chrono::microseconds(200);
// Pause iterations (~10-40 ns each) the caller spins for straggling workers before yielding.
constexpr int kWaitSpins = 4096;
}  // namespace

ThreadPool::ThreadPool(size_t n_threads) {
  if (n_threads == 0) n_threads = std::max<size_t>(1, std::thread::hardware_concurrency());
  n_threads_ = n_threads;
  for (size_t w = 1; w < n_threads_; ++w) threads_.emplace_back([this, w] { worker_loop(w); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard lock(mu_);
    stop_.store(true);
    generation_.fetch_add(1);
  }
  wake_.notify_all();
  for (auto& t : threads_) t.join();
}

void ThreadPool::parallel_for(size_t n_tasks, const std::function<void(size_t, size_t)>& fn) {
  if (n_tasks == 0) return;
  if (n_threads_ == 1 || n_tasks == 1) {
    for (size_t i = 0; i < n_tasks; ++i) fn(i, 0);
    return;
  }
  {
    std::lock_guard lock(mu_);
    job_ = &fn;
    n_tasks_ = n_tasks;
    next_task_.store(0, std::memory_order_relaxed);
    pending_workers_.store(threads_.size(), std::memory_order_relaxed);
    generation_.fetch_add(1, std::memory_order_release);
  }
  wake_.notify_all();
  run_tasks(0);
  // Wait for every worker to leave the job before `fn` goes out of scope. Spin briefly (the
  // usual case: workers finish their last task within microseconds), then yield so that a
  // descheduled worker on an oversubscribed machine gets the core instead of our spin.
  for (int spins = 0; pending_workers_.load(std::memory_order_acquire) != 0; ++spins) {
    if (spins < kWaitSpins)
      _mm_pause();
    else
      std::this_thread::yield();
  }
}

void ThreadPool::run_tasks(size_t worker) {
  for (;;) {
    size_t i = next_task_.fetch_add(1, std::memory_order_relaxed);
    if (i >= n_tasks_) break;
    (*job_)(i, worker);
  }
}

void ThreadPool::worker_loop(size_t worker) {
  uint64_t seen = 0;
  for (;;) {
    // Spin, then sleep, until a new generation is published.
    auto deadline = std::chrono::steady_clock::now() + kSpin;
    while (generation_.load(std::memory_order_acquire) == seen &&
           std::chrono::steady_clock::now() < deadline) {
      _mm_pause();
    }
    if (generation_.load(std::memory_order_acquire) == seen) {
      std::unique_lock lock(mu_);
      wake_.wait(lock, [&] { return generation_.load() != seen; });
    }
    seen = generation_.load(std::memory_order_acquire);
    if (stop_.load()) return;
    run_tasks(worker);
    pending_workers_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

}  // namespace pith
