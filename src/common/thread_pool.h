// A persistent pool of worker threads for data-parallel kernels (matmul rows, attention heads).
//
// `parallel_for(n, fn)` runs fn(i, worker) for i in [0, n) across the workers and the calling
// thread, and returns when all are done. Kernels call it several times per layer, so dispatch
// latency matters: workers spin briefly on an atomic generation counter before sleeping on a
// condition variable (an idle pool uses no CPU).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace pith {

class ThreadPool {
 public:
  // n_threads counts the calling thread: ThreadPool(1) runs everything inline.
  // 0 means one per hardware core.
  explicit ThreadPool(size_t n_threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  size_t size() const { return n_threads_; }

  // fn(task, worker): worker is in [0, size()), distinct among concurrently running calls, so
  // it can index per-worker scratch buffers. Not reentrant: fn must not call parallel_for.
  void parallel_for(size_t n_tasks, const std::function<void(size_t, size_t)>& fn);

 private:
  void worker_loop(size_t worker);
  void run_tasks(size_t worker);

  size_t n_threads_;
  std::vector<std::thread> threads_;

  std::mutex mu_;
  std::condition_variable wake_;
  std::atomic<uint64_t> generation_{0};
  std::atomic<bool> stop_{false};

  // The current job (valid while a parallel_for is in flight).
  const std::function<void(size_t, size_t)>* job_ = nullptr;
  size_t n_tasks_ = 0;
  std::atomic<size_t> next_task_{0};
  std::atomic<size_t> pending_workers_{0};
};

}  // namespace pith
