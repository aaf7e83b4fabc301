// The inputs and outputs of one batched forward call: the only way the layers above run the
// model (paper Table 1, trait Forward). Shaped for many independent sequences (inferlets) per
// batch, each with its own KV pages, explicit positions and attention mask.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace pith {

// A next-token distribution truncated to its K most likely tokens, sorted by probability
// (descending, ties by lower id). Probabilities are softmax over the full vocabulary.
struct TokenDistribution {
  std::vector<int32_t> ids;
  std::vector<float> probs;
};

enum class OutputKind : uint8_t {
  TopK,    // TokenDistribution with top_k entries
  Logits,  // all vocab_size logits
  Embed,   // the final hidden state (before the output norm) into an Embed slot
  Hidden,  // the final hidden state after the output norm (what the LM head reads), d_model
           // floats: the sequence's embedding for pooling (/v1/embeddings)
};

// Which tokens a TopK output may return (a grammar's mask, sent down instead of the whole
// vocabulary sent up): bit i % 64 of word i / 64 set = token i allowed; ceil(vocab / 64) words.
using TokenMask = std::vector<uint64_t>;

inline bool token_allowed(const uint64_t* mask, uint32_t id) {
  return (mask[id / 64] >> (id % 64)) & 1;
}

// Sampling penalties and biases applied to one token's logit before a TopK output ranks and
// normalises (OpenAI / vLLM semantics: logit_bias first, then repetition_penalty, then presence
// and frequency penalties): l' = rep(l + bias) - penalty, rep(x) = x / repetition for x > 0, else
// x * repetition. A few hundred of them go down instead of the whole vocabulary coming up.
struct LogitAdjustment {
  uint32_t token = 0;
  float bias = 0;
  float repetition = 1;  // > 0
  float penalty = 0;     // kLogitBanPenalty: ranked last with probability 0
};
// Sorted by token, each token once.
using LogitAdjustments = std::vector<LogitAdjustment>;

// A penalty that leaves a token's logit near -1e30: exp() of it underflows to 0 against any real
// logit, yet it stays finite, so a token that is banned but the only one allowed keeps its rank.
inline constexpr float kLogitBanPenalty = 1e30f;

// Finite values (a ban is kLogitBanPenalty, never an infinity: the softmax needs a finite
// maximum) and a repetition penalty that divides.
inline bool adjustment_values_ok(const LogitAdjustment& a) {
  return std::isfinite(a.bias) && std::isfinite(a.penalty) && std::isfinite(a.repetition) &&
         a.repetition > 0;
}

inline float adjust_logit(float logit, const LogitAdjustment& a) {
  float x = logit + a.bias;
  if (a.repetition != 1.0f) x = x > 0 ? x / a.repetition : x * a.repetition;
  return x - a.penalty;
}

struct OutputSpec {
  uint32_t input_index = 0;  // which input of the sequence produces this output
  OutputKind kind = OutputKind::TopK;
  uint32_t top_k = 256;
  uint32_t embed_slot = 0;  // for OutputKind::Embed
  // TopK only; null = every token. The distribution holds the min(top_k, allowed) best allowed
  // tokens (none when none is allowed); their probabilities stay the softmax over the whole
  // vocabulary, as without a mask, so a sampler renormalises and logprobs are the model's.
  std::shared_ptr<const TokenMask> allowed = nullptr;
  // TopK only; null = none. The top-K ranks the adjusted logits and its probabilities are the
  // softmax of the adjusted logits over the whole vocabulary (the distribution a sampler draws
  // from). A mask, if any, applies after the adjustments.
  std::shared_ptr<const LogitAdjustments> adjust = nullptr;
};

// One sequence of a batch.
//
// KV layout: `kv_pages` is the page table of the sequence's context *after* this call, in
// context order (physical ids, in any order of id). The context holds
//   context_len = (kv_pages.size() - 1) * page_size + last_page_len
// slots; the n inputs occupy the last n slots [context_len - n, context_len) and the forward
// writes their K/V there. Earlier slots must already hold K/V.
//
// Positions are explicit (RoPE angle per input), independent of slots: attention sinks,
// windows, tree drafts and modular caches rely on that.
//
// Mask: empty means causal over slots (input i sees slots [0, context_len - n + i]). Otherwise
// one entry per input: run lengths over slots [0, context_len) alternating visible / hidden,
// starting with a visible run (which may be 0); the runs sum to context_len.
struct SequenceInput {
  std::vector<int32_t> tokens;        // input token ids, or
  std::vector<uint32_t> embed_slots;  // input Embed slots (exactly one of the two is non-empty)
  std::vector<uint32_t> positions;    // one per input
  std::vector<uint32_t> kv_pages;
  uint32_t last_page_len = 0;
  std::vector<std::vector<uint32_t>> mask;
  std::vector<OutputSpec> outputs;
  // LoRA adapter of this sequence (Backend::load_adapter's id), 0 = the base model.
  uint32_t adapter = 0;
  // Hybrid models (ModelConfig::hybrid): the sequence's recurrent state slot
  // (Backend::state_slots). It holds the recurrent layers' summary of the sequence's tokens
  // before these inputs and is advanced over them, so the inputs must continue the sequence in
  // order and the mask must be causal (empty). kNoState for models without recurrent layers.
  static constexpr uint32_t kNoState = UINT32_MAX;
  uint32_t state_slot = kNoState;

  size_t n_inputs() const { return tokens.empty() ? embed_slots.size() : tokens.size(); }
};

// Results in the order of SequenceInput::outputs; `dist`, `logits` or `hidden` is filled per
// kind (Embed outputs go to their slot and leave all empty).
struct OutputResult {
  TokenDistribution dist;
  std::vector<float> logits;
  std::vector<float> hidden;
};

struct SequenceResult {
  std::vector<OutputResult> outputs;
};

}  // namespace pith
