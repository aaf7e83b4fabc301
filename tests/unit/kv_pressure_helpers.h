// What the KV-pressure tests share (kv_suspension_test.cpp, kv_recompute_test.cpp): a small
// FakeBackend pool, a waker that counts wake-ups as a parked guest would see them, and calls
// that block until they complete or retry after each wake.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <vector>

#include "control/controller.h"
#include "engine/fake_backend.h"

namespace pith {

using namespace std::chrono_literals;

inline ModelConfig fake_config() {
  ModelConfig c;
  c.vocab_size = 1000;
  c.d_model = 16;
  return c;
}

inline std::unique_ptr<FakeBackend> fake(uint32_t pages) {
  return std::make_unique<FakeBackend>(fake_config(), FakeBackendOptions{4, pages, 32});
}

// Counts wake-ups; what a parked guest would be told.
class Waker {
 public:
  std::function<void()> fn() {
    return [this] {
      std::lock_guard lock(mu_);
      ++n_;
      cv_.notify_all();
    };
  }
  bool wait_for(int n) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, 10s, [&] { return n_ >= n; });
  }
  int count() {
    std::lock_guard lock(mu_);
    return n_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int n_ = 0;
};

inline SequenceInput prompt(std::vector<int32_t> tokens, uint32_t first_pos,
                            std::vector<uint32_t> pages, uint32_t last_len) {
  SequenceInput s;
  s.tokens = std::move(tokens);
  for (size_t i = 0; i < s.tokens.size(); ++i)
    s.positions.push_back(first_pos + static_cast<uint32_t>(i));
  s.kv_pages = std::move(pages);
  s.last_page_len = last_len;
  s.outputs.push_back({static_cast<uint32_t>(s.tokens.size() - 1), OutputKind::TopK, 5, 0});
  return s;
}

inline CallOutcome run(Controller& ctl, InstanceId id, QueueId q, SequenceInput seq) {
  std::promise<CallOutcome> p;
  auto r = ctl.forward(id, q, std::move(seq), [&](CallOutcome&& o) { p.set_value(std::move(o)); });
  if (!r) return r.failure();
  return p.get_future().get();
}

inline std::vector<uint32_t> alloc(Controller& ctl, InstanceId id, uint32_t n) {
  auto r = ctl.alloc_pages(id, n);
  EXPECT_TRUE(r.ok()) << r;
  return r.ok() ? *r : std::vector<uint32_t>{};
}

// Calls again after each wake until the answer is no longer Waiting (a parked guest's loop).
inline Result<std::vector<uint32_t>> alloc_waiting(Controller& ctl, InstanceId id, uint32_t n,
                                                   Waker& waker) {
  for (int wakes = waker.count();; wakes = waker.count()) {
    auto r = ctl.alloc_pages(id, n);
    if (r.code() != Status::Waiting) return r;
    if (!waker.wait_for(wakes + 1)) return Failure{Status::Terminated, "never woken"};
  }
}

// The tokens a 12-token context of instance `seed` holds (3 pages of 4).
inline std::vector<int32_t> context_of(int seed) {
  std::vector<int32_t> t;
  for (int i = 0; i < 12; ++i) t.push_back(10 + seed * 100 + i);
  return t;
}

// Instances 1 (older) and 2 (newer, with a queue) that wait under pressure, as most of these
// tests start.
struct TwoInstances {
  Waker w1, w2;
  QueueId q2 = 0;
  explicit TwoInstances(Controller& ctl, KillFn on_kill1 = nullptr, KillFn on_kill2 = nullptr) {
    ctl.register_instance(1, std::move(on_kill1));
    ctl.register_instance(2, std::move(on_kill2));
    ctl.set_waker(1, w1.fn());
    ctl.set_waker(2, w2.fn());
    q2 = *ctl.create_queue(2);
  }
};

// An unpressured controller with instance 9 and a queue: what a pressured instance's outputs
// are compared with.
struct Reference {
  std::unique_ptr<Backend> backend;
  std::unique_ptr<Controller> ctl;
  QueueId q = 0;
  explicit Reference(std::unique_ptr<Backend> b) : backend(std::move(b)) {
    ctl = std::make_unique<Controller>(*backend, ControllerOptions{});
    ctl->register_instance(9, nullptr);
    q = *ctl->create_queue(9);
  }
};

}  // namespace pith
