// Instance: one running inferlet. It owns the guest's module instance (linear memory, tables),
// its fiber (guard-paged stack) and everything the guest holds through the ABI: futures, the
// client inbox, pub/sub subscriptions and its ModelSession. Every handle lives in this object,
// so a guest can only ever name its own resources.
//
// Life cycle: created by Runtime::launch, run by one Scheduler thread as a fiber. The guest runs
// inside GuestModule::run (native or interpreter tier), which returns how it ended (trap,
// proc_exit, CPU limit, kill) after freeing the module instance; back on the scheduler,
// finish() releases everything else and reports the ExitStatus ("exited with code 0", "trap: out of
// bounds memory access", "killed: cpu time limit 5 s") to the client. Other instances are never
// affected.
//
// Threading: the guest side (host calls) runs on the scheduler thread; the client side
// (push_message, kill, wait) and future completions may come from any thread, so the state they
// share is under mu_. A blocking host call parks the fiber (park()) and wake() makes it ready.
#pragma once

#include <pith/abi.h>
#include <boost/context/fiber.hpp>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "runtime/fiber_stack.h"
#include "runtime/guest_execution.h"

namespace pith::runtime {

class GuestModule;
class Scheduler;
class KvStore;
class PubSub;
class SharedState;
class ModelApi;
class ModelSession;
class HttpClient;

struct InstanceEvent {
  enum class Kind { Message, Log, Exit };
  Kind kind;
  int level = 0;     // PITH_LOG_* for kLog; ExitStatus::Kind for kExit
  std::string text;  // message bytes, log line, or exit reason
  int code = 0;      // kExit: the exit code
};
using EventSink = std::function<void(uint64_t instance_id, const InstanceEvent&)>;

struct ExitStatus {
  enum class Kind { Exited, Trapped, Killed };
  Kind kind = Kind::Exited;
  int code = 0;        // exit code (kExited)
  std::string reason;  // the text the client sees
};

struct InstanceLimits {
  uint32_t memory_pages = 1024;        // linear-memory cap: 64 MiB
  uint64_t cpu_ns = 5'000'000'000ull;  // CPU time: 5 s (0 = unlimited)
  size_t stack_bytes = 1 << 20;        // fiber stack (virtual; resident only when touched)
  size_t stack_guard_bytes = 64 << 10;
  size_t max_handles = 4096;           // live futures + subscriptions
  size_t max_message_bytes = 4 << 20;  // msg_send / broadcast / inbox message size
  size_t max_queued_messages = 4096;   // client inbox and each subscription
  // Messages out of the guest (msg_send, topic_broadcast, log, stdout/stderr lines) per second,
  // with a burst of one second's worth; over it a call fails with PITH_ERR_LIMIT (stdio lines are
  // dropped and counted). 0: unlimited. The default leaves room for the built-in completion
  // inferlet's one message per prompt token (echo with logprobs) at GPU prefill speed.
  uint32_t max_messages_per_second = 100000;
  uint64_t time_slice_ns = 20'000'000;  // CPU time before a spinning guest is preempted
};

// What an instance reaches outside itself; owned by the Runtime.
struct InstanceServices {
  Scheduler* scheduler = nullptr;
  KvStore* store = nullptr;
  PubSub* pubsub = nullptr;
  SharedState* shared = nullptr;  // --state-store: export records (nullptr: one process)
  ModelApi* model = nullptr;      // nullptr: model calls return PITH_ERR_NO_MODEL
  HttpClient* http = nullptr;     // nullptr: HTTP calls return PITH_ERR_NOT_ENABLED
};

class Instance : public std::enable_shared_from_this<Instance> {
 public:
  Instance(uint64_t id, std::shared_ptr<const GuestModule> module, std::vector<std::string> args,
           InstanceLimits limits, InstanceServices services, EventSink sink);
  ~Instance();
  Instance(const Instance&) = delete;
  Instance& operator=(const Instance&) = delete;

  // ---- client side (any thread) ----
  uint64_t id() const { return id_; }
  // Queues a message for the guest's msg_receive. False if the inbox is full or closed.
  bool push_message(std::string message);
  void close_input();  // pending and later receives complete with PITH_ERR_CLOSED
  void kill();         // ends the instance at its next safe point ("killed: by request")
  // Ends it the same way with the host's reason ("terminated: <reason>"), e.g. the contention
  // policy's "KV memory needed by an older inferlet".
  void terminate(std::string reason);
  ExitStatus wait();  // blocks until the instance has ended and released its resources
  std::optional<ExitStatus> exit_status() const;

  // ---- scheduler side ----
  void run_slice();  // resumes the fiber until it parks, yields or ends (scheduler thread only)
  bool ended() const { return started_ && !fiber_; }
  void finish();  // after ended(): releases resources and reports the exit
  void kill_with(TrapCode code);

  // ---- host-call side (on this instance's fiber) ----
  GuestExecution& exec() { return exec_; }
  const std::vector<std::string>& args() const { return args_; }
  const InstanceLimits& limits() const { return limits_; }
  const InstanceServices& services() const { return services_; }
  const char* tier() const;  // the GuestModule tier this instance runs in
  void emit(InstanceEvent event);
  // Takes one message from the rate budget (limits().max_messages_per_second); false: over it.
  bool take_message_credit();
  void write_stdio(int fd, std::string_view bytes);  // fd 1/2: split into log lines
  void park();       // until wake(); returns at once if a wake came in between
  void yield_now();  // lets the other ready instances run once
  void wake();       // any thread

  // Futures. Completion may come from any thread; completing an unknown (dropped) id is a no-op.
  pith_status_t new_future(uint32_t* id);
  void complete_future(uint32_t id, pith_status_t status, std::string result);
  pith_status_t poll_future(uint32_t id, bool* ready);
  pith_status_t wait_any(const std::vector<uint32_t>& ids, uint32_t* index);  // parks
  pith_status_t future_result(uint32_t id, const std::string** result, pith_status_t* status);
  pith_status_t drop_future(uint32_t id);
  // True while the future exists, is not completed and the instance has not ended (any thread):
  // work for a future that is no longer pending can be abandoned.
  bool future_pending(uint32_t id) const;

  // Client inbox.
  pith_status_t receive(uint32_t* future);

  // Pub/sub (the PubSub registry calls deliver()).
  pith_status_t subscribe(std::string topic, uint32_t* sub);
  pith_status_t unsubscribe(uint32_t sub);
  pith_status_t next_topic_message(uint32_t sub, uint32_t* future);
  void deliver(uint32_t sub, const std::string& message);

  ModelSession* model_session();  // opened on first use; nullptr without a model

 private:
  struct Future {
    bool done = false;
    pith_status_t status = PITH_OK;
    std::string result;
  };
  struct Subscription {
    std::string topic;
    std::deque<std::string> queued;
    std::deque<uint32_t> waiting;  // futures waiting for the next message
  };

  static void preempt_from_signal(void* self);
  void switch_to_scheduler();  // from the fiber; returns when resumed
  void body();                 // the fiber's body: module_->run(*this)
  std::string describe_trap(TrapCode code) const;
  uint32_t next_handle_locked();
  void complete_locked(uint32_t id, pith_status_t status, std::string result);

  const uint64_t id_;
  std::shared_ptr<const GuestModule> module_;
  std::vector<std::string> args_;
  InstanceLimits limits_;
  InstanceServices services_;
  EventSink sink_;

  // Guest state (scheduler thread only).
  GuestExecution exec_;
  StackBounds stack_;
  boost::context::fiber fiber_;               // the instance's fiber while suspended
  boost::context::fiber caller_;              // the scheduler, while the fiber runs
  const void* sched_stack_bottom_ = nullptr;  // the scheduler thread's stack (ASan builds)
  size_t sched_stack_size_ = 0;
  bool started_ = false;
  TrapCode end_code_ = TrapCode::None;
  std::string terminate_reason_;  // set by terminate() (guarded by mu_)
  std::string stdio_partial_[3];
  double message_credits_ = 0;  // the rate budget (guest fiber only)
  std::chrono::steady_clock::time_point credits_at_;
  uint64_t dropped_stdio_lines_ = 0;
  std::unique_ptr<ModelSession> model_session_;

  // Shared state.
  mutable std::mutex mu_;
  std::condition_variable ended_cv_;
  bool parked_ = false, wake_token_ = false;
  uint32_t next_handle_ = 1;
  std::unordered_map<uint32_t, Future> futures_;
  std::deque<std::string> inbox_;
  std::deque<uint32_t> receivers_;
  bool input_closed_ = false;
  std::map<uint32_t, Subscription> subs_;
  std::optional<ExitStatus> exit_;
};

}  // namespace pith::runtime
