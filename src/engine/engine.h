// The inference layer's facade: one loaded model, its KV page pool and Embed slots, and the
// batched handlers the control layer calls (paper §5.3). Handlers are synchronous and run on
// the caller's thread plus the engine's thread pool; the control layer serialises calls.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "common/thread_pool.h"
#include "engine/embed_pool.h"
#include "engine/forward_batch.h"
#include "engine/kv_pool.h"
#include "engine/model_weights.h"

namespace pith {

struct EngineOptions {
  uint32_t kv_page_size = 16;                 // tokens per KV page (--kv-page-size)
  size_t kv_memory_bytes = size_t{256} << 20; // KV pool budget (--kv-memory)
  uint32_t max_embeds = 4096;                 // Embed slots
  size_t n_threads = 0;                       // 0: one per core
};

class Engine {
 public:
  // Preallocates the KV pool (options.kv_memory_bytes) and the Embed slots. Throws
  // pith::Error when the model's shapes are inconsistent or the budget holds no page.
  Engine(std::shared_ptr<const ModelWeights> weights, const EngineOptions& options);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  const ModelConfig& config() const { return weights_->config; }
  const ModelWeights& weights() const { return *weights_; }
  KvPool& kv_pool() { return kv_pool_; }
  EmbedPool& embeds() { return embeds_; }
  ThreadPool& threads() { return pool_; }

  // One batched forward over all sequences: a single set of matrix multiplies over the
  // flattened inputs of every sequence, attention per sequence over its own pages and mask.
  // Throws pith::Error on an invalid batch (bad page id, lengths that do not add up, ...)
  // before touching any KV state.
  std::vector<SequenceResult> forward(const std::vector<SequenceInput>& batch);

  // Token embeddings (the embedding-table rows) into Embed slots, with their positions.
  // Throws pith::Error (writing nothing) on mismatched lengths, a token out of range or a slot
  // that is not allocated.
  void embed_tokens(std::span<const int32_t> tokens, std::span<const uint32_t> positions,
                    std::span<const uint32_t> slots);

  // Copies n tokens' K/V (all layers) from src page/offset to dst page/offset. Throws
  // pith::Error on a page that is not allocated or a range past a page end.
  void copy_kv(uint32_t src_page, uint32_t dst_page, uint32_t src_offset, uint32_t dst_offset,
               uint32_t n);

  // Next-token distribution from an output Embed (applies output norm + LM head).
  TokenDistribution next_dist(uint32_t embed_slot, uint32_t top_k);

 private:
  struct Scratch;  // reusable activation buffers (engine.cpp), sized to the largest batch seen

  void validate(const std::vector<SequenceInput>& batch) const;

  std::shared_ptr<const ModelWeights> weights_;
  ThreadPool pool_;
  KvPool kv_pool_;
  EmbedPool embeds_;
  std::unique_ptr<Scratch> scratch_;
};

}  // namespace pith
