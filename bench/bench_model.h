// `pith bench model`: whole-model throughput through the engine's batched forward, shaped like
// llama-bench so the numbers compare directly:
//   - prefill (pp): one sequence of `n_prompt` random tokens in one forward, logits for the
//     last one; tokens/s = n_prompt / time.
//   - decode (tg): one sequence generating `n_gen` tokens one forward at a time from an empty
//     context; tokens/s = n_gen / time.
//   - batch decode: B sequences decoding together, one forward per step with one token each,
//     `batch_steps` steps from an empty context; aggregate tokens/s = B * steps / time.
// With `depth` > 0 every test starts after that many tokens of context (prefilled once, copied
// under each sequence; llama-bench's -d), and the decode floor counts their K/V reads too.
// Each figure is the median of `reps` runs after a warm-up. The same run measures the memory
// read bandwidth with the same thread count, and from it the decode floor: bandwidth divided
// by the weight bytes one decode step streams (every layer matrix and the LM head).
// Optionally runs llama.cpp's llama-bench on the same file in the same run for the ratios, and
// the same tests through transformers' generate on the same device (a Python user's baseline;
// bench/transformers_baseline.h).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "backend/backend.h"
#include "backend/kv_dtype.h"

namespace pith::bench {

struct ModelBenchOptions {
  std::string model_path;
  size_t n_prompt = 512;
  size_t n_gen = 128;
  size_t depth = 0;  // tokens of context before every test
  size_t threads = 2;
  std::vector<size_t> batch_sizes;  // empty: no batch decode
  size_t batch_steps = 16;
  int reps = 3;
  size_t bandwidth_bytes = size_t{2} << 30;
  std::string llama_bench;                 // path of llama-bench to run beside (empty: not run)
  std::string transformers;                // a Python with torch + transformers (empty: not run)
  std::string transformers_model;          // its Hugging Face folder (empty: model_path, a folder)
  std::string device = "auto";             // cpu | cuda | cuda:N | auto (engine/backend.h)
  bool profile = false;                    // per-op time of a decode step and a prefill chunk (CPU)
  uint32_t profile_context = 128;          // tokens already in KV for the profile
  std::vector<std::string> profile_cases;  // the profile's cases to run (empty: all four)
  bool cpu_weight_panels = true;  // BackendOptions::cpu_weight_panels (off: the A/B baseline)
  bool cuda_graphs = true;        // BackendOptions::cuda_graphs (off: every launch eager)
  bool cuda_gemv = true;          // BackendOptions::cuda_gemv (off: cuBLASLt for every product)
  // BackendOptions::cuda_attention (pith: the own kernel, the A/B baseline of FlashInfer's)
  CudaAttention cuda_attention = CudaAttention::Auto;
  KvDType kv_dtype = KvDType::Auto;  // BackendOptions::kv_dtype; llama-bench gets the same type
};

// Runs the suite, printing a readable report to stdout; returns the JSON summary.
nlohmann::json run_model_bench(const ModelBenchOptions& options);

}  // namespace pith::bench
