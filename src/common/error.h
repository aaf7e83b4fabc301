// pith::Error: the exception used for bad input (malformed files, bad arguments) inside a
// layer. Layer and ABI boundaries translate it into a status code or an HTTP error; the
// message always names what was wrong and where, e.g. "model.gguf: tensor 'blk.0.attn_q.weight'
// extends past end of file".
#pragma once

#include <fmt/format.h>

#include <stdexcept>
#include <string>

namespace pith {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

// Throws pith::Error with a formatted message.
template <typename... Args>
[[noreturn]] void fail(fmt::format_string<Args...> f, Args&&... args) {
  throw Error(fmt::format(f, std::forward<Args>(args)...));
}

// Invariant checks that stay on in release builds: a violated invariant is a pith bug,
// reported with its location rather than silently corrupting memory.
[[noreturn]] void check_failed(const char* expr, const char* file, int line);

}  // namespace pith

#define PITH_CHECK(expr) ((expr) ? (void)0 : ::pith::check_failed(#expr, __FILE__, __LINE__))
