// The control layer's one error channel: every call that can fail returns a [[nodiscard]]
// Result<T>, which holds either the value or a Failure{code, message}. The code is what a
// program branches on ("out of KV pages" vs "bad handle"); the message says what exactly was
// wrong ("mask runs cover 40 slots, context has 48") and ends up in the instance's log.
//
// How codes reach the guest (runtime/control_model_api.cpp, to_abi_status): each Status maps to
// one pith_status_t of sdk/include/pith/abi.h, but the numbers differ and two codes share one:
//   Ok            -> PITH_OK                    BadHandle      -> PITH_ERR_BAD_HANDLE
//   OutOfKvPages  -> PITH_ERR_OUT_OF_KV_PAGES   QuotaExceeded  -> PITH_ERR_OUT_OF_KV_PAGES
//   OutOfEmbeds   -> PITH_ERR_OUT_OF_EMBEDS     BadArgument    -> PITH_ERR_BAD_ARGUMENT
//   NotFound      -> PITH_ERR_NOT_FOUND         AlreadyExists  -> PITH_ERR_ALREADY_EXISTS
//   Terminated    -> PITH_ERR_CANCELLED         Unsupported    -> PITH_ERR_UNSUPPORTED
//   BackendFailure -> PITH_ERR_BACKEND         OutOfStates    -> PITH_ERR_OUT_OF_STATES
//   Waiting (never reaches the guest: it parks)
// The message never crosses the ABI as a return value: the runtime writes it to the instance's
// log stream and the guest gets the code.
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <utility>
#include <variant>

namespace pith {

enum class Status : int32_t {
  Ok = 0,
  BadHandle = 1,      // a page/embed/queue handle the inferlet does not own
  OutOfKvPages = 2,   // the pool cannot satisfy the allocation (after reclaiming)
  QuotaExceeded = 3,  // --max-kv-pages-per-inferlet would be exceeded
  OutOfEmbeds = 4,
  BadArgument = 5,      // malformed request (lengths, positions, masks, token ids)
  NotFound = 6,         // no export with that name
  AlreadyExists = 7,    // export name taken
  Terminated = 8,       // the instance was terminated; pending calls fail with this
  Unsupported = 9,      // trait not implemented by the loaded model
  BackendFailure = 10,  // the backend failed on a valid call (out of memory, device error)
  // Not a failure the guest sees: the instance must wait (for KV pages, or to be resumed after
  // a suspension) and call again once its waker ran (Controller::set_waker). The runtime parks.
  Waiting = 11,
  // The recurrent-state pool of a hybrid model (or the instance's state quota) is exhausted.
  OutOfStates = 12,
};

const char* status_name(Status s);

// Why a call failed. `code` is never Status::Ok.
struct Failure {
  Status code = Status::BadArgument;
  std::string message;
};

// The value of a call that succeeded, or its Failure.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}            // NOLINT: implicit, so `return value;` works
  Result(Failure failure) : v_(std::move(failure)) {}  // NOLINT

  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }
  Status code() const { return ok() ? Status::Ok : std::get<1>(v_).code; }
  // Empty when ok.
  const std::string& message() const { return ok() ? empty() : std::get<1>(v_).message; }
  const Failure& failure() const { return std::get<1>(v_); }

  T& value() { return std::get<0>(v_); }
  const T& value() const { return std::get<0>(v_); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() { return value(); }

 private:
  static const std::string& empty() {
    static const std::string e;
    return e;
  }
  std::variant<T, Failure> v_;
};

template <>
class [[nodiscard]] Result<void> {
 public:
  Result() = default;
  Result(Failure failure) : failure_(std::move(failure)) {}  // NOLINT

  bool ok() const { return !failure_; }
  explicit operator bool() const { return ok(); }
  Status code() const { return failure_ ? failure_->code : Status::Ok; }
  const std::string& message() const {
    static const std::string empty;
    return failure_ ? failure_->message : empty;
  }
  const Failure& failure() const { return *failure_; }

 private:
  std::optional<Failure> failure_;
};

// A result compares equal to the code it carries (tests and callers that only branch on it).
template <typename T>
bool operator==(const Result<T>& r, Status s) {
  return r.code() == s;
}

template <typename T>
std::ostream& operator<<(std::ostream& os, const Result<T>& r) {
  os << status_name(r.code());
  if (!r.ok() && !r.message().empty()) os << ": " << r.message();
  return os;
}

inline std::ostream& operator<<(std::ostream& os, Status s) {
  return os << status_name(s);
}

}  // namespace pith
