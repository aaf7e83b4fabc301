// pith/pith.hpp: the C++ comfort layer of the inferlet SDK over the flat C ABI in pith/abi.h.
// Header-only, built with -fno-exceptions: errors are values (pith::Result<T>, whose status is
// the ABI's typed pith_status_t), never exceptions. RAII owns handles (Future, Subscription).
//
//   #include <pith/pith.hpp>
//   int main() {
//     for (const std::string& a : pith::args()) pith::send("arg: " + a);
//     pith::Result<std::string> m = pith::receive();     // parks this instance until a message
//     if (m) pith::send("echo: " + *m);
//     pith::store_set("last", m.value_or(""));
//   }
//
// The model-facing classes (Model, Queue, KvPage, Context for generate loops) wrap the compute
// section of abi.h; they are sketched at the end and arrive with the control layer.
#pragma once

#include <pith/abi.h>
#include <stdint.h>
#include <string.h>

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace pith {

// Human-readable name of a status code.
inline const char* status_name(pith_status_t s) {
  switch (s) {
    case PITH_OK: return "ok";
    case PITH_ERR_BAD_HANDLE: return "bad handle";
    case PITH_ERR_BAD_POINTER: return "bad pointer";
    case PITH_ERR_BAD_ARGUMENT: return "bad argument";
    case PITH_ERR_BUFFER_TOO_SMALL: return "buffer too small";
    case PITH_ERR_NOT_FOUND: return "not found";
    case PITH_ERR_PENDING: return "pending";
    case PITH_ERR_OUT_OF_KV_PAGES: return "out of KV pages";
    case PITH_ERR_OUT_OF_EMBEDS: return "out of embeddings";
    case PITH_ERR_LIMIT: return "limit exceeded";
    case PITH_ERR_NO_MODEL: return "no model";
    case PITH_ERR_NOT_ENABLED: return "not enabled";
    case PITH_ERR_UNSUPPORTED: return "unsupported";
    case PITH_ERR_CLOSED: return "closed";
    case PITH_ERR_CANCELLED: return "cancelled";
    case PITH_ERR_ALREADY_EXISTS: return "already exists";
    case PITH_ERR_INTERNAL: return "internal error";
    case PITH_ERR_TIMEOUT: return "timeout";
    case PITH_ERR_NETWORK: return "network error";
  }
  return "unknown status";
}

// A value or a status code.
template <typename T>
class Result {
 public:
  Result(T value) : value_(std::move(value)), status_(PITH_OK) {}  // NOLINT: implicit on purpose
  static Result error(pith_status_t s) { return Result(s, 0); }
  bool ok() const { return status_ == PITH_OK; }
  explicit operator bool() const { return ok(); }
  pith_status_t status() const { return status_; }
  T& operator*() { return value_; }
  const T& operator*() const { return value_; }
  T* operator->() { return &value_; }
  const T* operator->() const { return &value_; }
  T value_or(T other) const { return ok() ? value_ : std::move(other); }

 private:
  Result(pith_status_t s, int) : value_(), status_(s) {}
  T value_;
  pith_status_t status_;
};

namespace detail {
// Calls fill(buf, cap, &len) growing the buffer until the output fits (abi.h convention).
template <typename Fill>
Result<std::string> read_sized(Fill fill, uint32_t guess = 256) {
  std::string out(guess, '\0');
  for (;;) {
    uint32_t len = 0;
    pith_status_t s = fill(out.data(), static_cast<uint32_t>(out.size()), &len);
    if (s == PITH_OK) {
      out.resize(len);
      return out;
    }
    if (s != PITH_ERR_BUFFER_TOO_SMALL) return Result<std::string>::error(s);
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

inline void yield() { pith_yield(); }

inline void log(std::string_view msg, uint32_t level = PITH_LOG_INFO) {
  pith_log(level, msg.data(), static_cast<uint32_t>(msg.size()));
}

// ---- futures ----------------------------------------------------------------------------------

// Owns a pith_future_t; dropping it cancels the operation if still pending.
class Future {
 public:
  Future() = default;
  explicit Future(pith_future_t f) : f_(f) {}
  // A future for a call that failed before it started: wait() returns s at once.
  static Future failed(pith_status_t s) {
    Future f;
    f.error_ = s;
    return f;
  }
  Future(Future&& o) noexcept : f_(std::exchange(o.f_, 0)), error_(o.error_) {}
  Future& operator=(Future&& o) noexcept {
    if (this != &o) {
      reset();
      f_ = std::exchange(o.f_, 0);
      error_ = o.error_;
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
  pith_status_t wait() const { return f_ ? pith_future_wait(f_) : error_; }
  // Waits, then returns the result bytes (or the operation's error).
  Result<std::string> get() const {
    pith_status_t s = wait();
    if (s != PITH_OK) return Result<std::string>::error(s);
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
  pith_status_t error_ = PITH_ERR_BAD_HANDLE;  // what wait() says without a handle
};

// Parks until one of the futures completes; returns its index (or -1 on a bad handle).
inline int wait_any(const std::vector<const Future*>& fs) {
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
inline std::vector<pith_status_t> when_all(const std::vector<const Future*>& fs) {
  std::vector<pith_status_t> status(fs.size(), PITH_ERR_PENDING);
  std::vector<size_t> left;
  for (size_t i = 0; i < fs.size(); ++i) {
    if (fs[i]->valid())
      left.push_back(i);
    else
      status[i] = fs[i]->wait();
  }
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
          status[left[j]] = pith_future_wait(hs[j]);
          left.erase(left.begin() + static_cast<long>(j));
          hs.erase(hs.begin() + static_cast<long>(j));
          progressed = true;
        } else {
          ++j;
        }
      }
      if (!progressed) {
        for (size_t i : left) status[i] = s;
        break;
      }
      continue;
    }
    status[left[index]] = s;
    left.erase(left.begin() + static_cast<long>(index));
  }
  return status;
}
inline std::vector<pith_status_t> when_all(const std::vector<Future>& fs) {
  std::vector<const Future*> ps;
  for (const Future& f : fs) ps.push_back(&f);
  return when_all(ps);
}
template <typename... F>
std::vector<pith_status_t> when_all(const Future& first, const F&... rest) {
  return when_all(std::vector<const Future*>{&first, &rest...});
}

// ---- client messaging -------------------------------------------------------------------------

inline pith_status_t send(std::string_view msg) {
  return pith_msg_send(msg.data(), static_cast<uint32_t>(msg.size()));
}

inline Future receive_async() {
  pith_future_t f = 0;
  pith_msg_receive(&f);
  return Future(f);
}

// Parks until the client sends a message; PITH_ERR_CLOSED once the client closed its side.
inline Result<std::string> receive() { return receive_async().get(); }

// ---- broadcast / subscribe --------------------------------------------------------------------

inline pith_status_t broadcast(std::string_view topic, std::string_view msg) {
  return pith_topic_broadcast(topic.data(), static_cast<uint32_t>(topic.size()), msg.data(),
                              static_cast<uint32_t>(msg.size()));
}

class Subscription {
 public:
  explicit Subscription(std::string_view topic) {
    pith_topic_subscribe(topic.data(), static_cast<uint32_t>(topic.size()), &sub_);
  }
  Subscription(const Subscription&) = delete;
  Subscription& operator=(const Subscription&) = delete;
  ~Subscription() {
    if (sub_) pith_topic_unsubscribe(sub_);
  }
  bool valid() const { return sub_ != 0; }
  Future next_async() const {
    pith_future_t f = 0;
    pith_topic_next(sub_, &f);
    return Future(f);
  }
  Result<std::string> next() const { return next_async().get(); }

 private:
  pith_sub_t sub_ = 0;
};

// ---- key-value store --------------------------------------------------------------------------

inline Result<std::string> store_get(std::string_view key) {
  return detail::read_sized([key](char* b, uint32_t cap, uint32_t* len) {
    return pith_store_get(key.data(), static_cast<uint32_t>(key.size()), b, cap, len);
  });
}
inline pith_status_t store_set(std::string_view key, std::string_view value) {
  return pith_store_set(key.data(), static_cast<uint32_t>(key.size()), value.data(),
                        static_cast<uint32_t>(value.size()));
}
inline pith_status_t store_delete(std::string_view key) {
  return pith_store_delete(key.data(), static_cast<uint32_t>(key.size()));
}
inline bool store_exists(std::string_view key) {
  uint32_t e = 0;
  return pith_store_exists(key.data(), static_cast<uint32_t>(key.size()), &e) == PITH_OK && e;
}

// ---- HTTP (abi.h "HTTP": the server's allow list decides which hosts answer) ---------------------

struct HttpResponse {
  uint32_t status = 0;  // the HTTP status code (404 and 500 are responses, not errors)
  std::string body;
};

// Starts a request; a refused or malformed one gives a Future::failed with the call's status.
inline Future http_get_async(std::string_view url) {
  pith_future_t f = 0;
  pith_status_t s = pith_http_get(url.data(), static_cast<uint32_t>(url.size()), &f);
  return s == PITH_OK ? Future(f) : Future::failed(s);
}
inline Future http_post_async(std::string_view url, std::string_view body) {
  pith_future_t f = 0;
  pith_status_t s = pith_http_post(url.data(), static_cast<uint32_t>(url.size()), body.data(),
                                   static_cast<uint32_t>(body.size()), &f);
  return s == PITH_OK ? Future(f) : Future::failed(s);
}
// Waits for an HTTP future: the response, or PITH_ERR_TIMEOUT / LIMIT / NETWORK / NOT_ENABLED.
inline Result<HttpResponse> http_response(const Future& f) {
  Result<std::string> bytes = f.get();
  if (!bytes) return Result<HttpResponse>::error(bytes.status());
  if (bytes->size() < 4) return Result<HttpResponse>::error(PITH_ERR_INTERNAL);
  HttpResponse r;
  memcpy(&r.status, bytes->data(), 4);
  r.body = bytes->substr(4);
  return r;
}
inline Result<HttpResponse> http_get(std::string_view url) { return http_response(http_get_async(url)); }
inline Result<HttpResponse> http_post(std::string_view url, std::string_view body) {
  return http_response(http_post_async(url, body));
}

// ---- models (sketch; the control layer implements the host side) -----------------------------

inline Result<std::vector<std::string>> available_models() {
  auto list = detail::read_sized(
      [](char* b, uint32_t cap, uint32_t* len) { return pith_model_list(b, cap, len); });
  if (!list) return Result<std::vector<std::string>>::error(list.status());
  std::vector<std::string> out;
  size_t start = 0;
  const std::string& s = *list;
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
  static Result<Model> open(std::string_view name) {
    pith_model_t m = 0;
    pith_status_t s = pith_model_open(name.data(), static_cast<uint32_t>(name.size()), &m);
    if (s != PITH_OK) return Result<Model>::error(s);
    return Model(m);
  }
  Model() = default;
  pith_model_t handle() const { return m_; }
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
      if (s != PITH_OK) return Result<std::vector<uint32_t>>::error(s);
      ids.resize(n);
      return ids;
    }
  }
  Result<std::string> detokenize(const std::vector<uint32_t>& ids) const {
    return detail::read_sized([&](char* b, uint32_t cap, uint32_t* len) {
      return pith_detokenize(m_, ids.data(), static_cast<uint32_t>(ids.size()), b, cap, len);
    });
  }
  // The decoded end of `ids`: the text of its last tokens, at least `min_bytes` + 4 long (or
  // all of it), so that a UTF-8 character cut at the start cannot reach the last `min_bytes`.
  // What a stop-string check needs each step, at O(min_bytes) instead of O(len(ids)).
  std::string detokenize_tail(const std::vector<uint32_t>& ids, size_t min_bytes) const {
    size_t n = ids.size() < min_bytes + 4 ? ids.size() : min_bytes + 4;
    for (;;) {
      std::string t = detokenize(std::vector<uint32_t>(ids.end() - static_cast<ptrdiff_t>(n), ids.end())).value_or("");
      if (t.size() >= min_bytes + 4 || n == ids.size()) return t;
      n = ids.size() < 2 * n ? ids.size() : 2 * n;
    }
  }
  // The bytes of every token, indexed by id (pith_vocab_get; about 1.3 MB for 128k tokens).
  Result<std::vector<std::string>> vocab() const {
    using R = Result<std::vector<std::string>>;
    Result<std::string> blob = detail::read_sized(
        [&](char* b, uint32_t cap, uint32_t* len) { return pith_vocab_get(m_, b, cap, len); }, 1u << 21);
    if (!blob) return R::error(blob.status());
    std::vector<std::string> out;
    const std::string& s = *blob;
    for (size_t at = 0; at + 4 <= s.size();) {
      uint32_t n;
      memcpy(&n, s.data() + at, 4);
      if (at + 4 + n > s.size()) return R::error(PITH_ERR_INTERNAL);
      out.emplace_back(s.data() + at + 4, n);
      at += 4 + size_t{n};
    }
    return out;
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
      if (s != PITH_OK) return Result<std::vector<uint32_t>>::error(s);
      ids.resize(n);
      return ids;
    }
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
    if (s != PITH_OK) return Result<Queue>::error(s);
    return Queue(q);
  }
  Queue() = default;
  Queue(Queue&& o) noexcept : q_(std::exchange(o.q_, 0)) {}
  Queue& operator=(Queue&& o) noexcept {
    std::swap(q_, o.q_);
    return *this;
  }
  ~Queue() {
    if (q_) pith_queue_destroy(q_);
  }
  pith_queue_t handle() const { return q_; }
  pith_status_t set_priority(uint32_t p) const { return pith_queue_set_priority(q_, p); }
  Future synchronize() const {
    pith_future_t f = 0;
    pith_queue_synchronize(q_, &f);
    return Future(f);
  }
  Result<std::vector<pith_kvpage_t>> alloc_kvpages(uint32_t n) const {
    std::vector<pith_kvpage_t> pages(n);
    pith_status_t s = pith_kvpage_alloc(q_, n, pages.data());
    if (s != PITH_OK) return Result<std::vector<pith_kvpage_t>>::error(s);
    return pages;
  }
  pith_status_t dealloc_kvpages(const std::vector<pith_kvpage_t>& pages) const {
    return pith_kvpage_dealloc(q_, pages.data(), static_cast<uint32_t>(pages.size()));
  }
  // Fused forward over tokens; the future's result holds one distribution per output index.
  Future forward_tokens(const pith_forward_tokens_args_t& args) const {
    pith_future_t f = 0;
    pith_forward_tokens(q_, &args, &f);
    return Future(f);
  }

 private:
  explicit Queue(pith_queue_t q) : q_(q) {}
  pith_queue_t q_ = 0;
};

}  // namespace pith
