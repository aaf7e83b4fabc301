// The LoRA part of one forward (engine/lora_adapter.h): the batch's tokens grouped by adapter,
// and the deltas added to a projection's output. Each group runs two thin matmuls per target
// (x A^T, then (.) B^T) over only its own tokens, gathered when its sequences are not adjacent,
// so a batch that mixes adapters costs each adapter's weights once, not a merged model each.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "common/thread_pool.h"
#include "engine/lora_adapter.h"

namespace pith {

class LoraBatch {
 public:
  void clear();
  // Tokens [first, first + n) of the flattened batch use `adapter` (nullptr: none).
  void add_run(const LoraAdapter* adapter, size_t first, size_t n);
  bool empty() const { return groups_.empty(); }

  // y[t][0:out_dim] += scale * B (A x[t]) for every token whose adapter has `target` on `layer`.
  // x is [T][in_dim], y is [T][out_dim] of the whole batch.
  void apply(ThreadPool& pool, uint32_t layer, LoraTarget target, const float* x, size_t in_dim,
             float* y, size_t out_dim);

 private:
  struct Group {
    const LoraAdapter* adapter;
    std::vector<std::pair<size_t, size_t>> runs;  // (first token, count)
    size_t n_tokens = 0;
  };
  std::vector<Group> groups_;
  std::vector<float> xg_, u_, v_;  // gathered inputs, x A^T, and the delta
};

}  // namespace pith
