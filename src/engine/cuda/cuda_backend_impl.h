// The CUDA backend's class (cuda_backend.h makes it; docs/gpu.md), shared by its two sources:
// cuda_backend.cpp (startup, forward, the LM head) and cuda_backend_calls.cpp (the other
// Backend calls: embeddings, KV and state copies and images, adapters, next_dist).
#pragma once

#include <cuda_profiler_api.h>

#include <array>
#include <map>
#include <mutex>

#include "backend/batch_validation.h"
#include "common/error.h"
#include "engine/cuda/batch_plan.h"
#include "engine/cuda/cuda_backend.h"
#include "engine/cuda/cuda_check.h"
#include "engine/cuda/decode_graphs.h"
#include "engine/cuda/device_memory.h"
#include "engine/cuda/device_weights.h"
#include "engine/cuda/family_support.h"
#include "engine/cuda/gemm.h"
#include "engine/cuda/graph_plan.h"
#include "engine/cuda/kernels.h"
#include "engine/cuda/lora.h"
#include "engine/cuda/moe_layers.h"
#include "engine/cuda/op_events.h"
#include "engine/cuda/paged_attention.h"
#include "engine/cuda/per_layer_inputs.h"
#include "engine/cuda/recurrent_layers.h"
#include "engine/cuda/staging.h"
#include "engine/cuda/workspace.h"
#include "engine/model_weights.h"
#include "engine/rope.h"
#include "engine/token_distribution.h"

namespace pith::cuda {

constexpr uint32_t kPlannedTokens = 2048;  // activations preallocated for this many rows
constexpr uint32_t kPlannedSeqs = 256;

inline size_t mib(size_t bytes) {
  return bytes >> 20;
}

// Makes `device` current for this thread (before the stream and buffers are created on it).
inline int select_device(int device) {
  PITH_CUDA_CHECK(cudaSetDevice(device));
  return device;
}

class CudaBackend final : public Backend {
 public:
  CudaBackend(std::shared_ptr<const ModelWeights> weights, const BackendOptions& options,
              int device);
  ~CudaBackend() override;

  const ModelConfig& config() const override { return weights_->config; }
  BackendInfo info() const override;
  uint32_t page_size() const override { return layout_.page_size; }
  SlotPool& page_slots() override { return *pages_; }
  SlotPool& embed_slots() override { return *embeds_; }

  std::vector<SequenceResult> forward(const std::vector<SequenceInput>& batch) override;
  void embed_tokens(std::span<const int32_t> tokens, std::span<const uint32_t> positions,
                    std::span<const uint32_t> slots) override;
  void copy_kv(uint32_t src_page, uint32_t dst_page, uint32_t src_offset, uint32_t dst_offset,
               uint32_t n) override;
  TokenDistribution next_dist(uint32_t embed_slot, uint32_t top_k) override;
  // Page images are the pool's pages as stored (KvPoolLayout, the KV dtype), copied on the
  // stream so they are ordered after the forwards that wrote them.
  size_t kv_page_bytes() const override { return layout_.page_elems() * layout_.elem_bytes(); }
  void save_kv_pages(std::span<const uint32_t> pages, std::span<std::byte> out) override;
  void load_kv_pages(std::span<const uint32_t> pages, std::span<const std::byte> in) override;

  // Recurrent states of hybrid models, in device memory (recurrent_layers.h).
  SlotPool& state_slots() override { return states_->slots(); }
  size_t state_bytes() const override { return states_->slot_bytes(); }
  void clear_states(std::span<const uint32_t> slots) override;
  void copy_state(uint32_t src, uint32_t dst) override;
  void save_states(std::span<const uint32_t> slots, std::span<std::byte> out) override;
  void load_states(std::span<const uint32_t> slots, std::span<const std::byte> in) override;

  // Adapters are uploaded in the compute type beside the weights (engine/cuda/lora.h).
  void load_adapter(uint32_t id, std::shared_ptr<const LoraAdapter> adapter) override;
  void unload_adapter(uint32_t id) override;

  // Profiled forwards run eagerly (no graphs), an event after each op (op_events.h). They are
  // also the range an external profiler whose collection starts off sees (cudaProfilerStart /
  // Stop; `ncu --profile-from-start off`), so it measures the same kernels.
  bool set_profile(ForwardProfile* profile) override {
    if ((profile != nullptr) != (profile_ != nullptr))
      PITH_CUDA_CHECK(profile ? cudaProfilerStart() : cudaProfilerStop());
    profile_ = profile;
    return true;
  }
  // Device-to-device copies of `bytes` (bytes read + bytes written over the time, the median
  // of five): the bandwidth the decode floor divides by.
  double weight_memory_bandwidth_gb_s(size_t bytes) override;
  // A [4096][4096] x [4096][4096] product on cuBLASLt in the compute type (median of five).
  double matmul_peak_gflop_s() override;

  CudaStepTime last_step_time() const { return last_step_; }
  CudaGemmChoices gemm_choices() const {
    const Gemm::SkinnyStats s = gemm_->skinny_stats();
    return {s.own, s.cublas, s.fused, s.unfused};
  }
  CudaGraphStats graph_stats() const {
    return {graphs_on_ && graphs_.usable(), graphs_.captures(), graphs_.replays()};
  }

 private:
  // Device addresses of one forward's staged inputs, and its shape.
  struct StepInputs {
    uint32_t T = 0, n_topk = 0, n_logits = 0, n_hidden = 0, k_max = 0;
    const int32_t* tokens = nullptr;
    const uint32_t *token_rows = nullptr, *embed_slots = nullptr, *embed_in_rows = nullptr;
    const uint32_t *write_pages = nullptr, *write_slots = nullptr;
    const uint32_t *out_rows = nullptr, *out_slots = nullptr;  // Embed outputs
    const float *cos = nullptr, *sin = nullptr, *cos_sliding = nullptr, *sin_sliding = nullptr;
    const int32_t* ple_tokens = nullptr;  // per-layer token ids (gemma4 E2B/E4B), else null
    const uint32_t *lm_rows = nullptr, *ks = nullptr;
    // Token masks of the top-K rows (kernels.h softmax_topk): a word offset per row, the words.
    const uint32_t *mask_at = nullptr, *masks = nullptr;
    // Logit adjustments of the top-K rows (kernels.h adjust_logits): [n_topk][2] (word offset
    // from `masks`, count); `adjusted`: some row has any (the kernel runs).
    const uint32_t* adjust_at = nullptr;
    bool adjusted = false;
    LoraStep* lora = nullptr;
  };
  // The step's device work, from the embeddings to the LM head's copies into host_out_: only
  // launches on stream_ (a CUDA graph may capture it).
  void enqueue_step(const StepInputs& in);
  // The op enqueued last ends here (a profiled forward; nothing otherwise).
  void op_done(ForwardProfile::Op op) {
    if (profile_) op_events_.mark(op, stream_.get());
  }
  // Everything enqueue_step's launches take by value or address (decode_graphs.h).
  uint64_t step_fingerprint(const StepInputs& in) const;
  // Output norm over ws_.out_x's n_topk + n_logits + n_hidden rows (in that order), LM head
  // over the first n_topk + n_logits; in.ks, in.mask_at: device [n_topk]. Enqueues the copies
  // of the results into host_out_ (the hidden rows in the activation type).
  void lm_head(const StepInputs& in);
  const int32_t* host_topk_ids() const { return host_out_.as<int32_t>(); }
  const float* host_topk_probs(uint32_t n_topk, uint32_t k_max) const {
    return host_out_.as<float>() + size_t{n_topk} * k_max;
  }
  const float* host_logits(uint32_t n_topk, uint32_t k_max) const {
    return host_out_.as<float>() + 2 * size_t{n_topk} * k_max;
  }
  const void* host_hidden(uint32_t n_topk, uint32_t k_max, uint32_t n_logits) const {
    return host_logits(n_topk, k_max) + size_t{n_logits} * config().vocab_size;
  }
  // host_out_'s bytes for a step's results.
  size_t host_out_bytes(uint32_t n_topk, uint32_t k_max, uint32_t n_logits,
                        uint32_t n_hidden) const {
    return std::max<size_t>(
        1, (2 * size_t{n_topk} * k_max + size_t{n_logits} * config().vocab_size) * 4 +
               size_t{n_hidden} * config().d_model * elem_bytes(act_));
  }

  std::shared_ptr<const ModelWeights> weights_;
  int device_;
  std::string device_name_;
  size_t device_memory_ = 0;
  DType act_;
  Stream stream_;
  KvPoolLayout layout_;
  std::unique_ptr<DeviceWeights> dev_weights_;
  DeviceBuffer kv_pool_;
  DeviceBuffer embed_store_;  // F32 [max_embeds][d_model]
  std::unique_ptr<SlotPool> pages_, embeds_;
  std::unique_ptr<DeviceStatePool> states_;  // no slots unless the model is hybrid
  std::unique_ptr<DeltaNetMixer> mixer_;
  std::unique_ptr<MoeFfn> moe_;
  std::unique_ptr<PerLayerInputs> per_layer_;  // gemma4 E2B/E4B; no buffers otherwise
  // The token whose embedding each Embed slot holds (embed_tokens), -1 for a hidden state:
  // per-layer token embeddings look it up again (the CPU's EmbedPool::token).
  std::vector<int32_t> embed_tokens_;
  std::unique_ptr<Gemm> gemm_;
  std::unique_ptr<PagedAttention> attention_;
  Workspace ws_;
  RopeTable rope_;
  RopeTable rope_sliding_;  // sliding layers' own base (gemma3); the same angles otherwise
  BatchPlan plan_;
  Staging staging_;
  PinnedBuffer host_out_;  // top-K ids, probs and logits rows copied back
  Event done_;
  Event step_start_{true}, step_end_{true};
  CudaStepTime last_step_;
  ForwardProfile* profile_ = nullptr;
  OpEvents op_events_;
  DecodeGraphs graphs_;
  bool graphs_on_ = false;  // options.cuda_graphs and a family whose decode step graphs hold
  // A KV page past the control layer's pool: padding rows of graph steps write and read it.
  std::array<uint32_t, 1> pad_page_{};
  std::mutex adapters_mu_;  // load/unload come from other threads than forward
  std::map<uint32_t, std::shared_ptr<const DeviceLoraAdapter>> adapters_;
  std::map<uint32_t, std::shared_ptr<const DeviceLoraAdapter>> step_adapters_;  // held per forward
  LoraStep lora_;
};

}  // namespace pith::cuda
