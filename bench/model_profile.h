// `pith bench model --profile`: where the time of one forward goes, per operation
// (engine/forward_profile.h), for a decode step and a 512-token prefill chunk at batch 1 and 32
// (the chunk at batch 32 is 32 sequences of 16 tokens), over `context` tokens already in every
// sequence's KV. CPU engine only.
#pragma once

#include <cstddef>
#include <memory>

#include <nlohmann/json.hpp>

#include "backend/kv_dtype.h"

namespace pith {
struct ModelWeights;
}

namespace pith::bench {

nlohmann::json run_forward_profile(std::shared_ptr<const ModelWeights> weights, size_t threads,
                                   uint32_t context, int reps, KvDType kv_dtype);

}  // namespace pith::bench
