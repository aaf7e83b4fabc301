// The engine's batched handlers: forward (the decoder over a flattened batch of sequences),
// embed_tokens, copy_kv and next_dist. Semantics follow llama.cpp's `llama` arch exactly
// (docs/engine.md): RMSNorm, Q/K/V, RoPE, GQA softmax attention over paged KV, SwiGLU, tied or
// untied LM head; f32 activations, accumulation and KV. The other families switch in the
// options of their ModelConfig (biases, Q/K norms, split-half RoPE, post-norms, GELU-tanh,
// scales, soft-caps, sliding windows, experts; engine/architectures/).
//
// One forward = one set of matrix multiplies over all T inputs of the batch ([T][d_model]
// activations, prefill chunks and decode tokens mixed), attention per sequence over its own
// pages, and the LM head only over the R inputs that asked for a distribution or logits.
// Every buffer lives in Engine::Scratch and only grows, so steady-state calls do not allocate
// activations.
#include "engine/engine.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include <spdlog/spdlog.h>
#include <unistd.h>

#include "backend/batch_validation.h"
#include "backend/forward_profile.h"
#include "common/error.h"
#include "engine/attention.h"
#include "engine/gated_delta_net.h"
#include "engine/kernels/cpu_features.h"
#include "engine/kernels/vector_ops.h"
#include "engine/lm_head.h"
#include "engine/lora_delta.h"
#include "engine/moe_ffn.h"
#include "engine/rope.h"
#include "engine/token_distribution.h"

namespace pith {

struct Engine::Scratch {
  explicit Scratch(const ModelConfig& c)
      : rope(c), rope_local(sliding_rope_table(c)), ones(c.max_head_dim(), 1.0f) {}

  RopeTable rope;
  RopeTable rope_local;  // sliding layers of gemma3/4 (own base and size, no scaling); else == rope
  std::vector<float> ones;        // [max head_dim]: the weight of a weightless norm (V heads)
  std::vector<size_t> seq_first;  // [sequences] first flattened input
  // Per-layer token embeddings (gemma4 E2B/E4B): each input's token, its per-layer inputs
  // [T][n_layers * d_per_layer] (and the looked-up rows while they are made), the gate [T][d_pl].
  std::vector<int32_t> ple_token;
  std::vector<float> ple_in, ple_rows, ple_gate;
  std::vector<float> x;             // [T][d_model] residual stream
  std::vector<float> h;             // [T][d_model] normed input of a block
  std::vector<float> q;             // [T][q_dim]
  std::vector<float> q_gate;        // [T][2 q_dim] query and output gate, attn_output_gate only
  std::vector<float> out_gate;      // [T][q_dim] the output gate
  std::vector<float> k, v;          // [T][kv_dim]
  std::vector<float> attn;          // [T][q_dim]
  std::vector<float> tmp;           // [T][d_model] block output before the residual add
  std::vector<float> gate;          // [T][d_ff]
  std::vector<float> up;            // [T][d_ff]
  std::vector<float> cos_t;         // [T][rotary_dim/2]
  std::vector<float> sin_t;         // [T][rotary_dim/2]
  std::vector<float> cos_l, sin_l;  // [T][local rotary dims/2] of rope_local, where it has one
  std::vector<uint32_t> write_page, write_slot;  // [T] where each input's K/V goes
  std::vector<float> out_h;   // [R][d_model] normed hidden states of the rows needing logits
  std::vector<float> logits;  // [R_logits][vocab] of the rows that asked for full logits
  std::vector<std::pair<uint32_t, uint32_t>> output_jobs;  // (sequence, output) of LM-head rows
  std::vector<uint32_t> top_ks;                            // k of each top-K row
  std::vector<const uint64_t*> allowed;                    // token mask of each (null: none)
  std::vector<const LogitAdjustments*> adjust;             // logit adjustments of each (null)
  std::vector<TokenDistribution> dists;                    // results of the top-K rows
  LmHeadScratch lm_head;
  std::vector<size_t> seq_base;  // first flattened input of each sequence
  std::vector<AttentionSequence> seqs;
  AttentionScratch attention;
  MoeScratch moe;
  std::vector<float> moe_in, router_in, moe_out;  // [T][d_model]: experts beside the dense FFN
  DeltaNetScratch delta_net;
  std::vector<DeltaNetSequence> delta_seqs;  // per sequence: its inputs and state, per layer
  LoraBatch lora;                            // tokens grouped by adapter
  std::vector<std::shared_ptr<const LoraAdapter>> lora_held;  // alive for this forward
};

namespace {

template <typename T>
T* grow(std::vector<T>& v, size_t n) {
  if (v.size() < n) v.resize(n);
  return v.data();
}

// Runs fn(t) for t < n, spread over the pool when there is enough work to pay for dispatch.
template <typename Fn>
void for_each_token(ThreadPool& pool, size_t n, Fn&& fn) {
  constexpr size_t kChunk = 4;
  if (n < 2 * kChunk || pool.size() == 1) {
    for (size_t t = 0; t < n; ++t) fn(t);
    return;
  }
  pool.parallel_for((n + kChunk - 1) / kChunk, [&](size_t c, size_t) {
    size_t end = std::min(n, (c + 1) * kChunk);
    for (size_t t = c * kChunk; t < end; ++t) fn(t);
  });
}

// Every matrix the CPU backend may hold panels of (the LM head included; not the embedding
// table, which is read by rows).
template <class Fn>
void for_each_panel_candidate(ModelWeights& w, Fn&& fn) {
  for (LayerWeights& l : w.layers) {
    for (WeightMatrix* m :
         {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down, &l.router, &l.sh_gate,
          &l.sh_up, &l.sh_down, &l.ssm_qkv, &l.ssm_gate, &l.ssm_out, &l.ple_gate, &l.ple_proj})
      fn(*m);
    for (auto* experts : {&l.exp_gate, &l.exp_up, &l.exp_down})
      for (WeightMatrix& m : *experts) fn(m);
  }
  fn(w.output);
  fn(w.per_layer.model_proj);
}

size_t physical_memory_bytes() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page > 0 ? size_t(pages) * size_t(page) : 0;
}

// A copy of the weights whose matrices also hold their panels where this CPU's kernels read them
// (pack_weight_panels: Q8_0 / Q4_K / BF16 and the 4/5-bit quants on AVX-512, Q4_K / BF16 on AVX2),
// or the weights themselves where none has. The panels take as many bytes again, so they are
// skipped (with a warning) when the matrices and their panels together would pass 80 % of the
// machine's memory: a model that fits once must not stop fitting, and on AVX2 prefill still
// reads the mapped rows, which must stay resident beside the panels.
std::shared_ptr<const ModelWeights> with_weight_panels(std::shared_ptr<const ModelWeights> weights,
                                                       ThreadPool& pool, size_t& panel_bytes) {
  auto copy = std::make_shared<ModelWeights>(*weights);
  size_t wanted = 0;
  for_each_panel_candidate(*copy, [&](WeightMatrix& m) {
    if (weight_panels_apply(m)) wanted += m.rows * panel_row_bytes(m.dtype, m.cols);
  });
  if (wanted == 0) return weights;
  const size_t ram = physical_memory_bytes(), model = weights->weight_bytes();
  if (!weight_panels_fit(model, wanted, ram)) {
    spdlog::warn(
        "weight panels skipped: the matrices ({} MiB) and their panels ({} MiB) would pass 80% of "
        "this machine's {} MiB; the kernels read the mapped rows (slower decode)",
        model >> 20, wanted >> 20, ram >> 20);
    return weights;
  }
  for_each_panel_candidate(*copy, [&](WeightMatrix& m) {
    if (auto panels = pack_weight_panels(pool, m)) {
      m.panels = panels.get();
      copy->storage.push_back(std::move(panels));
      panel_bytes += m.rows * panel_row_bytes(m.dtype, m.cols);
    }
  });
  return copy;
}

float sigmoid(float x) {
  return 1.0f / (1.0f + std::exp(-x));
}

}  // namespace

Engine::Engine(std::shared_ptr<const ModelWeights> weights, const EngineOptions& options)
    : weights_((PITH_CHECK(weights != nullptr), std::move(weights))),
      pool_(options.n_threads),
      kv_pool_((validate_model_shapes(*weights_),
                kv_shape_for(weights_->config, options.kv_page_size, options.kv_dtype)),
               options.kv_memory_bytes),
      embeds_(weights_->config.d_model, options.max_embeds),
      states_(weights_->config, options.state_memory_bytes > 0 ? options.state_memory_bytes
                                                               : options.kv_memory_bytes),
      scratch_(std::make_unique<Scratch>(weights_->config)) {
  if (options.cpu_weight_panels)
    weights_ = with_weight_panels(std::move(weights_), pool_, panel_bytes_);
}

Engine::~Engine() = default;

BackendInfo Engine::info() const {
  BackendInfo i;
  i.name = "cpu";
  i.device = fmt::format("{} threads, {}", pool_.size(), isa_name(best_isa()));
  i.weight_bytes = weights_->weight_bytes() + panel_bytes_;
  i.kv_bytes = size_t{kv_pool_.n_pages()} * kv_pool_.shape().page_bytes();
  i.kv_dtype = kv_pool_.shape().dtype;
  i.state_bytes = size_t{states_.capacity()} * states_.slot_bytes();
  i.workspace_bytes = size_t{embeds_.capacity()} * embeds_.d_model() * sizeof(float);
  return i;
}

std::vector<SequenceResult> Engine::forward(const std::vector<SequenceInput>& batch) {
  validate_batch(batch, config(), kv_pool_.page_size(), kv_pool_.slots(), embeds_.slots());
  validate_batch_states(batch, config(), states_.slots());
  const ModelConfig& c = config();
  const ModelWeights& w = *weights_;
  Scratch& s = *scratch_;
  // Buffer widths: the widest layer's (gemma4's global layers have larger heads).
  const uint32_t d = c.d_model, np = s.rope.n_pairs(), np_l = s.rope_local.n_pairs();
  const uint32_t q_cap = c.max_q_dim(), kv_cap = c.max_kv_dim();
  const uint32_t ff_cap = c.dense_ffn() ? c.max_d_ff() : 0;  // MoE layers have their own
  const uint32_t ps = kv_pool_.page_size();

  std::vector<SequenceResult> results(batch.size());
  size_t T = 0;
  for (const auto& seq : batch) T += seq.n_inputs();
  if (T == 0) return results;

  float* x = grow(s.x, T * d);
  float* h = grow(s.h, T * d);
  float* q = grow(s.q, T * q_cap);
  float* q_gate = c.attn_output_gate ? grow(s.q_gate, T * 2 * q_cap) : nullptr;
  float* out_gate = c.attn_output_gate ? grow(s.out_gate, T * q_cap) : nullptr;
  float* k = grow(s.k, T * kv_cap);
  float* v = grow(s.v, T * kv_cap);
  float* attn = grow(s.attn, T * q_cap);
  float* tmp = grow(s.tmp, T * d);
  float* gate = grow(s.gate, T * ff_cap);
  float* up = grow(s.up, T * ff_cap);
  float* cos_t = grow(s.cos_t, T * np);
  float* sin_t = grow(s.sin_t, T * np);
  const bool local_rope = c.rope_theta_local > 0;
  float* cos_l = local_rope ? grow(s.cos_l, T * np_l) : cos_t;
  float* sin_l = local_rope ? grow(s.sin_l, T * np_l) : sin_t;
  const uint32_t dpl = c.d_per_layer_input, pl_all = c.n_layers * dpl;
  int32_t* ple_token = dpl ? grow(s.ple_token, T) : nullptr;
  uint32_t* wpage = grow(s.write_page, T);
  uint32_t* wslot = grow(s.write_slot, T);

  OpClock op(profile_);
  // Adapters of the batch, held for the whole call (an unload may race with it).
  s.lora.clear();
  s.lora_held.clear();
  bool any_adapter = false;
  for (const auto& seq : batch) any_adapter |= seq.adapter != 0;
  if (any_adapter) {
    std::lock_guard lock(adapters_mu_);
    size_t t0 = 0;
    for (size_t si = 0; si < batch.size(); ++si) {
      const uint32_t id = batch[si].adapter;
      if (id != 0) {
        auto it = adapters_.find(id);
        if (it == adapters_.end()) fail("forward: sequence {}: adapter {} is not loaded", si, id);
        s.lora_held.push_back(it->second);
        s.lora.add_run(it->second.get(), t0, batch[si].n_inputs());
      }
      t0 += batch[si].n_inputs();
    }
  }
  LoraBatch* lora = s.lora.empty() ? nullptr : &s.lora;

  // Flatten: input embeddings, RoPE angles and KV destinations per token. [T][...]
  s.seqs.resize(batch.size());
  s.seq_first.resize(batch.size());
  s.delta_seqs.resize(c.hybrid() ? batch.size() : 0);
  size_t t = 0;
  for (size_t si = 0; si < batch.size(); ++si) {
    const SequenceInput& seq = batch[si];
    const uint32_t n = static_cast<uint32_t>(seq.n_inputs());
    if (c.hybrid()) s.delta_seqs[si] = DeltaNetSequence{static_cast<uint32_t>(t), n, nullptr};
    const uint32_t ctx = static_cast<uint32_t>((seq.kv_pages.size() - 1) * ps + seq.last_page_len);
    s.seq_first[si] = t;
    s.seqs[si] = AttentionSequence{q, attn, n, ctx, seq.kv_pages, &seq.mask};  // q, out: per layer
    for (uint32_t i = 0; i < n; ++i, ++t) {
      if (!seq.tokens.empty())
        embed_token(seq.tokens[i], x + t * d);
      else
        std::memcpy(x + t * d, embeds_.data(seq.embed_slots[i]), d * sizeof(float));
      if (ple_token) {  // an Embed input that is not a token's embedding uses token 0 (llama.cpp)
        const int32_t tok = seq.tokens.empty() ? embeds_.token(seq.embed_slots[i]) : seq.tokens[i];
        ple_token[t] = tok >= 0 ? tok : 0;
      }
      s.rope.angles(seq.positions[i], cos_t + t * np, sin_t + t * np);
      if (local_rope) s.rope_local.angles(seq.positions[i], cos_l + t * np_l, sin_l + t * np_l);
      const uint32_t slot = ctx - n + i;
      wpage[t] = seq.kv_pages[slot / ps];
      wslot[t] = slot % ps;
    }
  }

  const auto rotate = c.rope_style == RopeStyle::SplitHalf ? apply_rope_split_half : apply_rope;
  using P = ForwardProfile;
  op(P::Embed);
  float* ple_in = dpl ? per_layer_inputs(x, T, ple_token) : nullptr;
  float* ple_gate = dpl ? grow(s.ple_gate, T * dpl) : nullptr;
  uint32_t recurrent_index = 0;
  for (uint32_t l = 0; l < c.n_layers; ++l) {
    const LayerWeights& L = w.layers[l];
    const bool slides = c.layer_slides(l);
    const float* lc = slides ? cos_l : cos_t;
    const float* ls = slides ? sin_l : sin_t;
    const uint32_t lnp = slides ? np_l : np;  // this layer's rotary pairs
    // This layer's attention shape (gemma4's global layers differ from its sliding ones).
    const uint32_t hd = c.head_dim_of(l), n_kv = c.kv_heads_of(l);
    const uint32_t q_dim = c.q_dim_of(l), kv_dim = c.kv_dim_of(l);
    const uint32_t d_ff = c.dense_ffn() ? c.d_ff_of(l) : 0;
    for_each_token(pool_, T, [&](size_t i) {
      rmsnorm(x + i * d, L.attn_norm.data(), h + i * d, d, c.rms_eps);
    });
    op(P::Norms);
    if (c.layer_recurrent(l)) {
      // Gated DeltaNet block: x += mixer(norm(x)), advancing each sequence's state.
      for (size_t si = 0; si < batch.size(); ++si)
        s.delta_seqs[si].state = states_.layer(batch[si].state_slot, recurrent_index);
      ++recurrent_index;
      gated_delta_net(pool_, c, L, h, T, s.delta_seqs, s.delta_net, tmp);
      op(P::Attention);
      add(tmp, x, T * d);
      op(P::Residual);
    } else {
      const uint32_t kl = c.kv_layer(l);  // this layer's index in the KV pool (or its source's)
      const bool stores_kv = c.layer_has_kv(l);
      for (size_t si = 0; si < batch.size(); ++si) {
        s.seqs[si].q = q + s.seq_first[si] * q_dim;
        s.seqs[si].out = attn + s.seq_first[si] * q_dim;
      }
      // Attention block: h = norm(x); q,k,v = W h (+ b); q/k head norms; rope; K/V -> pages;
      // attn (times sigmoid(gate) where the query projection has one); o = Wo attn (normed again
      // where the family does); x += o.
      if (q_gate) {
        matmul(pool_, L.wq, h, T, q_gate);
        for_each_token(pool_, T, [&](size_t i) {
          for (uint32_t hh = 0; hh < c.n_heads; ++hh) {
            const float* src = q_gate + i * 2 * q_dim + size_t{hh} * 2 * hd;
            std::memcpy(q + i * q_dim + hh * hd, src, hd * sizeof(float));
            std::memcpy(out_gate + i * q_dim + hh * hd, src + hd, hd * sizeof(float));
          }
        });
      } else {
        matmul(pool_, L.wq, h, T, q);
      }
      if (stores_kv) {
        matmul(pool_, L.wk, h, T, k);
        if (c.layer_v_from_k(l))
          std::memcpy(v, k, T * kv_dim * sizeof(float));  // V is K's projection
        else
          matmul(pool_, L.wv, h, T, v);
      }
      op(P::QkvProj);
      if (lora) {
        lora->apply(pool_, l, LoraTarget::Q, h, d, q, q_dim);
        if (stores_kv) {
          lora->apply(pool_, l, LoraTarget::K, h, d, k, kv_dim);
          lora->apply(pool_, l, LoraTarget::V, h, d, v, kv_dim);
        }
        op(P::Lora);
      }
      for_each_token(pool_, T, [&](size_t i) {
        float* qi = q + i * q_dim;
        float* ki = k + i * kv_dim;
        float* vi = v + i * kv_dim;
        if (c.qkv_bias) {
          add(L.bq.data(), qi, q_dim);
          add(L.bk.data(), ki, kv_dim);
          add(L.bv.data(), vi, kv_dim);
        }
        if (c.qk_norm)
          for (uint32_t hh = 0; hh < c.n_heads; ++hh)
            rmsnorm(qi + hh * hd, L.q_norm.data(), qi + hh * hd, hd, c.rms_eps);
        rotate(qi, c.n_heads, lnp, lc + i * lnp, ls + i * lnp, hd);
        if (!stores_kv) return;  // this layer reads an earlier layer's KV
        for (uint32_t hh = 0; hh < n_kv; ++hh) {
          if (c.qk_norm) rmsnorm(ki + hh * hd, L.k_norm.data(), ki + hh * hd, hd, c.rms_eps);
          if (c.v_norm) rmsnorm(vi + hh * hd, s.ones.data(), vi + hh * hd, hd, c.rms_eps);
        }
        rotate(ki, n_kv, lnp, lc + i * lnp, ls + i * lnp, hd);
        kv_pool_.write(wpage[i], wslot[i], kl, ki, vi);
      });
      op(P::QkRopeKv);
      attention(pool_, kv_pool_, kl, c.n_heads, s.seqs, s.attention,
                AttentionParams{c.attn_scale, c.attn_softcap, slides ? c.sliding_window : 0,
                                L.sinks.empty() ? nullptr : L.sinks.data()});
      if (out_gate)
        for_each_token(pool_, T, [&](size_t i) {
          float* a = attn + i * q_dim;
          const float* g = out_gate + i * q_dim;
          for (uint32_t j = 0; j < q_dim; ++j) a[j] *= sigmoid(g[j]);
        });
      op(P::Attention);
      matmul(pool_, L.wo, attn, T, tmp);
      op(P::OProj);
      if (lora) {
        lora->apply(pool_, l, LoraTarget::O, attn, q_dim, tmp, d);
        op(P::Lora);
      }
      if (c.attn_out_bias)
        for_each_token(pool_, T, [&](size_t i) { add(L.bo.data(), tmp + i * d, d); });
      if (c.post_norms) {
        for_each_token(pool_, T, [&](size_t i) {
          rmsnorm(tmp + i * d, L.post_attn_norm.data(), tmp + i * d, d, c.rms_eps);
        });
        op(P::Norms);
      }
      add(tmp, x, T * d);
      op(P::Residual);
    }

    // Feed-forward block: x += norm?(Wdown (act(Wgate h) * Wup h)), h = norm(x).
    for_each_token(pool_, T, [&](size_t i) {
      rmsnorm(x + i * d, L.ffn_norm.data(), h + i * d, d, c.rms_eps);
    });
    op(P::Norms);
    if (!c.dense_ffn()) {
      moe_ffn(pool_, c, L, h, T, tmp, s.moe);
      op(P::GateUpProj);
    } else {
      matmul(pool_, L.w_gate, h, T, gate);
      matmul(pool_, L.w_up, h, T, up);
      op(P::GateUpProj);
      if (lora) {
        lora->apply(pool_, l, LoraTarget::Gate, h, d, gate, d_ff);
        lora->apply(pool_, l, LoraTarget::Up, h, d, up, d_ff);
        op(P::Lora);
      }
      for_each_token(pool_, T, [&](size_t i) {
        gated_activation(c.ffn_activation, gate + i * d_ff, up + i * d_ff, gate + i * d_ff, d_ff);
      });
      op(P::Activation);
      matmul(pool_, L.w_down, gate, T, tmp);
      op(P::DownProj);
      if (lora) {
        lora->apply(pool_, l, LoraTarget::Down, gate, d_ff, tmp, d);
        op(P::Lora);
      }
      if (c.moe_beside_dense) experts_beside_dense(L, x, T, tmp);
    }
    if (c.post_norms) {
      for_each_token(pool_, T, [&](size_t i) {
        rmsnorm(tmp + i * d, L.post_ffn_norm.data(), tmp + i * d, d, c.rms_eps);
      });
      op(P::Norms);
    }
    add(tmp, x, T * d);
    op(P::Residual);
    if (ple_in) {
      // Per-layer embedding branch: x += norm(Wproj (gelu(Wgate x) * this layer's input)).
      matmul(pool_, L.ple_gate, x, T, ple_gate);
      for_each_token(pool_, T, [&](size_t i) {
        gelu_tanh_gate(ple_gate + i * dpl, ple_in + i * pl_all + size_t{l} * dpl,
                       ple_gate + i * dpl, dpl);
      });
      matmul(pool_, L.ple_proj, ple_gate, T, tmp);
      for_each_token(pool_, T, [&](size_t i) {
        rmsnorm(tmp + i * d, L.ple_post_norm.data(), tmp + i * d, d, c.rms_eps);
      });
      add(tmp, x, T * d);
      op(P::GateUpProj);
    }
    if (c.layer_scale) scale(x, L.layer_scale, T * d);
  }

  // Outputs. Embed outputs copy the final hidden state; the others share the output norm over
  // just the R rows that need it: top-K rows first (fused LM head, no logit matrix), then the
  // rows that want full logits (one matmul), then the rows that want the normed state itself.
  auto& jobs = s.output_jobs;
  jobs.clear();
  size_t n_topk = 0, n_head = 0;
  for (OutputKind kind : {OutputKind::TopK, OutputKind::Logits, OutputKind::Hidden}) {
    for (size_t si = 0; si < batch.size(); ++si)
      for (size_t oi = 0; oi < batch[si].outputs.size(); ++oi)
        if (batch[si].outputs[oi].kind == kind)
          jobs.push_back({static_cast<uint32_t>(si), static_cast<uint32_t>(oi)});
    if (kind == OutputKind::TopK) n_topk = jobs.size();
    if (kind == OutputKind::Logits) n_head = jobs.size();
  }
  const size_t R = jobs.size();
  float* out_h = R ? grow(s.out_h, R * d) : nullptr;
  size_t base = 0;
  std::vector<size_t>& seq_base = s.seq_base;
  seq_base.resize(batch.size());
  for (size_t si = 0; si < batch.size(); ++si) {
    const SequenceInput& seq = batch[si];
    results[si].outputs.resize(seq.outputs.size());
    seq_base[si] = base;
    for (const auto& o : seq.outputs) {
      if (o.kind != OutputKind::Embed) continue;
      std::memcpy(embeds_.data(o.embed_slot), x + (base + o.input_index) * d, d * sizeof(float));
      embeds_.set_position(o.embed_slot, seq.positions[o.input_index]);
      embeds_.set_token(o.embed_slot, -1);  // a hidden state, not a token's embedding
    }
    base += seq.n_inputs();
  }
  if (R == 0) {
    op(P::Output);
    return results;
  }
  for_each_token(pool_, R, [&](size_t j) {
    const size_t si = jobs[j].first;
    const OutputSpec& o = batch[si].outputs[jobs[j].second];
    rmsnorm(x + (seq_base[si] + o.input_index) * d, w.output_norm.data(), out_h + j * d, d,
            c.rms_eps);
  });
  const uint32_t V = c.vocab_size;
  if (n_topk > 0) {
    s.top_ks.resize(n_topk);
    s.allowed.assign(n_topk, nullptr);
    s.adjust.assign(n_topk, nullptr);
    bool masked = false, adjusted = false;
    for (size_t j = 0; j < n_topk; ++j) {
      const OutputSpec& o = batch[jobs[j].first].outputs[jobs[j].second];
      s.top_ks[j] = o.top_k;
      if (o.allowed) s.allowed[j] = o.allowed->data();
      s.adjust[j] = o.adjust.get();
      masked |= o.allowed != nullptr;
      adjusted |= o.adjust != nullptr;
    }
    s.dists.resize(n_topk);
    lm_head_top_k(pool_, w.output, out_h, n_topk, s.top_ks.data(), s.lm_head, s.dists.data(),
                  c.final_softcap, masked ? s.allowed.data() : nullptr,
                  adjusted ? s.adjust.data() : nullptr);
    for (size_t j = 0; j < n_topk; ++j)
      results[jobs[j].first].outputs[jobs[j].second].dist = std::move(s.dists[j]);
  }
  for (size_t j = n_head; j < R; ++j)
    results[jobs[j].first].outputs[jobs[j].second].hidden.assign(out_h + j * d,
                                                                 out_h + (j + 1) * d);
  if (n_topk < n_head) {
    const size_t n_logits = n_head - n_topk;
    float* logits = grow(s.logits, n_logits * V);
    matmul(pool_, w.output, out_h + n_topk * d, n_logits, logits);
    pool_.parallel_for(n_logits, [&](size_t j, size_t) {
      const auto& job = jobs[n_topk + j];
      float* lr = logits + j * V;
      if (c.final_softcap > 0) soft_cap(lr, V, c.final_softcap);
      results[job.first].outputs[job.second].logits.assign(lr, lr + V);
    });
  }
  op(P::Output);
  return results;
}

void Engine::embed_tokens(std::span<const int32_t> tokens, std::span<const uint32_t> positions,
                          std::span<const uint32_t> slots) {
  const ModelConfig& c = config();
  validate_embed_tokens(tokens, positions, slots, c, embeds_.slots());
  for (size_t i = 0; i < tokens.size(); ++i) {
    embed_token(tokens[i], embeds_.data(slots[i]));
    embeds_.set_position(slots[i], positions[i]);
    embeds_.set_token(slots[i], tokens[i]);
  }
}

void Engine::copy_kv(uint32_t src_page, uint32_t dst_page, uint32_t src_offset, uint32_t dst_offset,
                     uint32_t n) {
  validate_copy_kv(src_page, dst_page, src_offset, dst_offset, n, kv_pool_.page_size(),
                   kv_pool_.slots());
  kv_pool_.copy(src_page, dst_page, src_offset, dst_offset, n);
}

void Engine::save_kv_pages(std::span<const uint32_t> pages, std::span<std::byte> out) {
  const size_t bytes = kv_page_bytes();
  validate_kv_images("save_kv_pages", pages, out.size(), bytes, kv_pool_.slots());
  for (size_t i = 0; i < pages.size(); ++i)
    std::memcpy(out.data() + i * bytes, kv_pool_.page(pages[i]), bytes);
}

void Engine::load_kv_pages(std::span<const uint32_t> pages, std::span<const std::byte> in) {
  const size_t bytes = kv_page_bytes();
  validate_kv_images("load_kv_pages", pages, in.size(), bytes, kv_pool_.slots());
  for (size_t i = 0; i < pages.size(); ++i)
    std::memcpy(kv_pool_.page(pages[i]), in.data() + i * bytes, bytes);
}

void Engine::clear_states(std::span<const uint32_t> slots) {
  validate_state_slots("clear_states", slots, states_.slots());
  for (uint32_t id : slots) states_.clear(id);
}

void Engine::copy_state(uint32_t src, uint32_t dst) {
  const uint32_t ids[] = {src, dst};
  validate_state_slots("copy_state", ids, states_.slots());
  states_.copy(src, dst);
}

void Engine::save_states(std::span<const uint32_t> slots, std::span<std::byte> out) {
  validate_state_slots("save_states", slots, states_.slots());
  if (out.size() != slots.size() * state_bytes())
    fail("save_states: buffer of {} bytes for {} states of {} bytes", out.size(), slots.size(),
         state_bytes());
  for (size_t i = 0; i < slots.size(); ++i)
    std::memcpy(out.data() + i * state_bytes(), states_.slot(slots[i]), state_bytes());
}

void Engine::load_states(std::span<const uint32_t> slots, std::span<const std::byte> in) {
  validate_state_slots("load_states", slots, states_.slots());
  if (in.size() != slots.size() * state_bytes())
    fail("load_states: buffer of {} bytes for {} states of {} bytes", in.size(), slots.size(),
         state_bytes());
  for (size_t i = 0; i < slots.size(); ++i)
    std::memcpy(states_.slot(slots[i]), in.data() + i * state_bytes(), state_bytes());
}

void Engine::load_adapter(uint32_t id, std::shared_ptr<const LoraAdapter> adapter) {
  PITH_CHECK(id != 0 && adapter != nullptr);
  check_adapter_fits(*adapter, config());
  std::lock_guard lock(adapters_mu_);
  adapters_[id] = std::move(adapter);
}

void Engine::unload_adapter(uint32_t id) {
  std::lock_guard lock(adapters_mu_);
  adapters_.erase(id);
}

TokenDistribution Engine::next_dist(uint32_t embed_slot, uint32_t top_k) {
  const ModelConfig& c = config();
  validate_next_dist(embed_slot, top_k, embeds_.slots());
  float* hn = grow(scratch_->out_h, c.d_model);
  rmsnorm(embeds_.data(embed_slot), weights_->output_norm.data(), hn, c.d_model, c.rms_eps);
  TokenDistribution d;
  lm_head_top_k(pool_, weights_->output, hn, 1, &top_k, scratch_->lm_head, &d, c.final_softcap);
  return d;
}

// gemma4 26B-A4B: tmp (the dense FFN's output) becomes norm1(tmp) + norm2(experts), the
// experts fed norm_pre2(x) and routed from rmsnorm(x) * router_scale / sqrt(d), x the residual.
void Engine::experts_beside_dense(const LayerWeights& L, const float* x, size_t T, float* tmp) {
  const ModelConfig& c = config();
  Scratch& s = *scratch_;
  const uint32_t d = c.d_model;
  float* in = grow(s.moe_in, T * d);
  float* route = grow(s.router_in, T * d);
  float* out = grow(s.moe_out, T * d);
  const float root = 1.0f / std::sqrt(static_cast<float>(d));
  for_each_token(pool_, T, [&](size_t i) {
    rmsnorm(tmp + i * d, L.post_ffn_norm1.data(), tmp + i * d, d, c.rms_eps);
    rmsnorm(x + i * d, L.pre_ffn_norm2.data(), in + i * d, d, c.rms_eps);
    rmsnorm(x + i * d, L.router_scale.data(), route + i * d, d, c.rms_eps);
    scale(route + i * d, root, d);
  });
  moe_ffn(pool_, c, L, in, T, out, s.moe, route);
  for_each_token(pool_, T, [&](size_t i) {
    rmsnorm(out + i * d, L.post_ffn_norm2.data(), out + i * d, d, c.rms_eps);
    add(out + i * d, tmp + i * d, d);
  });
}

// Per-layer inputs of models with per-layer token embeddings, as llama.cpp and transformers
// compute them: (rmsnorm(Wproj x / sqrt(d)) per layer + E_pl[token] * sqrt(d_pl)) / sqrt(2),
// x the scaled token embeddings. [T][n_layers * d_pl] in the scratch.
float* Engine::per_layer_inputs(const float* x, size_t T, const int32_t* tokens) {
  const ModelConfig& c = config();
  const PerLayerEmbeddings& pl = weights_->per_layer;
  Scratch& s = *scratch_;
  const uint32_t dpl = c.d_per_layer_input, all = c.n_layers * dpl;
  float* in = grow(s.ple_in, T * all);
  float* rows = grow(s.ple_rows, T * all);
  matmul(pool_, pl.model_proj, x, T, in);
  const float proj_scale = 1.0f / std::sqrt(static_cast<float>(c.d_model));
  const float row_scale = std::sqrt(static_cast<float>(dpl)), mix = 1.0f / std::sqrt(2.0f);
  for_each_token(pool_, T, [&](size_t i) {
    float* r = in + i * all;
    float* e = rows + i * all;
    scale(r, proj_scale, all);
    for (uint32_t l = 0; l < c.n_layers; ++l)
      rmsnorm(r + size_t{l} * dpl, pl.proj_norm.data(), r + size_t{l} * dpl, dpl, c.rms_eps);
    dequantize_row(pl.token_embd.dtype, pl.token_embd.row(uint32_t(tokens[i])), e, all);
    for (uint32_t j = 0; j < all; ++j) r[j] = (r[j] + e[j] * row_scale) * mix;
  });
  return in;
}

void Engine::embed_token(int32_t token, float* out) const {
  const WeightMatrix& e = weights_->token_embd;
  const uint32_t d = weights_->config.d_model;
  dequantize_row(e.dtype, e.row(uint32_t(token)), out, d);
  if (weights_->config.embed_scale != 1.0f) scale(out, weights_->config.embed_scale, d);
}

}  // namespace pith
