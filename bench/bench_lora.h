// `pith bench lora`: multi-LoRA decode. A batch of `batch` sequences decodes greedily twice
// over, interleaved round by round (ABAB): once on the base model alone, once with `adapters`
// random adapters (rank `rank`, every linear projection, made by `pith model gen-lora`) mixed
// through the batch, sequence i on adapter i mod `adapters`. Reports both decode throughputs,
// their ratio (the target: >= 0.8 on the 1B shape, rank 16, 8 adapters in a batch of
// 32), each adapter's memory, and the time of one mixed step per projection kind.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace pith::bench {

struct LoraBenchOptions {
  std::string model;
  int batch = 32;
  int adapters = 8;
  int rank = 16;
  std::string adapter_dtype = "f16";
  int context = 128;  // prompt tokens per sequence before decoding
  int steps = 8;      // decode steps per round and mode
  int rounds = 4;
  int threads = 2;
  std::string device = "auto";
};

nlohmann::json run_lora_bench(const LoraBenchOptions& options);

}  // namespace pith::bench
