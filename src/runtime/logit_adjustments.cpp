// Guest logit adjustments to OutputSpec::adjust. See logit_adjustments.h.
#include "runtime/logit_adjustments.h"

#include <memory>

#include <fmt/format.h>

namespace pith::runtime {

static_assert(PITH_LOGIT_BAN == kLogitBanPenalty, "the ABI's ban is the backend's");

std::string adjustments_by_output(const std::vector<pith_logit_adjust_t>& entries,
                                  uint32_t vocab_size, SequenceInput& seq) {
  const size_t n_outputs = seq.outputs.size();
  size_t i = 0;
  while (i < entries.size()) {
    const uint32_t o = entries[i].output;
    if (o >= n_outputs)
      return fmt::format("logit adjustment {} is for output {} of {}", i, o, n_outputs);
    if (i > 0 && o < entries[i - 1].output)
      return fmt::format("logit adjustments must be sorted by output ({} after {})", o,
                         entries[i - 1].output);
    auto list = std::make_shared<LogitAdjustments>();
    for (; i < entries.size() && entries[i].output == o; ++i) {
      const pith_logit_adjust_t& e = entries[i];
      if (e.token >= vocab_size)
        return fmt::format("logit adjustment of token {} outside the vocabulary of {}", e.token,
                           vocab_size);
      if (!list->empty() && e.token <= list->back().token)
        return fmt::format(
            "logit adjustments of output {} must be sorted by token, each once ({} after {})", o,
            e.token, list->back().token);
      const LogitAdjustment a{e.token, e.bias, e.repetition, e.penalty};
      if (!adjustment_values_ok(a))
        return fmt::format(
            "logit adjustment of token {} (bias {}, repetition {}, penalty {}): values must be "
            "finite and repetition above 0",
            e.token, e.bias, e.repetition, e.penalty);
      list->push_back(a);
    }
    seq.outputs[o].adjust = std::move(list);
  }
  return {};
}

}  // namespace pith::runtime
