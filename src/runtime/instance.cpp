// One running inferlet: fiber, trap boundary, futures, inbox, subscriptions. See instance.h.
#include "runtime/instance.h"

#include <cstdlib>
#include <cstring>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/common_interface_defs.h>
#endif

#include "common/error.h"
#include "runtime/guest_module.h"
#include "runtime/model_api.h"
#include "runtime/pubsub.h"
#include "runtime/scheduler.h"

namespace pith::runtime {

namespace ctx = boost::context;

// AddressSanitizer must be told about every stack switch (Debian's boost.context is built
// without its own annotations); these are no-ops in normal builds.
#if defined(__SANITIZE_ADDRESS__)
namespace {
void asan_start_switch(void** fake, const void* bottom, size_t size) {
  __sanitizer_start_switch_fiber(fake, bottom, size);
}
void asan_finish_switch(void* fake, const void** bottom_old, size_t* size_old) {
  __sanitizer_finish_switch_fiber(fake, bottom_old, size_old);
}
}  // namespace
#else
namespace {
void asan_start_switch(void**, const void*, size_t) {}
void asan_finish_switch(void*, const void**, size_t*) {}
}  // namespace
#endif

Instance::Instance(uint64_t id, std::shared_ptr<const GuestModule> module,
                   std::vector<std::string> args, InstanceLimits limits, InstanceServices services,
                   EventSink sink)
    : id_(id),
      module_(std::move(module)),
      args_(std::move(args)),
      limits_(limits),
      services_(services),
      sink_(std::move(sink)) {
  exec_.memory_limit_pages = limits_.memory_pages;
  exec_.cpu_limit_ns = limits_.cpu_ns;
  exec_.slice_limit_ns = limits_.time_slice_ns;
  exec_.preempt = &Instance::preempt_from_signal;
  exec_.owner = this;
}

void Instance::preempt_from_signal(void* self) {
  static_cast<Instance*>(self)->yield_now();
}

Instance::~Instance() = default;

const char* Instance::tier() const {
  return module_->tier();
}

// ---------------------------------------------------------------- client side

bool Instance::push_message(std::string message) {
  std::lock_guard lock(mu_);
  if (input_closed_ || exit_ || message.size() > limits_.max_message_bytes) return false;
  while (!receivers_.empty()) {
    uint32_t f = receivers_.front();
    receivers_.pop_front();
    if (futures_.count(f)) {  // skip receives the guest already dropped
      complete_locked(f, PITH_OK, std::move(message));
      return true;
    }
  }
  if (inbox_.size() >= limits_.max_queued_messages) return false;
  inbox_.push_back(std::move(message));
  return true;
}

void Instance::close_input() {
  std::lock_guard lock(mu_);
  input_closed_ = true;
  while (!receivers_.empty()) {
    complete_locked(receivers_.front(), PITH_ERR_CLOSED, {});
    receivers_.pop_front();
  }
}

void Instance::kill() {
  kill_with(TrapCode::Killed);
}

void Instance::terminate(std::string reason) {
  {
    std::lock_guard lock(mu_);
    if (terminate_reason_.empty()) terminate_reason_ = std::move(reason);
  }
  kill_with(TrapCode::Killed);
}

void Instance::kill_with(TrapCode code) {
  if (!exec_.kill_pending) exec_.kill_pending = static_cast<int>(code);
  wake();
}

ExitStatus Instance::wait() {
  std::unique_lock lock(mu_);
  ended_cv_.wait(lock, [&] { return exit_.has_value(); });
  return *exit_;
}

std::optional<ExitStatus> Instance::exit_status() const {
  std::lock_guard lock(mu_);
  return exit_;
}

// ---------------------------------------------------------------- fiber and trap boundary

void Instance::run_slice() {
  exec_.slice_ns = 0;
  set_current_execution(&exec_);
  if (!started_) {
    started_ = true;
    fiber_ = ctx::fiber(std::allocator_arg,
                        GuardedStack(limits_.stack_bytes, limits_.stack_guard_bytes, &stack_),
                        [this](ctx::fiber&& caller) {
                          asan_finish_switch(nullptr, &sched_stack_bottom_, &sched_stack_size_);
                          caller_ = std::move(caller);
                          body();
                          asan_start_switch(nullptr, sched_stack_bottom_, sched_stack_size_);
                          return std::move(caller_);
                        });
  }
  void* fake = nullptr;
  asan_start_switch(&fake, reinterpret_cast<const void*>(stack_.stack_lo),
                    stack_.stack_hi - stack_.stack_lo);
  fiber_ = std::move(fiber_).resume();
  asan_finish_switch(fake, nullptr, nullptr);
  set_current_execution(nullptr);
}

void Instance::body() {
  exec_.guard_lo = stack_.guard_lo;
  exec_.stack_lo = stack_.stack_lo;
  exec_.stack_hi = stack_.stack_hi;
  if (exec_.kill_pending) {  // killed before it ever ran
    end_code_ = static_cast<TrapCode>(exec_.kill_pending);
    return;
  }
  end_code_ = module_->run(*this);
}

void Instance::park() {
  {
    std::lock_guard lock(mu_);
    if (wake_token_) {
      wake_token_ = false;
      return;
    }
    parked_ = true;
  }
  switch_to_scheduler();
}

void Instance::switch_to_scheduler() {
  void* fake = nullptr;
  asan_start_switch(&fake, sched_stack_bottom_, sched_stack_size_);
  caller_ = std::move(caller_).resume();
  asan_finish_switch(fake, &sched_stack_bottom_, &sched_stack_size_);
}

void Instance::yield_now() {
  services_.scheduler->make_ready(shared_from_this());
  switch_to_scheduler();
}

void Instance::wake() {
  std::shared_ptr<Instance> self;
  {
    std::lock_guard lock(mu_);
    if (!parked_) {
      wake_token_ = true;
      return;
    }
    parked_ = false;
    self = weak_from_this().lock();
  }
  if (self) services_.scheduler->make_ready(std::move(self));
}

std::string Instance::describe_trap(TrapCode code) const {
  switch (code) {
    case TrapCode::None:
      return "exited with code 0";
    case TrapCode::Exit:
      return fmt::format("exited with code {}", exec_.exit_code);
    case TrapCode::CpuLimit:
      return fmt::format("killed: cpu time limit {:g} s", limits_.cpu_ns / 1e9);
    case TrapCode::Killed: {
      std::lock_guard lock(mu_);
      return terminate_reason_.empty() ? "killed: by request" : "terminated: " + terminate_reason_;
    }
    case TrapCode::MemoryLimit:
      return fmt::format("killed: memory limit {} MiB (the module's initial memory is larger)",
                         limits_.memory_pages / 16);
    case TrapCode::HostError:
      return "killed: host error (see log)";
    default:
      break;
  }
  std::string r = fmt::format("trap: {}", trap_text(code));
  if (exec_.grow_refused)
    r += fmt::format(" (after memory.grow was refused by the memory limit of {} MiB)",
                     limits_.memory_pages / 16);
  return r;
}

void Instance::finish() {
  fiber_ = {};  // already empty; the stack went with the fiber's end
  // Flush partial stdout/stderr lines.
  for (int fd = 1; fd <= 2; ++fd) {
    if (!stdio_partial_[fd].empty()) {
      emit({InstanceEvent::Kind::Log, fd == 2 ? PITH_LOG_WARN : PITH_LOG_INFO,
            std::move(stdio_partial_[fd])});
      stdio_partial_[fd].clear();
    }
  }
  model_session_.reset();  // releases KV pages, embeddings, queues
  std::map<uint32_t, Subscription> subs;
  {
    std::lock_guard lock(mu_);
    subs.swap(subs_);
  }
  for (auto& [id, s] : subs) services_.pubsub->unsubscribe(s.topic, this, id);

  ExitStatus st;
  st.reason = describe_trap(end_code_);
  if (end_code_ == TrapCode::None || end_code_ == TrapCode::Exit) {
    st.kind = ExitStatus::Kind::Exited;
    st.code = end_code_ == TrapCode::Exit ? exec_.exit_code : 0;
  } else if (end_code_ >= TrapCode::CpuLimit) {
    st.kind = ExitStatus::Kind::Killed;
  } else {
    st.kind = ExitStatus::Kind::Trapped;
  }
  emit({InstanceEvent::Kind::Exit, static_cast<int>(st.kind), st.reason, st.code});
  {
    std::lock_guard lock(mu_);
    futures_.clear();
    inbox_.clear();
    receivers_.clear();
    exit_ = st;
  }
  ended_cv_.notify_all();
}

// ---------------------------------------------------------------- events

void Instance::emit(InstanceEvent event) {
  if (sink_) sink_(id_, event);
}

bool Instance::take_message_credit() {
  const double rate = limits_.max_messages_per_second;
  if (rate == 0) return true;
  auto now = std::chrono::steady_clock::now();
  if (credits_at_ == std::chrono::steady_clock::time_point{}) {
    message_credits_ = rate;  // a full burst to start with
  } else {
    message_credits_ = std::min(
        rate, message_credits_ + rate * std::chrono::duration<double>(now - credits_at_).count());
  }
  credits_at_ = now;
  if (message_credits_ < 1) return false;
  message_credits_ -= 1;
  return true;
}

void Instance::write_stdio(int fd, std::string_view bytes) {
  std::string& partial = stdio_partial_[fd == 2 ? 2 : 1];
  int level = fd == 2 ? PITH_LOG_WARN : PITH_LOG_INFO;
  for (char c : bytes) {
    if (c == '\n') {
      if (!take_message_credit()) {
        ++dropped_stdio_lines_;
      } else {
        if (dropped_stdio_lines_)
          emit({InstanceEvent::Kind::Log, PITH_LOG_WARN,
                std::to_string(dropped_stdio_lines_) +
                    " output line(s) dropped: over the message rate limit"});
        dropped_stdio_lines_ = 0;
        emit({InstanceEvent::Kind::Log, level, std::move(partial)});
      }
      partial.clear();
    } else if (partial.size() < 64 * 1024) {
      partial += c;
    }
  }
}

// ---------------------------------------------------------------- futures

uint32_t Instance::next_handle_locked() {
  return next_handle_++;
}

pith_status_t Instance::new_future(uint32_t* id) {
  std::lock_guard lock(mu_);
  if (futures_.size() + subs_.size() >= limits_.max_handles) return PITH_ERR_LIMIT;
  *id = next_handle_locked();
  futures_.emplace(*id, Future{});
  return PITH_OK;
}

void Instance::complete_locked(uint32_t id, pith_status_t status, std::string result) {
  auto it = futures_.find(id);
  if (it == futures_.end() || it->second.done) return;
  it->second.done = true;
  it->second.status = status;
  it->second.result = std::move(result);
  if (parked_) {
    parked_ = false;
    if (auto self = weak_from_this().lock()) services_.scheduler->make_ready(std::move(self));
  } else {
    wake_token_ = true;
  }
}

void Instance::complete_future(uint32_t id, pith_status_t status, std::string result) {
  std::lock_guard lock(mu_);
  complete_locked(id, status, std::move(result));
}

pith_status_t Instance::poll_future(uint32_t id, bool* ready) {
  std::lock_guard lock(mu_);
  auto it = futures_.find(id);
  if (it == futures_.end()) return PITH_ERR_BAD_HANDLE;
  *ready = it->second.done;
  return PITH_OK;
}

pith_status_t Instance::wait_any(const std::vector<uint32_t>& ids, uint32_t* index) {
  for (;;) {
    {
      std::lock_guard lock(mu_);
      for (size_t i = 0; i < ids.size(); ++i) {
        auto it = futures_.find(ids[i]);
        if (it == futures_.end()) return PITH_ERR_BAD_HANDLE;
        if (it->second.done) {
          *index = static_cast<uint32_t>(i);
          return it->second.status;
        }
      }
    }
    if (exec_.kill_pending) return PITH_ERR_CANCELLED;  // the host-call boundary ends it
    park();
  }
}

pith_status_t Instance::future_result(uint32_t id, const std::string** result,
                                      pith_status_t* status) {
  std::lock_guard lock(mu_);
  auto it = futures_.find(id);
  if (it == futures_.end()) return PITH_ERR_BAD_HANDLE;
  if (!it->second.done) return PITH_ERR_PENDING;
  *result = &it->second.result;  // stable until drop_future (guest thread only)
  *status = it->second.status;
  return PITH_OK;
}

pith_status_t Instance::drop_future(uint32_t id) {
  std::lock_guard lock(mu_);
  if (futures_.erase(id) == 0) return PITH_ERR_BAD_HANDLE;
  return PITH_OK;
}

bool Instance::future_pending(uint32_t id) const {
  std::lock_guard lock(mu_);
  if (exit_) return false;
  auto it = futures_.find(id);
  return it != futures_.end() && !it->second.done;
}

// ---------------------------------------------------------------- inbox

pith_status_t Instance::receive(uint32_t* future) {
  std::lock_guard lock(mu_);
  if (futures_.size() + subs_.size() >= limits_.max_handles) return PITH_ERR_LIMIT;
  uint32_t id = next_handle_locked();
  futures_.emplace(id, Future{});
  *future = id;
  if (!inbox_.empty()) {
    complete_locked(id, PITH_OK, std::move(inbox_.front()));
    inbox_.pop_front();
  } else if (input_closed_) {
    complete_locked(id, PITH_ERR_CLOSED, {});
  } else {
    receivers_.push_back(id);
  }
  return PITH_OK;
}

// ---------------------------------------------------------------- pub/sub

pith_status_t Instance::subscribe(std::string topic, uint32_t* sub) {
  {
    std::lock_guard lock(mu_);
    if (futures_.size() + subs_.size() >= limits_.max_handles) return PITH_ERR_LIMIT;
    *sub = next_handle_locked();
    subs_[*sub].topic = topic;
  }
  services_.pubsub->subscribe(topic, shared_from_this(), *sub);
  return PITH_OK;
}

pith_status_t Instance::unsubscribe(uint32_t sub) {
  std::string topic;
  {
    std::lock_guard lock(mu_);
    auto it = subs_.find(sub);
    if (it == subs_.end()) return PITH_ERR_BAD_HANDLE;
    topic = it->second.topic;
    for (uint32_t f : it->second.waiting) complete_locked(f, PITH_ERR_CLOSED, {});
    subs_.erase(it);
  }
  services_.pubsub->unsubscribe(topic, this, sub);
  return PITH_OK;
}

pith_status_t Instance::next_topic_message(uint32_t sub, uint32_t* future) {
  std::lock_guard lock(mu_);
  auto it = subs_.find(sub);
  if (it == subs_.end()) return PITH_ERR_BAD_HANDLE;
  if (futures_.size() + subs_.size() >= limits_.max_handles) return PITH_ERR_LIMIT;
  uint32_t id = next_handle_locked();
  futures_.emplace(id, Future{});
  *future = id;
  if (!it->second.queued.empty()) {
    complete_locked(id, PITH_OK, std::move(it->second.queued.front()));
    it->second.queued.pop_front();
  } else {
    it->second.waiting.push_back(id);
  }
  return PITH_OK;
}

void Instance::deliver(uint32_t sub, const std::string& message) {
  std::lock_guard lock(mu_);
  auto it = subs_.find(sub);
  if (it == subs_.end()) return;
  Subscription& s = it->second;
  while (!s.waiting.empty()) {
    uint32_t f = s.waiting.front();
    s.waiting.pop_front();
    if (futures_.count(f)) {  // skip futures the guest already dropped
      complete_locked(f, PITH_OK, message);
      return;
    }
  }
  if (s.queued.size() < limits_.max_queued_messages) s.queued.push_back(message);
}

// ---------------------------------------------------------------- model

ModelSession* Instance::model_session() {
  if (!model_session_ && services_.model) {
    model_session_ = services_.model->open_session(id_);
    // Why a model call failed goes to the instance's log (completions log from other threads).
    model_session_->set_error_log([weak = weak_from_this()](std::string message) {
      if (auto self = weak.lock())
        self->emit({InstanceEvent::Kind::Log, PITH_LOG_WARN, std::move(message)});
    });
    // KV pressure parks the guest (on its fiber: session calls come from host calls) until the
    // controller wakes it; a kill ends the wait.
    model_session_->set_parking({[this] {
                                   if (exec_.kill_pending) return false;
                                   park();
                                   return exec_.kill_pending == 0;
                                 },
                                 [weak = weak_from_this()] {
                                   if (auto self = weak.lock()) self->wake();
                                 }});
  }
  return model_session_.get();
}

}  // namespace pith::runtime
