// The logit adjustments of abi.h forward_tokens_adjusted, from the guest's flat list (sorted by
// output, then token) to each output's OutputSpec::adjust, checked on the way: a bad list is
// refused with the reason, never passed on to fail a whole batch.
#pragma once

#include <pith/abi.h>

#include <string>
#include <vector>

#include "backend/forward_batch.h"

namespace pith::runtime {

// Fills seq.outputs[o].adjust for every output with entries; returns "" or why the list is bad
// (an output or token out of range, out of order or repeated, a value the backends refuse).
std::string adjustments_by_output(const std::vector<pith_logit_adjust_t>& entries,
                                  uint32_t vocab_size, SequenceInput& seq);

}  // namespace pith::runtime
