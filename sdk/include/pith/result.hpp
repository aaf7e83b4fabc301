// pith/result.hpp: errors as values for inferlets (the SDK is built with -fno-exceptions).
//
//   pith::Result<pith::Context> make(const pith::Model& m) {
//     pith::Context ctx = PITH_TRY(pith::Context::create(m));   // returns the error if any
//     PITH_TRY(ctx.fill("Hello"));                               // a Status: nothing to keep
//     return ctx;
//   }
//
// An Error carries the ABI code (pith_status_t) and a message for the author ("tokenize: bad
// argument", "unknown argument --x"). Result<T> holds a T or an Error and never needs T to be
// default-constructible; Status is Result<void>. Both are [[nodiscard]]: a dropped error is a
// compile error under the inferlet build's -Werror. PITH_TRY is the `?` of Rust (a GNU
// statement expression, which clang supports).
#pragma once

#include <pith/abi.h>

#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

namespace pith {

// Human-readable name of a status code.
inline const char* status_name(pith_status_t s) {
  switch (s) {
    case PITH_OK:
      return "ok";
    case PITH_ERR_BAD_HANDLE:
      return "bad handle";
    case PITH_ERR_BAD_POINTER:
      return "bad pointer";
    case PITH_ERR_BAD_ARGUMENT:
      return "bad argument";
    case PITH_ERR_BUFFER_TOO_SMALL:
      return "buffer too small";
    case PITH_ERR_NOT_FOUND:
      return "not found";
    case PITH_ERR_PENDING:
      return "pending";
    case PITH_ERR_OUT_OF_KV_PAGES:
      return "out of KV pages";
    case PITH_ERR_OUT_OF_EMBEDS:
      return "out of embeddings";
    case PITH_ERR_OUT_OF_STATES:
      return "out of recurrent states";
    case PITH_ERR_LIMIT:
      return "limit exceeded";
    case PITH_ERR_NO_MODEL:
      return "no model";
    case PITH_ERR_NOT_ENABLED:
      return "not enabled";
    case PITH_ERR_UNSUPPORTED:
      return "unsupported";
    case PITH_ERR_CLOSED:
      return "closed";
    case PITH_ERR_CANCELLED:
      return "cancelled";
    case PITH_ERR_ALREADY_EXISTS:
      return "already exists";
    case PITH_ERR_INTERNAL:
      return "internal error";
    case PITH_ERR_TIMEOUT:
      return "timeout";
    case PITH_ERR_NETWORK:
      return "network error";
    case PITH_ERR_BACKEND:
      return "backend failure";
  }
  return "unknown status";
}

// What went wrong: an ABI code and a message. exit_code is what the instance exits with when
// the error leaves the entry point (pith/inferlet.hpp): 1, 2 for bad launch arguments, 0 for a
// request answered early (--help).
struct [[nodiscard]] Error {
  pith_status_t code = PITH_ERR_INTERNAL;
  std::string message;  // "" = the code's name
  int exit_code = 1;

  explicit Error(pith_status_t c, std::string m = {}, int exit = 1)
      : code(c), message(static_cast<std::string&&>(m)), exit_code(exit) {}
  // An ABI failure of an operation: "what: code name".
  static Error of(pith_status_t c, std::string_view what) {
    return Error(c, std::string(what) + ": " + status_name(c));
  }
  // The message to show: the message, or the code's name when there is none.
  std::string what() const { return message.empty() ? status_name(code) : message; }
  // The same error with `prefix: ` in front of its message.
  Error context(std::string_view prefix) const {
    return Error(code, std::string(prefix) + ": " + what(), exit_code);
  }
};

// A T, or the Error that prevented it.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(static_cast<T&&>(value)), error_(PITH_OK) {}  // NOLINT: implicit
  template <typename U>
  requires(std::is_constructible_v<T, U&&> && !std::is_same_v<std::decay_t<U>, T> &&
           !std::is_same_v<std::decay_t<U>, Error>) Result(U&& value)
      : value_(std::in_place, static_cast<U&&>(value)), error_(PITH_OK) {}  // NOLINT
  Result(Error e) : error_(static_cast<Error&&>(e)) {}  // NOLINT: implicit on purpose

  bool ok() const { return value_.has_value(); }
  explicit operator bool() const { return ok(); }
  // PITH_OK, or the error's ABI code.
  pith_status_t status() const { return ok() ? PITH_OK : error_.code; }
  const Error& error() const { return error_; }
  Error take_error() && { return static_cast<Error&&>(error_); }

  T& operator*() & { return *value_; }
  const T& operator*() const& { return *value_; }
  T&& operator*() && { return static_cast<T&&>(*value_); }
  T* operator->() { return &*value_; }
  const T* operator->() const { return &*value_; }
  T value_or(T other) const& { return ok() ? *value_ : static_cast<T&&>(other); }
  T value_or(T other) && { return ok() ? static_cast<T&&>(*value_) : static_cast<T&&>(other); }

 private:
  std::optional<T> value_;
  Error error_;
};

// Success, or the Error of a failed operation.
template <>
class [[nodiscard]] Result<void> {
 public:
  Result() : error_(PITH_OK) {}
  Result(Error e) : error_(static_cast<Error&&>(e)), failed_(true) {}  // NOLINT: implicit

  bool ok() const { return !failed_; }
  explicit operator bool() const { return ok(); }
  pith_status_t status() const { return ok() ? PITH_OK : error_.code; }
  const Error& error() const { return error_; }
  Error take_error() && { return static_cast<Error&&>(error_); }

 private:
  Error error_;
  bool failed_ = false;
};
using Status = Result<void>;

// An ABI call's status as a Status: "what: code name" when it failed.
inline Status check(pith_status_t s, std::string_view what) {
  if (s == PITH_OK) return {};
  return Error::of(s, what);
}

namespace detail {
template <typename T>
T unwrap(Result<T>&& r) {
  return *static_cast<Result<T>&&>(r);
}
inline void unwrap(Status&&) {}
}  // namespace detail

}  // namespace pith

// Evaluates a Result or Status; on an error, returns it from the enclosing function (which
// returns a Result or Status), else gives the value (nothing for a Status).
#define PITH_TRY(...)                                                                    \
  ({                                                                                     \
    auto pith_try_result_ = (__VA_ARGS__);                                               \
    if (!pith_try_result_)                                                               \
      return static_cast<decltype(pith_try_result_)&&>(pith_try_result_).take_error();   \
    ::pith::detail::unwrap(static_cast<decltype(pith_try_result_)&&>(pith_try_result_)); \
  })
