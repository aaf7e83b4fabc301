// CudaBackend: the Backend seam on one GPU. See cuda_backend.h and docs/gpu.md.
//
// A forward mirrors the CPU engine (engine.cpp) op for op, on one stream:
//   x = embed(inputs) (* embed_scale)                            [T][d] F32 residual stream
//   per layer: h = rmsnorm(x += delta) (attn_norm)                add_rmsnorm
//              q, k, v = h Wq^T, h Wk^T, h Wv^T (+ biases)        cuBLASLt, add_bias
//              per-head q/k norms; rope(q), rope(k), K/V -> pages rmsnorm_rows, rope_append
//              a = attention(q, pages, masks, layer options)      PagedAttention
//              delta = a Wo^T (F32) (post-norm); h = rmsnorm(x += delta)
//                                                   cuBLASLt, add_rmsnorm (ffn_norm)
//              gu = h [Wgate; Wup]^T; f = act(g) * u              cuBLASLt, gated_activation
//              delta = f Wdown^T (F32) (post-norm)                cuBLASLt
//   x += delta; Embed outputs <- rows of x; LM-head rows: rmsnorm (output_norm), logits in row
//   chunks (soft-capped where the family caps them), softmax + top-K on the device; only
//   ids/probs and asked-for logits rows come back. The family options in brackets are the ones
//   family_support.h lists; a model using any other is refused at startup.
// Layers take their own attention shape and FFN width (gemma4's global layers, KV-sharing
// layers that read an earlier layer's pages, double-wide FFNs); gemma4's per-layer embedding
// branch and layer scale need the whole residual, so those layers add their delta at once.
// Otherwise the residual adds are fused into the next norm, the CPU's order of operations.
// A pure decode step (graph_plan.h) is padded to its batch bucket and runs as a CUDA graph
// (decode_graphs.h), captured once per bucket (after one eager warm-up step) and replayed: one
// launch instead of hundreds.
#include "engine/cuda/cuda_backend_impl.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cstring>

#include "common/fp16.h"

namespace pith::cuda {

CudaBackend::CudaBackend(std::shared_ptr<const ModelWeights> weights, const BackendOptions& options,
                         int device)
    : weights_((PITH_CHECK(weights != nullptr), std::move(weights))),
      device_(select_device(device)),
      act_(compute_mode(*weights_)),
      rope_(weights_->config),
      rope_sliding_(sliding_rope_table(weights_->config)) {
  const ModelConfig& c = weights_->config;
  validate_model_shapes(*weights_);
  if (const std::string missing = unsupported_family_options(c); missing != "none")
    fail("the CUDA backend does not run {} yet, which '{}' uses (run it with --device cpu)",
         missing, c.architecture);
  cudaDeviceProp prop{};
  PITH_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  device_name_ = prop.name;
  size_t free_bytes = 0;
  PITH_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &device_memory_));

  // K/V are stored in the activation type the kernels compute in; --kv-dtype may name it.
  const KvDType act_kv = act_ == DType::F32 ? KvDType::F32 : KvDType::BF16;
  if (options.kv_dtype != KvDType::Auto && options.kv_dtype != act_kv)
    fail("--kv-dtype {}: the CUDA backend stores K/V as {} for this model (use auto or {})",
         kv_dtype_name(options.kv_dtype), kv_dtype_name(act_kv), kv_dtype_name(act_kv));
  // Pages hold the layers that store K/V (not a hybrid model's recurrent layers, nor gemma4's
  // KV-sharing ones), each in its own shape where they differ (gemma4's global layers).
  layout_ = KvPoolLayout{act_, c.n_kv_layers(), c.n_kv_heads, c.head_dim, options.kv_page_size, {}};
  if (!c.uniform_attention())
    for (uint32_t l = 0; l < c.n_layers; ++l)
      if (c.layer_has_kv(l)) layout_.layers.push_back({c.kv_heads_of(l), c.head_dim_of(l)});
  if (options.kv_page_size == 0) fail("cuda: KV page size must be at least 1");
  if (options.cuda_attention == CudaAttention::FlashInfer) {
    const std::string why = PagedAttention::flashinfer_unsuitable(layout_, c.n_heads);
    if (!why.empty()) fail("--cuda-attention flashinfer: {}; auto or pith run the own kernel", why);
  }
  const size_t page_bytes = layout_.page_elems() * layout_.elem_bytes();
  const size_t n_pages = options.kv_memory_bytes / page_bytes;
  if (n_pages == 0)
    fail("KV pool: a budget of {} bytes does not hold one page of {} bytes ({} tokens)",
         options.kv_memory_bytes, page_bytes, options.kv_page_size);
  if (options.max_embeds == 0) fail("cuda: Embed slot capacity must be at least 1");

  // Everything this backend will hold, checked before the first allocation.
  const size_t weight_bytes = device_weight_bytes(*weights_, act_);
  const size_t kv_bytes = (n_pages + 1) * page_bytes;  // + the padding page of graph steps
  const size_t state_budget =
      options.state_memory_bytes > 0 ? options.state_memory_bytes : options.kv_memory_bytes;
  const size_t state_bytes = DeviceStatePool::bytes_for(c, state_budget);
  const size_t workspace_bytes =
      size_t{options.max_embeds} * c.d_model * 4 +
      size_t{kPlannedTokens} *
          (Workspace::token_bytes(c, act_) + DeltaNetMixer::token_bytes(c, act_) +
           MoeFfn::token_bytes(c, act_) + PerLayerInputs::token_bytes(c, act_)) +
      size_t{kLmChunkRows} * Workspace::lm_row_bytes(c, act_) + Workspace::fixed_bytes(c) +
      (size_t{32} << 20);  // cuBLASLt workspace
  const size_t need = weight_bytes + kv_bytes + state_bytes + workspace_bytes;
  const double fraction = options.gpu_memory_fraction;
  if (!(fraction > 0 && fraction <= 1))
    fail("cuda: GPU memory fraction {} must be in (0, 1]", fraction);
  const auto cap = static_cast<size_t>(fraction * static_cast<double>(device_memory_));
  if (need > cap || need > free_bytes)
    fail(
        "cuda: {} (cuda:{}) cannot hold weights {} MiB + KV pool {} MiB ({} pages) + "
        "recurrent states {} MiB + workspace {} MiB = {} MiB: the cap is {:.0f}% of {} MiB = {} "
        "MiB, {} MiB free; lower --kv-memory (or --state-memory) or raise --gpu-memory-fraction",
        device_name_, device, mib(weight_bytes), mib(kv_bytes), n_pages, mib(state_bytes),
        mib(workspace_bytes), mib(need), fraction * 100, mib(device_memory_), mib(cap),
        mib(free_bytes));
  // Page numbers are int32 in the attention plans (FlashInfer's indices too); + the pad page.
  // (After the memory check: a budget this large fails there first on any GPU of today.)
  if (n_pages >= INT32_MAX)
    fail("KV pool: {} pages is too many (at most {}); lower --kv-memory", n_pages, INT32_MAX - 1);

  dev_weights_ = std::make_unique<DeviceWeights>(*weights_, act_, stream_.get());
  kv_pool_.reserve(kv_bytes);
  pad_page_[0] = static_cast<uint32_t>(n_pages);
  // Graphs hold the decode steps of every family the backend runs: experts are routed on the
  // device, recurrent layers take their states' slots from the staged inputs (padding rows
  // share a spare slot), and every workspace address is in the launch fingerprint.
  graphs_on_ = options.cuda_graphs;
  embed_store_.reserve(size_t{options.max_embeds} * c.d_model * 4);
  pages_ = std::make_unique<SlotPool>(static_cast<uint32_t>(n_pages), "KV pages");
  embeds_ = std::make_unique<SlotPool>(options.max_embeds, "Embed slots");
  states_ = std::make_unique<DeviceStatePool>(c, state_budget, stream_.get());
  mixer_ = std::make_unique<DeltaNetMixer>(c, act_);
  mixer_->ensure(kPlannedTokens);
  moe_ = std::make_unique<MoeFfn>(c, act_);
  moe_->ensure(kPlannedTokens);
  per_layer_ = std::make_unique<PerLayerInputs>(c, act_);
  per_layer_->ensure(kPlannedTokens);
  embed_tokens_.assign(options.max_embeds, -1);
  gemm_ = std::make_unique<Gemm>();
  if (!options.cuda_gemv)
    gemm_->set_skinny(Gemm::Skinny::Cublas);
  else if (options.cuda_gemv_always)
    gemm_->set_skinny(Gemm::Skinny::Own);
  attention_ = std::make_unique<PagedAttention>(layout_, c.n_heads, kPlannedTokens, kPlannedSeqs,
                                                options.cuda_attention != CudaAttention::Pith);
  ws_.ensure(c, act_, kPlannedTokens, kLmChunkRows);
  spdlog::info(
      "cuda: {} (cuda:{}, {} MiB): weights {} MiB, KV pool {} MiB ({} pages of {} "
      "tokens), {}workspace {} MiB; {} mode, attention: {}, decode CUDA graphs: {}",
      device_name_, device, mib(device_memory_), mib(dev_weights_->bytes()), mib(kv_bytes), n_pages,
      layout_.page_size,
      states_->slots().capacity() > 0
          ? fmt::format("recurrent states {} MiB ({} slots), ", mib(states_->bytes()),
                        states_->slots().capacity())
          : std::string(),
      mib(info().workspace_bytes), act_ == DType::F32 ? "f32" : "bf16",
      attention_->implementation(), graphs_on_ ? "on" : "off");
}

CudaBackend::~CudaBackend() {
  cudaSetDevice(device_);
  cudaStreamSynchronize(stream_.get());
}

BackendInfo CudaBackend::info() const {
  BackendInfo i;
  i.name = "cuda";
  i.device = fmt::format("{} (cuda:{})", device_name_, device_);
  i.device_memory_bytes = device_memory_;
  i.weight_bytes = dev_weights_->bytes();
  i.kv_bytes = kv_pool_.bytes();
  i.kv_dtype = layout_.dtype == DType::F32 ? KvDType::F32 : KvDType::BF16;
  i.state_bytes = states_->bytes();
  i.attention = attention_->implementation();
  i.workspace_bytes = ws_.bytes() + mixer_->bytes() + moe_->bytes() + per_layer_->bytes() +
                      embed_store_.bytes() + gemm_->workspace_bytes() + staging_.device_bytes() +
                      lora_.scratch_bytes();
  return i;
}

std::vector<SequenceResult> CudaBackend::forward(const std::vector<SequenceInput>& batch) {
  const auto wall_start = std::chrono::steady_clock::now();
  validate_batch(batch, config(), layout_.page_size, *pages_, *embeds_);
  validate_batch_states(batch, config(), states_->slots());
  const ModelConfig& c = config();
  std::vector<SequenceResult> results(batch.size());
  for (size_t si = 0; si < batch.size(); ++si) results[si].outputs.resize(batch[si].outputs.size());
  plan_.build(batch, layout_.page_size, c.vocab_size, kTopKMax);
  // A pure decode step runs as the CUDA graph of its bucket, padded to it (unless profiled: a
  // graph has no events between its ops).
  const bool graph =
      graphs_on_ && graphs_.usable() && !profile_ && is_graphable_decode(batch, plan_);
  if (graph) pad_decode_plan(plan_, decode_graph_bucket(plan_.n_tokens), pad_page_);
  const uint32_t T = plan_.n_tokens;
  if (T == 0) return results;
  // The batch's adapters, held until this forward returns (an unload may race with it).
  step_adapters_.clear();
  for (size_t si = 0; si < batch.size(); ++si) {
    const uint32_t id = batch[si].adapter;
    if (id == 0 || step_adapters_.count(id)) continue;
    std::lock_guard lock(adapters_mu_);
    auto it = adapters_.find(id);
    if (it == adapters_.end()) fail("forward: sequence {}: adapter {} is not loaded", si, id);
    step_adapters_[id] = it->second;
  }
  const size_t lora_bytes = lora_.plan(batch, step_adapters_);
  PITH_CUDA_CHECK(cudaSetDevice(device_));
  cudaStream_t s = stream_.get();
  const uint32_t np = rope_.n_pairs(), np_s = rope_sliding_.n_pairs();
  const bool sliding_rope = c.rope_theta_local > 0;  // a second angle table for sliding layers
  const auto n_topk = static_cast<uint32_t>(plan_.topk_rows.size());
  const auto n_logits = static_cast<uint32_t>(plan_.logits_rows.size());
  const auto n_hidden = static_cast<uint32_t>(plan_.hidden_rows.size());
  const uint32_t R = n_topk + n_logits + n_hidden;
  ws_.ensure(c, act_, T, R);
  mixer_->ensure(T);
  moe_->ensure(T);
  per_layer_->ensure(T);

  // Inputs: one pinned staging buffer, one upload.
  const size_t n_idx = 2 * plan_.token_rows.size() + 2 * plan_.embed_rows.size() + 2 * T +
                       2 * plan_.embed_out_rows.size() + 2 * R;
  const size_t angle_floats = 2 * size_t{T} * (np + (sliding_rope ? np_s : 0));
  // Graph steps: every array's length depends on the bucket alone (padding rows included).
  const StateRows states = c.hybrid() ? state_rows(batch, T, states_->pad_slot()) : StateRows{};
  const size_t n_state_idx = 3 * states.slot.size();
  const size_t n_ple_tokens = c.d_per_layer_input > 0 ? T : 0;
  // Token masks as 32-bit words (the bytes of the 64-bit ones on a little-endian host).
  const size_t mask_words = (size_t{c.vocab_size} + 63) / 64 * 2;
  const size_t n_mask_idx = n_topk + plan_.n_masked * mask_words;
  const size_t n_adjust_idx = 2 * size_t{n_topk} + 4 * size_t{plan_.n_adjusts};
  staging_.begin((n_idx + angle_floats + n_state_idx + n_ple_tokens + n_mask_idx + n_adjust_idx) *
                     4 +
                 lora_bytes);
  const int32_t* tokens = staging_.put<int32_t>(plan_.tokens);
  const uint32_t* token_rows = staging_.put<uint32_t>(plan_.token_rows);
  const uint32_t* embed_slots = staging_.put<uint32_t>(plan_.embed_slots);
  const uint32_t* embed_in_rows = staging_.put<uint32_t>(plan_.embed_rows);
  const uint32_t* write_pages = staging_.put<uint32_t>(plan_.write_pages);
  const uint32_t* write_slots = staging_.put<uint32_t>(plan_.write_slots);
  const uint32_t* out_rows = staging_.put<uint32_t>(plan_.embed_out_rows);
  const uint32_t* out_slots = staging_.put<uint32_t>(plan_.embed_out_slots);
  float* cos_h = staging_.alloc<float>(size_t{T} * np);
  float* sin_h = staging_.alloc<float>(size_t{T} * np);
  for (uint32_t t = 0; t < T; ++t)
    rope_.angles(plan_.positions[t], cos_h + size_t{t} * np, sin_h + size_t{t} * np);
  float* cos_sh = cos_h;
  float* sin_sh = sin_h;
  if (sliding_rope) {
    cos_sh = staging_.alloc<float>(size_t{T} * np_s);
    sin_sh = staging_.alloc<float>(size_t{T} * np_s);
    for (uint32_t t = 0; t < T; ++t)
      rope_sliding_.angles(plan_.positions[t], cos_sh + size_t{t} * np_s,
                           sin_sh + size_t{t} * np_s);
  }
  if (c.hybrid()) {  // each sequence's rows and state slot, for the recurrent layers
    const uint32_t* first = staging_.put<uint32_t>(states.first);
    const uint32_t* count = staging_.put<uint32_t>(states.count);
    const uint32_t* slot = staging_.put<uint32_t>(states.slot);
    mixer_->set_sequences(first, count, slot, static_cast<uint32_t>(states.slot.size()), *states_);
  }
  // Per-layer token embeddings: every row's token, an Embed row's that of its slot (0 for a
  // hidden state, as llama.cpp and the CPU engine, and for a graph step's padding rows).
  int32_t* ple_tokens_h = nullptr;
  if (c.d_per_layer_input > 0) {
    ple_tokens_h = staging_.alloc<int32_t>(T);
    std::fill(ple_tokens_h, ple_tokens_h + T, 0);
    uint32_t row = 0;
    for (const SequenceInput& seq : batch)
      for (size_t i = 0; i < seq.n_inputs(); ++i, ++row) {
        const int32_t tok = seq.tokens.empty() ? embed_tokens_[seq.embed_slots[i]] : seq.tokens[i];
        ple_tokens_h[row] = tok >= 0 ? tok : 0;
      }
  }
  uint32_t* lm_rows_h = staging_.alloc<uint32_t>(R);
  uint32_t* ks_h = staging_.alloc<uint32_t>(n_topk);
  for (uint32_t j = 0; j < n_topk; ++j) {
    lm_rows_h[j] = plan_.topk_rows[j].row;
    ks_h[j] = plan_.topk_rows[j].top_k;
  }
  for (uint32_t j = 0; j < n_logits; ++j) lm_rows_h[n_topk + j] = plan_.logits_rows[j].row;
  for (uint32_t j = 0; j < n_hidden; ++j)
    lm_rows_h[n_topk + n_logits + j] = plan_.hidden_rows[j].row;
  // Always staged (a graph step's masks and adjustments change without a recapture): the
  // per-row offsets first, then the variable-length arrays, so every start but theirs is fixed
  // by the bucket, and the adjustments are found from the masks' fixed start.
  uint32_t* mask_at_h = staging_.alloc<uint32_t>(n_topk);
  uint32_t* adjust_at_h = staging_.alloc<uint32_t>(2 * size_t{n_topk});
  uint32_t* masks_h = staging_.alloc<uint32_t>(plan_.n_masked * mask_words);
  for (uint32_t j = 0, m = 0; j < n_topk; ++j) {
    const TokenMask* allowed = plan_.topk_rows[j].allowed;
    mask_at_h[j] = allowed ? static_cast<uint32_t>(m * mask_words) : kNoTokenMask;
    if (allowed) std::memcpy(masks_h + size_t{m++} * mask_words, allowed->data(), mask_words * 4);
  }
  auto* adjusts_h = staging_.alloc<LogitAdjustment>(plan_.n_adjusts);
  for (uint32_t j = 0, a = 0; j < n_topk; ++j) {
    const LogitAdjustments* adjust = plan_.topk_rows[j].adjust;
    const uint32_t n = adjust ? static_cast<uint32_t>(adjust->size()) : 0;
    adjust_at_h[2 * j] = static_cast<uint32_t>(
        (reinterpret_cast<const char*>(adjusts_h + a) - reinterpret_cast<const char*>(masks_h)) /
        4);
    adjust_at_h[2 * j + 1] = n;
    if (n) std::memcpy(adjusts_h + a, adjust->data(), n * sizeof(LogitAdjustment));
    a += n;
  }
  if (!lora_.empty())
    lora_.stage(staging_, std::max({c.d_model, c.max_d_ff(), c.max_q_dim()}),
                std::max({c.d_model, c.max_d_ff(), c.max_q_dim()}), act_);
  const uint32_t k_max = graph ? graph_top_k(plan_.max_top_k, c.vocab_size) : plan_.max_top_k;
  StepInputs in;
  in.T = T;
  in.n_topk = n_topk;
  in.n_logits = n_logits;
  in.n_hidden = n_hidden;
  in.k_max = k_max;
  in.tokens = tokens;
  in.token_rows = token_rows;
  in.embed_slots = embed_slots;
  in.embed_in_rows = embed_in_rows;
  in.write_pages = write_pages;
  in.write_slots = write_slots;
  in.out_rows = out_rows;
  in.out_slots = out_slots;
  in.cos = staging_.device_ptr(cos_h);
  in.sin = staging_.device_ptr(sin_h);
  in.cos_sliding = staging_.device_ptr(cos_sh);
  in.sin_sliding = staging_.device_ptr(sin_sh);
  in.ple_tokens = ple_tokens_h ? staging_.device_ptr(ple_tokens_h) : nullptr;
  in.lm_rows = staging_.device_ptr(lm_rows_h);
  in.ks = staging_.device_ptr(ks_h);
  in.mask_at = staging_.device_ptr(mask_at_h);
  in.masks = staging_.device_ptr(masks_h);
  in.adjust_at = staging_.device_ptr(adjust_at_h);
  in.adjusted = plan_.n_adjusts > 0;
  in.lora = lora_.empty() ? nullptr : &lora_;
  // The LM head's pinned results grow here, never inside a capture.
  host_out_.reserve(host_out_bytes(n_topk, k_max, n_logits, n_hidden));
  step_start_.record(s);
  if (profile_) op_events_.begin(s);
  staging_.upload(s);
  attention_->plan(plan_.attention, s, graph);
  if (graph) {
    // Key: bucket, k of the top-K, and the context class the attention splits were chosen for.
    // and whether the step adjusts logits (one kernel more).
    const uint64_t key = uint64_t{T} | uint64_t{k_max} << 16 |
                         uint64_t{graph_context_class(max_context_len(plan_))} << 32 |
                         uint64_t{in.adjusted} << 63;
    if (!graphs_.run(key, step_fingerprint(in), s, [&] { enqueue_step(in); })) enqueue_step(in);
  } else {
    enqueue_step(in);
  }
  for (uint32_t slot : plan_.embed_out_slots) embed_tokens_[slot] = -1;  // hidden states now
  step_end_.record(s);
  done_.record(s);
  done_.synchronize();
  step_adapters_.clear();
  if (profile_) op_events_.charge(*profile_);

  const int32_t* ids = host_topk_ids();
  const float* probs = host_topk_probs(n_topk, k_max);
  for (uint32_t j = 0; j < n_topk; ++j) {
    const LmHeadRow& r = plan_.topk_rows[j];
    if (r.sequence == kPaddingSequence) continue;
    TokenDistribution& dist = results[r.sequence].outputs[r.output].dist;
    const int32_t* row_ids = ids + size_t{j} * k_max;
    // A masked row ends at its first -1 when fewer than k tokens were allowed.
    const uint32_t n =
        r.allowed ? static_cast<uint32_t>(std::find(row_ids, row_ids + r.top_k, -1) - row_ids)
                  : r.top_k;
    dist.ids.assign(row_ids, row_ids + n);
    dist.probs.assign(probs + size_t{j} * k_max, probs + size_t{j} * k_max + n);
  }
  const float* logits = host_logits(n_topk, k_max);
  for (uint32_t j = 0; j < n_logits; ++j) {
    const LmHeadRow& r = plan_.logits_rows[j];
    const float* row = logits + size_t{j} * c.vocab_size;
    OutputResult& out = results[r.sequence].outputs[r.output];
    if (r.top_k == 0)
      out.logits.assign(row, row + c.vocab_size);
    else  // top-K beyond the device reduction's limit (batch_plan.h)
      out.dist = top_k_distribution(row, c.vocab_size, r.top_k,
                                    r.allowed ? r.allowed->data() : nullptr, r.adjust);
  }
  const void* hidden = host_hidden(n_topk, k_max, n_logits);
  for (uint32_t j = 0; j < n_hidden; ++j) {
    const LmHeadRow& r = plan_.hidden_rows[j];
    std::vector<float>& out = results[r.sequence].outputs[r.output].hidden;
    out.resize(c.d_model);
    if (act_ == DType::F32) {
      std::memcpy(out.data(), static_cast<const float*>(hidden) + size_t{j} * c.d_model,
                  c.d_model * sizeof(float));
    } else {
      const auto* row = static_cast<const uint16_t*>(hidden) + size_t{j} * c.d_model;
      for (uint32_t i = 0; i < c.d_model; ++i) out[i] = bf16_to_f32(row[i]);
    }
  }
  last_step_.gpu_ms = step_end_.elapsed_since(step_start_);
  last_step_.wall_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - wall_start)
          .count();
  return results;
}

void CudaBackend::enqueue_step(const StepInputs& in) {
  const ModelConfig& c = config();
  cudaStream_t s = stream_.get();
  const uint32_t T = in.T, d = c.d_model, np = rope_.n_pairs(), np_s = rope_sliding_.n_pairs();
  const bool sliding_rope = c.rope_theta_local > 0;
  const uint32_t n_topk = in.n_topk, n_logits = in.n_logits, R = n_topk + n_logits + in.n_hidden;
  const int32_t* tokens = in.tokens;
  const uint32_t *token_rows = in.token_rows, *embed_slots = in.embed_slots,
                 *embed_in_rows = in.embed_in_rows, *write_pages = in.write_pages,
                 *write_slots = in.write_slots, *out_rows = in.out_rows, *out_slots = in.out_slots;
  LoraStep* lora = in.lora;

  // Input rows: embedding-table rows and Embed slots, into the residual stream.
  float* x = ws_.x.as<float>();
  float* delta = ws_.delta.as<float>();
  float* tmp = ws_.tmp.as<float>();
  const DeviceWeights& w = *dev_weights_;
  float* store = embed_store_.as<float>();
  const bool scaled = c.embed_scale != 1.0f;  // gemma: token embeddings times sqrt(d_model)
  if (plan_.all_rows_are_tokens()) {
    embed_rows(w.token_embd.data, act_, tokens, T, d, x, s);
    if (scaled) scale_rows(x, size_t{T} * d, c.embed_scale, s);
  } else {
    const auto n_tok = static_cast<uint32_t>(plan_.token_rows.size());
    const auto n_emb = static_cast<uint32_t>(plan_.embed_rows.size());
    if (n_tok > 0) {
      embed_rows(w.token_embd.data, act_, tokens, n_tok, d, tmp, s);
      if (scaled) scale_rows(tmp, size_t{n_tok} * d, c.embed_scale, s);
      scatter_rows(tmp, token_rows, n_tok, d, x, s);
    }
    gather_rows(store, embed_slots, n_emb, d, tmp, s);
    scatter_rows(tmp, embed_in_rows, n_emb, d, x, s);
  }

  if (in.ple_tokens) per_layer_->prepare(w, x, in.ple_tokens, T, *gemm_, s);
  using P = ForwardProfile;
  op_done(P::Embed);

  const float* cos_d = in.cos;
  const float* sin_d = in.sin;
  const float* cos_sd = in.cos_sliding;
  const float* sin_sd = in.sin_sliding;
  void* h = ws_.h.get();
  void* q = ws_.q.get();
  void* k = ws_.k.get();
  void* v = ws_.v.get();
  void* attn = ws_.attn.get();
  void* gu = ws_.gate_up.get();
  void* ff = ws_.ff.get();
  const size_t e = elem_bytes(act_);
  const bool split_half = c.rope_style == RopeStyle::SplitHalf;
  uint32_t recurrent_index = 0;
  bool pending = false;  // delta holds a block output not yet added to x (the next norm adds it)
  for (uint32_t l = 0; l < c.n_layers; ++l) {
    const DeviceLayer& L = w.layers[l];
    add_rmsnorm(x, pending ? delta : nullptr, L.attn_norm, T, d, c.rms_eps, h, act_, s);
    op_done(P::Norms);
    if (c.layer_recurrent(l)) {  // Gated DeltaNet: delta = mixer(h), the states advance
      mixer_->run(L, recurrent_index++, h, T, delta, *gemm_, s);
      op_done(P::Attention);  // as the CPU engine's profile counts it
    } else {
      // This layer's attention shape (gemma4's global layers differ from its sliding ones).
      const uint32_t hd = c.head_dim_of(l), n_kv = c.kv_heads_of(l);
      const uint32_t qd = c.q_dim_of(l), kvd = c.kv_dim_of(l);
      const bool slides = c.layer_slides(l);
      const uint32_t kl = c.kv_layer(l);         // the layer's index among those with KV pages
      const bool stores_kv = c.layer_has_kv(l);  // else it reads an earlier layer's (gemma4)
      const bool own_angles = slides && sliding_rope;
      const uint32_t lnp = own_angles ? np_s : np;
      const float* lc = own_angles ? cos_sd : cos_d;
      const float* ls = own_angles ? sin_sd : sin_d;
      // One GEMM for Q, K and V where their weights lie back to back and nothing touches the
      // three outputs before RoPE (no adapter, bias, per-head norm, V = K or query gate): its
      // rows go straight into rope_append, which writes q and the pool. gate_up's buffer holds
      // them (the FFN writes it only after attention).
      const uint32_t qkv_width = qd + 2 * kvd;
      const bool fused_qkv = L.wqkv.data != nullptr && stores_kv && !lora && !L.bq && !L.q_norm &&
                             !L.k_norm && !c.v_norm && !c.attn_output_gate &&
                             !c.layer_v_from_k(l) && qkv_width <= 2 * c.max_d_ff();
      if (fused_qkv) {
        gemm_->run(L.wqkv, h, T, gu, act_, s);
        op_done(P::QkvProj);
        const char* rows = static_cast<const char*>(gu);
        const QkvRows src{
            rows,     qkv_width, rows + size_t{qd} * e, qkv_width, rows + size_t{qd + kvd} * e,
            qkv_width};
        rope_append(src, q, act_, T, c.n_heads, n_kv, hd, lnp, split_half, lc, ls, write_pages,
                    write_slots, kl, layout_, kv_pool_.get(), s);
      } else {
        if (c.attn_output_gate) {  // the projection yields each head's query, then its gate
          gemm_->run(L.wq, h, T, ws_.q_gate.get(), act_, s);
          split_query_gate(ws_.q_gate.get(), act_, T * c.n_heads, hd, q, ws_.gate.get(), s);
        } else {
          gemm_->run(L.wq, h, T, q, act_, s);
        }
        if (stores_kv) {
          gemm_->run(L.wk, h, T, k, act_, s);
          if (c.layer_v_from_k(l))  // V is K's projection, before K's norm and RoPE
            PITH_CUDA_CHECK(
                cudaMemcpyAsync(v, k, size_t{T} * kvd * e, cudaMemcpyDeviceToDevice, s));
          else
            gemm_->run(L.wv, h, T, v, act_, s);
        }
        op_done(P::QkvProj);
        if (lora) {
          lora->apply(*gemm_, l, LoraTarget::Q, h, d, q, act_, qd, qd, 0, act_, s);
          if (stores_kv) {
            lora->apply(*gemm_, l, LoraTarget::K, h, d, k, act_, kvd, kvd, 0, act_, s);
            lora->apply(*gemm_, l, LoraTarget::V, h, d, v, act_, kvd, kvd, 0, act_, s);
          }
          op_done(P::Lora);
        }
        if (L.bq) {  // after the adapters, as on the CPU
          add_bias(q, act_, L.bq, T, qd, s);
          add_bias(k, act_, L.bk, T, kvd, s);
          add_bias(v, act_, L.bv, T, kvd, s);
        }
        if (L.q_norm) rmsnorm_rows(q, act_, T * c.n_heads, hd, L.q_norm, c.rms_eps, s);
        if (stores_kv) {
          if (L.k_norm) rmsnorm_rows(k, act_, T * n_kv, hd, L.k_norm, c.rms_eps, s);
          if (c.v_norm) rmsnorm_rows(v, act_, T * n_kv, hd, nullptr, c.rms_eps, s);  // no weight
          // RoPE of q and k and the K/V append in one launch (k goes into the pool rotated).
          rope_append(QkvRows{q, qd, k, kvd, v, kvd}, q, act_, T, c.n_heads, n_kv, hd, lnp,
                      split_half, lc, ls, write_pages, write_slots, kl, layout_, kv_pool_.get(), s);
        } else {
          rope(q, act_, T, c.n_heads, hd, lnp, split_half, lc, ls, s);
        }
      }
      op_done(P::QkRopeKv);
      attention_->run(
          kl, q, kv_pool_.get(), attn, s,
          AttentionOptions{c.attn_scale, c.attn_softcap, slides ? c.sliding_window : 0});
      if (c.attn_output_gate) sigmoid_gate(attn, ws_.gate.get(), act_, size_t{T} * qd, s);
      op_done(P::Attention);
      gemm_->run(L.wo, attn, T, delta, DType::F32, s);
      op_done(P::OProj);
      if (lora) {
        lora->apply(*gemm_, l, LoraTarget::O, attn, qd, delta, DType::F32, d, d, 0, act_, s);
        op_done(P::Lora);
      }
      if (L.post_attn_norm) {  // gemma: the block's output is normed before the residual add
        add_rmsnorm(delta, nullptr, L.post_attn_norm, T, d, c.rms_eps, delta, DType::F32, s);
        op_done(P::Norms);
      }
    }
    add_rmsnorm(x, delta, L.ffn_norm, T, d, c.rms_eps, h, act_, s);
    op_done(P::Norms);
    if (!c.dense_ffn()) {  // the routed experts (and the shared one) instead of a dense FFN
      moe_->run(L, h, T, delta, *gemm_, s);
      op_done(P::GateUpProj);  // all of the MoE FFN, as the CPU engine's profile counts it
    } else {
      const uint32_t width = c.d_ff_of(l);  // gemma4 E2B: KV-sharing layers are twice as wide
      if (!lora) {  // decode steps: the activation as the GEMV's epilogue where that is faster
        gemm_->run_gated(L.w_gate_up, h, T, ff, c.ffn_activation, gu, s);
        op_done(P::GateUpProj);
      } else {
        gemm_->run(L.w_gate_up, h, T, gu, act_, s);
        op_done(P::GateUpProj);
        // gate rows first, then up, in one [T][2 d_ff] output
        lora->apply(*gemm_, l, LoraTarget::Gate, h, d, gu, act_, width, 2 * width, 0, act_, s);
        lora->apply(*gemm_, l, LoraTarget::Up, h, d, gu, act_, width, 2 * width, width, act_, s);
        op_done(P::Lora);
        gated_activation(gu, static_cast<char*>(gu) + size_t{width} * e, T, width, 2 * width, ff,
                         act_, c.ffn_activation, s);
        op_done(P::Activation);
      }
      gemm_->run(L.w_down, ff, T, delta, DType::F32, s);
      op_done(P::DownProj);
      if (lora) {
        lora->apply(*gemm_, l, LoraTarget::Down, ff, width, delta, DType::F32, d, d, 0, act_, s);
        op_done(P::Lora);
      }
      if (c.moe_beside_dense) {
        moe_->run_beside_dense(L, x, T, delta, *gemm_, s);
        op_done(P::GateUpProj);
      }
    }
    if (L.post_ffn_norm) {
      add_rmsnorm(delta, nullptr, L.post_ffn_norm, T, d, c.rms_eps, delta, DType::F32, s);
      op_done(P::Norms);
    }
    pending = true;
    if (in.ple_tokens || c.layer_scale) {  // these read or scale the whole residual: add now
      add_rows(x, delta, DType::F32, T, d, s);
      pending = false;
      op_done(P::Residual);
      if (in.ple_tokens) {
        per_layer_->apply(L, l, x, T, tmp, *gemm_, s);
        op_done(P::GateUpProj);  // the per-layer input branch, as the CPU engine counts it
      }
      if (c.layer_scale) {
        scale_rows(x, size_t{T} * d, L.layer_scale, s);
        op_done(P::Residual);
      }
    }
  }
  if (pending) {
    add_rows(x, delta, DType::F32, T, d, s);
    op_done(P::Residual);
  }

  // Outputs: Embed slots, then the LM head over just the rows that need it.
  const auto n_embed_out = static_cast<uint32_t>(plan_.embed_out_rows.size());
  if (n_embed_out > 0) {
    gather_rows(x, out_rows, n_embed_out, d, tmp, s);
    scatter_rows(tmp, out_slots, n_embed_out, d, store, s);
  }
  if (R > 0) {
    gather_rows(x, in.lm_rows, R, d, ws_.out_x.as<float>(), s);
    lm_head(in);
  }
  op_done(P::Output);
}

uint64_t CudaBackend::step_fingerprint(const StepInputs& in) const {
  Fingerprint f;
  for (uint64_t v :
       {uint64_t{in.T}, uint64_t{in.n_topk}, uint64_t{in.n_logits}, uint64_t{in.n_hidden},
        uint64_t{in.k_max}, uint64_t{in.adjusted}, attention_->launch_fingerprint()})
    f.mix(v);
  const void* addresses[] = {in.tokens,      in.token_rows,  in.embed_slots, in.embed_in_rows,
                             in.write_pages, in.write_slots, in.out_rows,    in.out_slots,
                             in.cos,         in.sin,         in.cos_sliding, in.sin_sliding,
                             in.ple_tokens,  in.lm_rows,     in.ks,          in.mask_at,
                             in.masks,       in.adjust_at,   in.lora,        host_out_.get()};
  for (const void* p : addresses) f.mix(p);
  for (const DeviceBuffer* b :
       {&ws_.x, &ws_.delta, &ws_.tmp, &ws_.h, &ws_.attn, &ws_.q, &ws_.k, &ws_.v, &ws_.q_gate,
        &ws_.gate, &ws_.gate_up, &ws_.ff, &ws_.out_x, &ws_.out_h, &ws_.logits, &ws_.topk_ids,
        &ws_.topk_probs, &ws_.topk_scratch})
    f.mix(b->get());
  // The layers' own workspaces move when a longer eager batch grows them.
  moe_->mix_addresses(f);
  mixer_->mix_addresses(f);
  per_layer_->mix_addresses(f);
  return f.h;
}

void CudaBackend::lm_head(const StepInputs& in) {
  const uint32_t n_topk = in.n_topk, n_logits = in.n_logits, k_max = in.k_max;
  const ModelConfig& c = config();
  cudaStream_t s = stream_.get();
  const uint32_t R = n_topk + n_logits + in.n_hidden, V = c.vocab_size;
  const size_t e = elem_bytes(act_);
  add_rmsnorm(ws_.out_x.as<float>(), nullptr, dev_weights_->output_norm, R, c.d_model, c.rms_eps,
              ws_.out_h.get(), act_, s);
  host_out_.reserve(host_out_bytes(n_topk, k_max, n_logits, in.n_hidden));
  const DeviceMatrix& head = dev_weights_->output;
  float* logits = ws_.logits.as<float>();
  auto hidden = [&](uint32_t row) {
    return static_cast<const char*>(ws_.out_h.get()) + size_t{row} * c.d_model * e;
  };
  for (uint32_t r0 = 0; r0 < n_topk; r0 += kLmChunkRows) {
    const uint32_t n = std::min(kLmChunkRows, n_topk - r0);
    gemm_->run(head, hidden(r0), n, logits, DType::F32, s);
    if (c.final_softcap > 0) soft_cap(logits, size_t{n} * V, c.final_softcap, s);
    if (in.adjusted) adjust_logits(logits, n, V, in.adjust_at + 2 * size_t{r0}, in.masks, s);
    softmax_topk(logits, n, V, in.ks + r0, k_max, ws_.topk_scratch.get(),
                 ws_.topk_ids.as<int32_t>() + size_t{r0} * k_max,
                 ws_.topk_probs.as<float>() + size_t{r0} * k_max, s, in.mask_at + r0, in.masks);
  }
  if (n_topk > 0) {
    const size_t bytes = size_t{n_topk} * k_max * 4;
    PITH_CUDA_CHECK(
        cudaMemcpyAsync(host_out_.get(), ws_.topk_ids.get(), bytes, cudaMemcpyDeviceToHost, s));
    PITH_CUDA_CHECK(cudaMemcpyAsync(const_cast<float*>(host_topk_probs(n_topk, k_max)),
                                    ws_.topk_probs.get(), bytes, cudaMemcpyDeviceToHost, s));
  }
  float* host_logit_rows = const_cast<float*>(host_logits(n_topk, k_max));
  for (uint32_t r0 = 0; r0 < n_logits; r0 += kLmChunkRows) {
    const uint32_t n = std::min(kLmChunkRows, n_logits - r0);
    gemm_->run(head, hidden(n_topk + r0), n, logits, DType::F32, s);
    if (c.final_softcap > 0) soft_cap(logits, size_t{n} * V, c.final_softcap, s);
    PITH_CUDA_CHECK(cudaMemcpyAsync(host_logit_rows + size_t{r0} * V, logits,
                                    size_t{n} * V * sizeof(float), cudaMemcpyDeviceToHost, s));
  }
  if (in.n_hidden > 0)  // the normed rows themselves (embeddings), in the activation type
    PITH_CUDA_CHECK(cudaMemcpyAsync(const_cast<void*>(host_hidden(n_topk, k_max, n_logits)),
                                    hidden(n_topk + n_logits), size_t{in.n_hidden} * c.d_model * e,
                                    cudaMemcpyDeviceToHost, s));
}

}  // namespace pith::cuda
