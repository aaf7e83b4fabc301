// Which decode steps CUDA graphs replay, and their padding. See graph_plan.h.
#include "engine/cuda/graph_plan.h"

#include <algorithm>
#include <bit>

#include "common/error.h"

namespace pith::cuda {

uint32_t decode_graph_bucket(uint32_t n) {
  if (n == 0 || n > kMaxGraphBatch) return 0;
  if (n <= 8) return n <= 1 ? 1 : n <= 2 ? 2 : n <= 4 ? 4 : 8;
  const uint32_t step = n <= 64 ? 8 : n <= 128 ? 16 : 32;
  return (n + step - 1) / step * step;
}

std::vector<uint32_t> decode_graph_buckets() {
  std::vector<uint32_t> out;
  for (uint32_t n = 1; n <= kMaxGraphBatch; ++n)
    if (decode_graph_bucket(n) == n) out.push_back(n);
  return out;
}

uint32_t graph_top_k(uint32_t k_max, uint32_t vocab_size) {
  return std::max(k_max, std::min(std::bit_ceil(k_max), vocab_size));
}

bool is_graphable_decode(const std::vector<SequenceInput>& batch, const BatchPlan& plan) {
  if (batch.empty() || decode_graph_bucket(static_cast<uint32_t>(batch.size())) == 0) return false;
  for (const SequenceInput& s : batch) {
    if (s.tokens.size() != 1 || !s.embed_slots.empty() || !s.mask.empty() || s.adapter != 0 ||
        s.outputs.size() != 1 || s.outputs[0].kind != OutputKind::TopK)
      return false;
  }
  // Every output on the device's top-K (k within its limit), nothing else asked for.
  return plan.topk_rows.size() == batch.size() && plan.logits_rows.empty() &&
         plan.embed_out_rows.empty() && plan.n_tokens == batch.size();
}

uint32_t max_context_len(const BatchPlan& plan) {
  uint32_t m = 0;
  for (const AttentionSequence& a : plan.attention) m = std::max(m, a.context_len);
  return m;
}

void pad_decode_plan(BatchPlan& plan, uint32_t bucket, std::span<const uint32_t, 1> pad_page) {
  PITH_CHECK(bucket >= plan.n_tokens && plan.all_rows_are_tokens());
  for (uint32_t row = plan.n_tokens; row < bucket; ++row) {
    plan.token_rows.push_back(row);
    plan.tokens.push_back(0);
    plan.positions.push_back(0);
    plan.write_pages.push_back(pad_page[0]);
    plan.write_slots.push_back(0);
    plan.attention.push_back(AttentionSequence{row, 1, pad_page, 1, nullptr});
    plan.topk_rows.push_back(LmHeadRow{row, kPaddingSequence, 0, 1});
  }
  plan.n_tokens = std::max(plan.n_tokens, bucket);
}

StateRows state_rows(const std::vector<SequenceInput>& batch, uint32_t n_rows, uint32_t pad_state) {
  StateRows out;
  uint32_t row = 0;
  for (const SequenceInput& s : batch) {
    out.first.push_back(row);
    out.count.push_back(static_cast<uint32_t>(s.n_inputs()));
    out.slot.push_back(s.state_slot);
    row += out.count.back();
  }
  PITH_CHECK(row <= n_rows);
  for (; row < n_rows; ++row) {
    out.first.push_back(row);
    out.count.push_back(1);
    out.slot.push_back(pad_state);
  }
  return out;
}

}  // namespace pith::cuda
