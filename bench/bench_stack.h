// The in-process serving stack the inferlet benchmarks run on: the model, device, engine
// threads and native code cache of their options, quiet loading.
#pragma once

#include <string>

#include "stack/serving_stack.h"

namespace pith::bench {

inline ServingOptions bench_serving_options(const std::string& model, const std::string& device,
                                            int threads, const std::string& cache_dir) {
  ServingOptions so;
  so.model_path = model;
  so.quiet_load = true;
  so.engine.device = device;
  so.engine.n_threads = static_cast<size_t>(threads);
  so.runtime.compiler.cache_dir = cache_dir;
  return so;
}

}  // namespace pith::bench
