// Host-side planning of one CUDA forward: the batch's sequences flattened into the row order of
// the device's [n_tokens] matrices, where each row comes from (a token or an Embed slot), where
// its K/V goes (page, slot), what attention sees per sequence, and which rows produce which
// outputs. Plain C++ (no CUDA) so it is unit-tested on any machine; the backend copies the
// arrays into one pinned staging buffer and uploads them with one copy.
//
// Output rows follow the CPU engine's order: top-K rows first, then full-logits rows. A top-K
// output with k above the device reduction's limit (kernels.h kTopKMax) is computed from its
// full logits row on the host instead (rare: samplers ask for tens to hundreds).
#pragma once

#include <cstdint>
#include <vector>

#include "backend/forward_batch.h"
#include "engine/cuda/attention/paged_kv.h"

namespace pith::cuda {

// One LM-head row: the flattened row it reads and the output it answers.
struct LmHeadRow {
  uint32_t row = 0;       // row of the batch's [n_tokens] hidden state
  uint32_t sequence = 0;  // batch index
  uint32_t output = 0;    // index in SequenceInput::outputs
  uint32_t top_k = 0;     // 0: full logits wanted; else a top-K distribution of min(k, vocab)
  const TokenMask* allowed = nullptr;        // the output's token mask (top-K only), null: none
  const LogitAdjustments* adjust = nullptr;  // the output's logit adjustments, null: none
};

struct BatchPlan {
  uint32_t n_tokens = 0;

  // Rows from the embedding table and rows from Embed slots (each list in row order).
  std::vector<uint32_t> token_rows;
  std::vector<int32_t> tokens;
  std::vector<uint32_t> embed_rows;
  std::vector<uint32_t> embed_slots;

  // Per row: RoPE position and the (page, slot) its K/V is written to.
  std::vector<uint32_t> positions;
  std::vector<uint32_t> write_pages;
  std::vector<uint32_t> write_slots;

  // Per sequence (pages and mask point into the batch, which must outlive the plan's use).
  std::vector<AttentionSequence> attention;

  // Embed outputs: hidden state of row embed_out_rows[i] goes to slot embed_out_slots[i].
  std::vector<uint32_t> embed_out_rows;
  std::vector<uint32_t> embed_out_slots;

  // LM-head rows on the device's top-K reduction (k <= max_device_k), then rows whose whole
  // logits row goes to the host (Logits outputs, and top-K beyond max_device_k).
  std::vector<LmHeadRow> topk_rows;
  std::vector<LmHeadRow> logits_rows;
  // Rows whose normed hidden state itself goes to the host (Hidden outputs), after them.
  std::vector<LmHeadRow> hidden_rows;
  uint32_t max_top_k = 0;  // largest k among topk_rows
  uint32_t n_masked = 0;   // top-K rows on the device with a token mask
  uint32_t n_adjusts = 0;  // logit adjustments of the top-K rows on the device, all together

  bool all_rows_are_tokens() const { return embed_rows.empty(); }
  // Every row through the output norm: topk_rows, logits_rows, then hidden_rows.
  size_t n_lm_rows() const { return topk_rows.size() + logits_rows.size() + hidden_rows.size(); }

  // Fills the plan for a batch that has passed validate_batch (engine/batch_validation.h).
  // Reuses the vectors' capacity.
  void build(const std::vector<SequenceInput>& batch, uint32_t page_size, uint32_t vocab_size,
             uint32_t max_device_k);
};

}  // namespace pith::cuda
