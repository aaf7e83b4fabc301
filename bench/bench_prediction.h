// `pith bench prediction`: OpenAI's predicted outputs (`prediction`) through a real `pith serve`.
// Each prompt's greedy completion is the reference; it is then requested again with no
// prediction and with a prediction (the reference itself, an edited copy, an unrelated text),
// alternated. Reports tokens/s of each, the speedup, how much of the prediction was taken and
// rejected, and how many predicted outputs equal the reference.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace pith::bench {

struct PredictionBenchOptions {
  std::string model;
  int prompts = 4;
  int max_tokens = 128;
  int runs = 3;  // alternated runs per prompt and kind (the median is reported)
  int threads = 2;
  std::string device = "auto";  // cpu | cuda | cuda:N | auto (engine/backend.h)
  // logit_bias -100 on tokens 128-255 in every request: with the byte vocabulary
  // (tests/data/tokenizer/byte-vocab.gguf) a random model's text is then ASCII, and so valid.
  bool ascii_only = false;
};

nlohmann::json run_prediction_bench(const PredictionBenchOptions& options);

}  // namespace pith::bench
