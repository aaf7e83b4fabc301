// The CPU backend: one loaded model, its KV page pool and Embed slots in host memory, and the
// batched handlers the control layer calls through engine/backend.h (paper §5.3). Handlers are
// synchronous and run on the caller's thread plus the engine's thread pool; the control layer
// serialises calls.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

#include "backend/backend.h"
#include "backend/forward_batch.h"
#include "backend/forward_profile.h"
#include "common/thread_pool.h"
#include "engine/embed_pool.h"
#include "engine/kv_pool.h"
#include "engine/model_weights.h"
#include "engine/state_pool.h"

namespace pith {

// The CPU engine reads kv_page_size, kv_memory_bytes, max_embeds and n_threads.
using EngineOptions = BackendOptions;

class Engine final : public Backend {
 public:
  // Preallocates the KV pool (options.kv_memory_bytes) and the Embed slots. Throws
  // pith::Error when the model's shapes are inconsistent or the budget holds no page.
  Engine(std::shared_ptr<const ModelWeights> weights, const EngineOptions& options);
  ~Engine() override;
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  const ModelConfig& config() const override { return weights_->config; }
  BackendInfo info() const override;
  uint32_t page_size() const override { return kv_pool_.page_size(); }
  SlotPool& page_slots() override { return kv_pool_.slots(); }
  SlotPool& embed_slots() override { return embeds_.slots(); }
  SlotPool& state_slots() override { return states_.slots(); }

  const ModelWeights& weights() const { return *weights_; }
  KvPool& kv_pool() { return kv_pool_; }
  EmbedPool& embeds() { return embeds_; }
  StatePool& states() { return states_; }
  ThreadPool& threads() { return pool_; }

  // One batched forward over all sequences: a single set of matrix multiplies over the
  // flattened inputs of every sequence, attention per sequence over its own pages and mask.
  // Throws pith::Error on an invalid batch (bad page id, lengths that do not add up, ...)
  // before touching any KV state.
  std::vector<SequenceResult> forward(const std::vector<SequenceInput>& batch) override;

  // Token embeddings (the embedding-table rows) into Embed slots, with their positions.
  // Throws pith::Error (writing nothing) on mismatched lengths, a token out of range or a slot
  // that is not allocated.
  void embed_tokens(std::span<const int32_t> tokens, std::span<const uint32_t> positions,
                    std::span<const uint32_t> slots) override;

  // Copies n tokens' K/V (all layers) from src page/offset to dst page/offset. Throws
  // pith::Error on a page that is not allocated or a range past a page end.
  void copy_kv(uint32_t src_page, uint32_t dst_page, uint32_t src_offset, uint32_t dst_offset,
               uint32_t n) override;

  // Next-token distribution from an output Embed (applies output norm + LM head).
  TokenDistribution next_dist(uint32_t embed_slot, uint32_t top_k) override;

  // Page images are the pool's f32 pages as they are (kv_pool.h layout).
  size_t kv_page_bytes() const override { return kv_pool_.shape().page_bytes(); }
  void save_kv_pages(std::span<const uint32_t> pages, std::span<std::byte> out) override;
  void load_kv_pages(std::span<const uint32_t> pages, std::span<const std::byte> in) override;

  // State images are a slot's f32 state as it is (state_pool.h layout).
  size_t state_bytes() const override { return states_.slot_bytes(); }
  void clear_states(std::span<const uint32_t> slots) override;
  void copy_state(uint32_t src, uint32_t dst) override;
  void save_states(std::span<const uint32_t> slots, std::span<std::byte> out) override;
  void load_states(std::span<const uint32_t> slots, std::span<const std::byte> in) override;

  // Adapters are checked against the model (layer count, shapes) when loaded; a forward keeps
  // the ones its batch uses alive until it returns.
  void load_adapter(uint32_t id, std::shared_ptr<const LoraAdapter> adapter) override;
  void unload_adapter(uint32_t id) override;

  // Adds each forward's time per operation to *profile (nullptr: off). Not thread-safe: set it
  // between forwards.
  bool set_profile(ForwardProfile* profile) override {
    profile_ = profile;
    return true;
  }

 private:
  // The input embedding of one token: its table row, times embed_scale (gemma).
  void embed_token(int32_t token, float* out) const;
  float* per_layer_inputs(const float* x, size_t T, const int32_t* tokens);
  void experts_beside_dense(const LayerWeights& layer, const float* x, size_t T, float* tmp);

  struct Scratch;  // reusable activation buffers (engine.cpp), sized to the largest batch seen

  std::shared_ptr<const ModelWeights> weights_;
  size_t panel_bytes_ = 0;  // weight panels packed at load (BackendOptions::cpu_weight_panels)
  ThreadPool pool_;
  KvPool kv_pool_;
  EmbedPool embeds_;
  StatePool states_;
  std::unique_ptr<Scratch> scratch_;
  ForwardProfile* profile_ = nullptr;
  std::mutex adapters_mu_;  // load/unload run on other threads than forward
  std::map<uint32_t, std::shared_ptr<const LoraAdapter>> adapters_;
};

}  // namespace pith
