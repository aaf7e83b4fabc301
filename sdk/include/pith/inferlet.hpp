// pith/inferlet.hpp: the entry point of an inferlet, in the shape of the paper's listings.
//
//   #include <pith/inferlet.hpp>
//
//   pith::Status complete(pith::Flags& flags) {
//     std::string prompt = flags.str("--prompt", "", "the text to complete");
//     PITH_TRY(flags.done());
//     pith::Model model = PITH_TRY(pith::Model::open(""));
//     pith::Context ctx = PITH_TRY(pith::Context::create(model));
//     PITH_TRY(ctx.fill(prompt));
//     return pith::send(ctx.generate(pith::Sampler::greedy(), {.max_tokens = 32}).text);
//   }
//   PITH_INFERLET(complete)
//
// The function gets the launch arguments as Flags and returns a Status. An error that leaves it
// ends the instance with a non-zero exit code (Error::exit_code), its message logged at error
// level (the instance's log stream; stderr under `pith run`) and sent to the client as
// "error: MESSAGE".
#pragma once

#include <pith/context.hpp>
#include <pith/flags.hpp>
#include <pith/pith.hpp>
#include <pith/result.hpp>

namespace pith {

// Reports an error that ends the inferlet, as the entry point does: logged at error level and
// sent as "error: MESSAGE" (nothing for an early successful end). Returns the exit code.
inline int report_error(const Error& e) {
  if (e.exit_code == 0) return 0;  // answered early (--help)
  const std::string msg = "error: " + e.what();
  log(msg, PITH_LOG_ERROR);
  (void)send(msg);  // the client may be gone; the log line and the exit code still say it
  return e.exit_code;
}

namespace detail {
inline int run_inferlet(Status (*body)(Flags&)) {
  Flags flags;
  Status s = body(flags);
  if (s && !flags.checked()) s = flags.done();  // arguments nobody read are still an error
  return s ? 0 : report_error(s.error());
}
}  // namespace detail

}  // namespace pith

// Defines main() to run `fn`, a `pith::Status fn(pith::Flags&)`.
#define PITH_INFERLET(fn)                     \
  int main() {                                \
    return ::pith::detail::run_inferlet(&fn); \
  }
