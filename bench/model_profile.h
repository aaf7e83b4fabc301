// `pith bench model --profile`: where the time of one forward goes, per operation
// (backend/forward_profile.h), for a decode step and a 512-token prefill chunk at batch 1 and 32
// (the chunk at batch 32 is 32 sequences of 16 tokens), over `context` tokens already in every
// sequence's KV. Any backend that breaks its forwards down (Backend::set_profile: the CPU engine
// by its ops' joins, the CUDA backend by events between its eager launches).
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "backend/backend.h"

namespace pith {
struct ModelWeights;
}

namespace pith::bench {

// The cases' names, in the order they run.
const std::vector<std::string>& forward_profile_cases();
// Fails, naming the cases there are, unless every name in `only` is one of them.
void check_profile_cases(const std::vector<std::string>& only);

// Builds its own backend from `options` (device, threads, KV type; the KV pool and the state
// pool are sized here for the cases). `only`: the cases to run (empty: all). The profiled
// forwards are also what an external profiler started with its collection off sees (the CUDA
// backend brackets them with cudaProfilerStart/Stop: `ncu --profile-from-start off`).
nlohmann::json run_forward_profile(std::shared_ptr<const ModelWeights> weights,
                                   const BackendOptions& options, uint32_t context, int reps,
                                   const std::vector<std::string>& only = {});

}  // namespace pith::bench
