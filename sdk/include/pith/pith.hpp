// pith/pith.hpp: the C++ comfort layer of the inferlet SDK over the flat C ABI in pith/abi.h.
// Header-only, built with -fno-exceptions: errors are values (pith::Result<T> and pith::Status
// from pith/result.hpp, [[nodiscard]], carrying the ABI code and a message), never exceptions.
// RAII owns handles (Future, Subscription, Queue).
//
//   #include <pith/inferlet.hpp>
//   pith::Status echo(pith::Flags& flags) {
//     PITH_TRY(flags.done());
//     std::string m = PITH_TRY(pith::receive());          // parks this instance until a message
//     PITH_TRY(pith::send("echo: " + m));
//     return pith::store_set("last", m);
//   }
//   PITH_INFERLET(echo)
//
// The model-facing classes (Model, Queue) wrap the compute section of abi.h; pith/context.hpp
// builds the token context and the generate loop on them.
#pragma once

#include <pith/abi.h>
#include <stdint.h>
#include <string.h>

#include <pith/result.hpp>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace pith {

namespace detail {
// Calls fill(buf, cap, &len) growing the buffer until the output fits (abi.h convention).
template <typename Fill>
[[nodiscard]] Result<std::string> read_sized(Fill fill, uint32_t guess = 256) {
  std::string out(guess, '\0');
  for (;;) {
    uint32_t len = 0;
    pith_status_t s = fill(out.data(), static_cast<uint32_t>(out.size()), &len);
    if (s == PITH_OK) {
      out.resize(len);
      return out;
    }
    if (s != PITH_ERR_BUFFER_TOO_SMALL) return Error(s);
    out.assign(len, '\0');
  }
}
}  // namespace detail

// ---- args, identity, logging ------------------------------------------------------------------

inline std::vector<std::string> args() {
  uint32_t n = 0;
  std::vector<std::string> out;
  if (pith_arg_count(&n) != PITH_OK) return out;
  for (uint32_t i = 0; i < n; ++i) {
    auto a = detail::read_sized(
        [i](char* b, uint32_t cap, uint32_t* len) { return pith_arg_get(i, b, cap, len); }, 64);
    out.push_back(a.value_or(""));
  }
  return out;
}

inline uint64_t instance_id() {
  uint64_t id = 0;
  pith_instance_id(&id);
  return id;
}

inline uint64_t now_ns() {
  uint64_t t = 0;
  pith_time_now(&t);
  return t;
}

inline void yield() {
  pith_yield();
}

inline void log(std::string_view msg, uint32_t level = PITH_LOG_INFO) {
  pith_log(level, msg.data(), static_cast<uint32_t>(msg.size()));
}

// "1,2,3": the items joined by `sep` (numbers as decimal, strings as they are).
template <typename T>
std::string join(const std::vector<T>& items, std::string_view sep) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) out += sep;
    if constexpr (std::is_arithmetic_v<T>)
      out += std::to_string(items[i]);
    else
      out += items[i];
  }
  return out;
}

// ---- futures ----------------------------------------------------------------------------------

// Owns a pith_future_t; dropping it cancels the operation if still pending.
class Future {
 public:
  Future() = default;
  explicit Future(pith_future_t f) : f_(f) {}
  // A future for a call that failed before it started: wait() returns e at once.
  static Future failed(Error e) {
    Future f;
    f.error_ = static_cast<Error&&>(e);
    return f;
  }
  Future(Future&& o) noexcept : f_(std::exchange(o.f_, 0)), error_(std::move(o.error_)) {}
  Future& operator=(Future&& o) noexcept {
    if (this != &o) {
      reset();
      f_ = std::exchange(o.f_, 0);
      error_ = std::move(o.error_);
    }
    return *this;
  }
  Future(const Future&) = delete;
  Future& operator=(const Future&) = delete;
  ~Future() { reset(); }

  pith_future_t handle() const { return f_; }
  bool valid() const { return f_ != 0; }
  bool ready() const {
    uint32_t r = 0;
    return f_ && pith_future_poll(f_, &r) == PITH_OK && r;
  }
  // Parks until completion; returns the operation's status.
  [[nodiscard]] Status wait() const {
    if (!f_) return error_;
    pith_status_t s = pith_future_wait(f_);
    if (s != PITH_OK) return Error(s);
    return {};
  }
  // Waits, then returns the result bytes (or the operation's error).
  [[nodiscard]] Result<std::string> get() const {
    PITH_TRY(wait());
    return detail::read_sized([this](char* b, uint32_t cap, uint32_t* len) {
      return pith_future_result(f_, b, cap, len);
    });
  }
  void reset() {
    if (f_) pith_future_drop(f_);
    f_ = 0;
  }

 private:
  pith_future_t f_ = 0;
  Error error_{PITH_ERR_BAD_HANDLE, "wait on an empty future"};  // wait() without a handle
};

// Parks until one of the futures completes; returns its index (or -1 on a bad handle).
[[nodiscard]] inline int wait_any(const std::vector<const Future*>& fs) {
  std::vector<pith_future_t> hs;
  for (const Future* f : fs) hs.push_back(f->handle());
  uint32_t index = 0;
  pith_status_t s = pith_future_wait_any(hs.data(), static_cast<uint32_t>(hs.size()), &index);
  if (s == PITH_ERR_BAD_HANDLE || s == PITH_ERR_BAD_ARGUMENT) return -1;
  return static_cast<int>(index);
}

// Parks until every future has completed (built on wait_any, so the instance sleeps until the
// last one); returns each one's status, in order. A future without a handle (Future::failed)
// counts as completed with its error.
[[nodiscard]] inline std::vector<Status> when_all(const std::vector<const Future*>& fs) {
  std::vector<Status> status(fs.size());
  std::vector<size_t> left;
  for (size_t i = 0; i < fs.size(); ++i) {
    if (fs[i]->valid())
      left.push_back(i);
    else
      status[i] = fs[i]->wait();
  }
  auto as_status = [](pith_status_t s) { return s == PITH_OK ? Status() : Status(Error(s)); };
  std::vector<pith_future_t> hs;
  while (!left.empty()) {
    hs.clear();
    for (size_t i : left) hs.push_back(fs[i]->handle());
    uint32_t index = UINT32_MAX;
    pith_status_t s = pith_future_wait_any(hs.data(), static_cast<uint32_t>(hs.size()), &index);
    if (index >= left.size()) {
      // No index: either a future's own status was one the host reports without it (bad
      // handle), or the wait itself failed (the instance is ending). Poll to tell them apart.
      bool progressed = false;
      for (size_t j = 0; j < left.size();) {
        uint32_t ready = 0;
        if (pith_future_poll(hs[j], &ready) == PITH_OK && ready) {
          status[left[j]] = as_status(pith_future_wait(hs[j]));
          left.erase(left.begin() + static_cast<long>(j));
          hs.erase(hs.begin() + static_cast<long>(j));
          progressed = true;
        } else {
          ++j;
        }
      }
      if (!progressed) {
        for (size_t i : left) status[i] = as_status(s);
        break;
      }
      continue;
    }
    status[left[index]] = as_status(s);
    left.erase(left.begin() + static_cast<long>(index));
  }
  return status;
}
[[nodiscard]] inline std::vector<Status> when_all(const std::vector<Future>& fs) {
  std::vector<const Future*> ps;
  for (const Future& f : fs) ps.push_back(&f);
  return when_all(ps);
}
template <typename... F>
[[nodiscard]] std::vector<Status> when_all(const Future& first, const F&... rest) {
  return when_all(std::vector<const Future*>{&first, &rest...});
}

// ---- client messaging -------------------------------------------------------------------------

// Sends a message to the client that launched this instance (fails past the size limit).
inline Status send(std::string_view msg) {
  return check(pith_msg_send(msg.data(), static_cast<uint32_t>(msg.size())), "send");
}

[[nodiscard]] inline Future receive_async() {
  pith_future_t f = 0;
  pith_status_t s = pith_msg_receive(&f);
  return s == PITH_OK ? Future(f) : Future::failed(Error::of(s, "receive"));
}

// Parks until the client sends a message; PITH_ERR_CLOSED once the client closed its side.
inline Result<std::string> receive() {
  return receive_async().get();
}

// ---- broadcast / subscribe --------------------------------------------------------------------

inline Status broadcast(std::string_view topic, std::string_view msg) {
  return check(pith_topic_broadcast(topic.data(), static_cast<uint32_t>(topic.size()), msg.data(),
                                    static_cast<uint32_t>(msg.size())),
               "broadcast to '" + std::string(topic) + "'");
}

class Subscription {
 public:
  static Result<Subscription> open(std::string_view topic) {
    pith_sub_t sub = 0;
    pith_status_t s = pith_topic_subscribe(topic.data(), static_cast<uint32_t>(topic.size()), &sub);
    if (s != PITH_OK) return Error::of(s, "subscribe to '" + std::string(topic) + "'");
    return Subscription(sub);
  }
  Subscription(Subscription&& o) noexcept : sub_(std::exchange(o.sub_, 0)) {}
  Subscription& operator=(Subscription&& o) noexcept {
    std::swap(sub_, o.sub_);
    return *this;
  }
  Subscription(const Subscription&) = delete;
  Subscription& operator=(const Subscription&) = delete;
  ~Subscription() {
    if (sub_) pith_topic_unsubscribe(sub_);
  }
  [[nodiscard]] Future next_async() const {
    pith_future_t f = 0;
    pith_status_t s = pith_topic_next(sub_, &f);
    return s == PITH_OK ? Future(f) : Future::failed(Error::of(s, "next topic message"));
  }
  Result<std::string> next() const { return next_async().get(); }

 private:
  explicit Subscription(pith_sub_t sub) : sub_(sub) {}
  pith_sub_t sub_ = 0;
};

// ---- key-value store --------------------------------------------------------------------------

inline Result<std::string> store_get(std::string_view key) {
  return detail::read_sized([key](char* b, uint32_t cap, uint32_t* len) {
    return pith_store_get(key.data(), static_cast<uint32_t>(key.size()), b, cap, len);
  });
}
inline Status store_set(std::string_view key, std::string_view value) {
  return check(pith_store_set(key.data(), static_cast<uint32_t>(key.size()), value.data(),
                              static_cast<uint32_t>(value.size())),
               "store set '" + std::string(key) + "'");
}
inline Status store_delete(std::string_view key) {
  return check(pith_store_delete(key.data(), static_cast<uint32_t>(key.size())),
               "store delete '" + std::string(key) + "'");
}
[[nodiscard]] inline bool store_exists(std::string_view key) {
  uint32_t e = 0;
  return pith_store_exists(key.data(), static_cast<uint32_t>(key.size()), &e) == PITH_OK && e;
}

// ---- HTTP (abi.h "HTTP": the server's allow list decides which hosts answer)
// ---------------------

struct HttpResponse {
  uint32_t status = 0;  // the HTTP status code (404 and 500 are responses, not errors)
  std::string body;
};

// Starts a request; a refused or malformed one gives a Future::failed with the call's status.
[[nodiscard]] inline Future http_get_async(std::string_view url) {
  pith_future_t f = 0;
  pith_status_t s = pith_http_get(url.data(), static_cast<uint32_t>(url.size()), &f);
  return s == PITH_OK ? Future(f) : Future::failed(Error(s));
}
[[nodiscard]] inline Future http_post_async(std::string_view url, std::string_view body) {
  pith_future_t f = 0;
  pith_status_t s = pith_http_post(url.data(), static_cast<uint32_t>(url.size()), body.data(),
                                   static_cast<uint32_t>(body.size()), &f);
  return s == PITH_OK ? Future(f) : Future::failed(Error(s));
}
// Waits for an HTTP future: the response, or PITH_ERR_TIMEOUT / LIMIT / NETWORK / NOT_ENABLED.
inline Result<HttpResponse> http_response(const Future& f) {
  std::string bytes = PITH_TRY(f.get());
  if (bytes.size() < 4) return Error(PITH_ERR_INTERNAL, "HTTP result shorter than its status");
  HttpResponse r;
  memcpy(&r.status, bytes.data(), 4);
  r.body = bytes.substr(4);
  return r;
}
inline Result<HttpResponse> http_get(std::string_view url) {
  return http_response(http_get_async(url));
}
inline Result<HttpResponse> http_post(std::string_view url, std::string_view body) {
  return http_response(http_post_async(url, body));
}

// ---- models -----------------------------------------------------------------------------------

inline Result<std::vector<std::string>> available_models() {
  std::string s = PITH_TRY(detail::read_sized(
      [](char* b, uint32_t cap, uint32_t* len) { return pith_model_list(b, cap, len); }));
  std::vector<std::string> out;
  size_t start = 0;
  while (start < s.size()) {
    size_t nl = s.find('\n', start);
    if (nl == std::string::npos) nl = s.size();
    out.push_back(s.substr(start, nl - start));
    start = nl + 1;
  }
  return out;
}

// A model handle with its tokenizer; queues are created from it.
class Model {
 public:
  // "" opens the server's model.
  static Result<Model> open(std::string_view name) {
    pith_model_t m = 0;
    pith_status_t s = pith_model_open(name.data(), static_cast<uint32_t>(name.size()), &m);
    if (s != PITH_OK) return Error::of(s, "open model '" + std::string(name) + "'");
    return Model(m);
  }
  pith_model_t handle() const { return m_; }
  // A loaded LoRA adapter by name (the "adapter=NAME" traits), for Context::set_adapter and
  // forward_with_adapter.
  Result<pith_adapter_t> open_adapter(std::string_view name) const {
    pith_adapter_t a = 0;
    pith_status_t s = pith_adapter_open(m_, name.data(), static_cast<uint32_t>(name.size()), &a);
    if (s != PITH_OK) return Error::of(s, "open adapter '" + std::string(name) + "'");
    return a;
  }
  Result<std::vector<uint32_t>> tokenize(std::string_view text) const {
    std::vector<uint32_t> ids(text.size() + 8);
    for (;;) {
      uint32_t n = 0;
      pith_status_t s = pith_tokenize(m_, text.data(), static_cast<uint32_t>(text.size()),
                                      ids.data(), static_cast<uint32_t>(ids.size()), &n);
      if (s == PITH_ERR_BUFFER_TOO_SMALL) {
        ids.resize(n);
        continue;
      }
      if (s != PITH_OK) return Error::of(s, "tokenize");
      ids.resize(n);
      return ids;
    }
  }
  Result<std::string> detokenize(const std::vector<uint32_t>& ids) const {
    Result<std::string> r = detail::read_sized([&](char* b, uint32_t cap, uint32_t* len) {
      return pith_detokenize(m_, ids.data(), static_cast<uint32_t>(ids.size()), b, cap, len);
    });
    if (!r) return std::move(r).take_error().context("detokenize");
    return r;
  }
  // The decoded end of `ids`: the text of its last tokens, at least `min_bytes` + 4 long (or
  // all of it), so that a UTF-8 character cut at the start cannot reach the last `min_bytes`.
  // What a stop-string check needs each step, at O(min_bytes) instead of O(len(ids)).
  Result<std::string> detokenize_tail(const std::vector<uint32_t>& ids, size_t min_bytes) const {
    size_t n = ids.size() < min_bytes + 4 ? ids.size() : min_bytes + 4;
    for (;;) {
      std::string t = PITH_TRY(
          detokenize(std::vector<uint32_t>(ids.end() - static_cast<ptrdiff_t>(n), ids.end())));
      if (t.size() >= min_bytes + 4 || n == ids.size()) return t;
      n = ids.size() < 2 * n ? ids.size() : 2 * n;
    }
  }
  // The bytes of every token, indexed by id (pith_vocab_get; about 1.3 MB for 128k tokens).
  Result<std::vector<std::string>> vocab() const {
    Result<std::string> blob = detail::read_sized(
        [&](char* b, uint32_t cap, uint32_t* len) { return pith_vocab_get(m_, b, cap, len); },
        1u << 21);
    if (!blob) return std::move(blob).take_error().context("vocabulary");
    std::vector<std::string> out;
    const std::string& s = *blob;
    for (size_t at = 0; at + 4 <= s.size();) {
      uint32_t n;
      memcpy(&n, s.data() + at, 4);
      if (at + 4 + n > s.size()) return Error(PITH_ERR_INTERNAL, "vocabulary: truncated entry");
      out.emplace_back(s.data() + at + 4, n);
      at += 4 + size_t{n};
    }
    return out;
  }
  // The model's traits (pith_model_traits): capabilities, then key=value facts such as
  // "architecture=qwen3" or "eos_tokens=2,32007".
  Result<std::vector<std::string>> traits() const {
    std::string s = PITH_TRY(detail::read_sized(
        [&](char* b, uint32_t cap, uint32_t* len) { return pith_model_traits(m_, b, cap, len); }));
    std::vector<std::string> out;
    for (size_t start = 0; start < s.size();) {
      size_t nl = s.find('\n', start);
      if (nl == std::string::npos) nl = s.size();
      out.push_back(s.substr(start, nl - start));
      start = nl + 1;
    }
    return out;
  }
  // Every token that ends generation (the "eos_tokens" trait: Phi-3's <|end|> and
  // <|endoftext|>, Qwen's <|im_end|> and <|endoftext|>, ...), the EOS id first; just `eos`
  // (when not UINT32_MAX) where the host names no set.
  std::vector<uint32_t> eos_tokens(uint32_t eos) const {
    std::vector<uint32_t> ids;
    if (Result<std::vector<std::string>> t = traits())
      for (const std::string& tr : *t) {
        if (tr.rfind("eos_tokens=", 0) != 0) continue;
        uint32_t v = 0;
        bool digits = false;
        for (size_t i = 11; i <= tr.size(); ++i) {
          if (i < tr.size() && tr[i] >= '0' && tr[i] <= '9') {
            v = v * 10 + static_cast<uint32_t>(tr[i] - '0');
            digits = true;
          } else if (digits) {
            ids.push_back(v);
            v = 0;
            digits = false;
          }
        }
      }
    if (ids.empty() && eos != UINT32_MAX) ids.push_back(eos);
    return ids;
  }
  // Ids of the special tokens (pith_vocab_special), increasing.
  Result<std::vector<uint32_t>> special_tokens() const {
    std::vector<uint32_t> ids(512);
    for (;;) {
      uint32_t n = 0;
      pith_status_t s = pith_vocab_special(m_, ids.data(), static_cast<uint32_t>(ids.size()), &n);
      if (s == PITH_ERR_BUFFER_TOO_SMALL) {
        ids.resize(n);
        continue;
      }
      if (s != PITH_OK) return Error::of(s, "special tokens");
      ids.resize(n);
      return ids;
    }
  }
  // Whether the model has recurrent layers (trait "recurrent_state"): each sequence then needs
  // a state beside its KV pages (pith_state_alloc; Context does this). Asked once per model.
  bool recurrent() const {
    static std::vector<std::pair<pith_model_t, bool>> known;
    for (const auto& [m, r] : known)
      if (m == m_) return r;
    bool r = false;
    if (Result<std::vector<std::string>> t = traits())
      for (const std::string& tr : *t) r = r || tr == "recurrent_state";
    known.emplace_back(m_, r);
    return r;
  }
  // What this instance's KV allocations do when memory is short: wait (the default; the instance
  // may be suspended meanwhile, which it sees only as latency) or fail at once.
  Status set_kv_fail_fast(bool fail_fast) const {
    Status s = check(pith_kvpage_policy(m_, fail_fast ? PITH_KV_FAIL_FAST : PITH_KV_WAIT),
                     "kvpage_policy");
    if (s) kv_fail_fast() = fail_fast;
    return s;
  }
  // The policy set last (the host's default: wait). Also what a recurrent-state allocation
  // does when the pool is short.
  static bool& kv_fail_fast() {
    static bool fail_fast = false;
    return fail_fast;
  }

 private:
  explicit Model(pith_model_t m) : m_(m) {}
  pith_model_t m_ = 0;
};

// A command queue: ordering and priority domain for resource and compute commands.
class Queue {
 public:
  static Result<Queue> create(const Model& model) {
    pith_queue_t q = 0;
    pith_status_t s = pith_queue_create(model.handle(), &q);
    if (s != PITH_OK) return Error::of(s, "create queue");
    return Queue(q);
  }
  Queue(Queue&& o) noexcept : q_(std::exchange(o.q_, 0)) {}
  Queue& operator=(Queue&& o) noexcept {
    std::swap(q_, o.q_);
    return *this;
  }
  Queue(const Queue&) = delete;
  Queue& operator=(const Queue&) = delete;
  ~Queue() {
    if (q_) pith_queue_destroy(q_);
  }
  pith_queue_t handle() const { return q_; }
  Status set_priority(uint32_t p) const {
    return check(pith_queue_set_priority(q_, p), "set queue priority");
  }
  [[nodiscard]] Future synchronize() const {
    pith_future_t f = 0;
    pith_status_t s = pith_queue_synchronize(q_, &f);
    return s == PITH_OK ? Future(f) : Future::failed(Error::of(s, "synchronize"));
  }
  Result<std::vector<pith_kvpage_t>> alloc_kvpages(uint32_t n) const {
    std::vector<pith_kvpage_t> pages(n);
    pith_status_t s = pith_kvpage_alloc(q_, n, pages.data());
    if (s != PITH_OK) return Error::of(s, "allocate " + std::to_string(n) + " KV pages");
    return pages;
  }
  Status dealloc_kvpages(const std::vector<pith_kvpage_t>& pages) const {
    return check(pith_kvpage_dealloc(q_, pages.data(), static_cast<uint32_t>(pages.size())),
                 "free KV pages");
  }
  // Fused forward over tokens; the future's result holds one distribution per output index.
  [[nodiscard]] Future forward_tokens(const pith_forward_tokens_args_t& args) const {
    pith_future_t f = 0;
    pith_status_t s = pith_forward_tokens(q_, &args, &f);
    return s == PITH_OK ? Future(f) : Future::failed(Error::of(s, "forward"));
  }

 private:
  explicit Queue(pith_queue_t q) : q_(q) {}
  pith_queue_t q_ = 0;
};

}  // namespace pith
