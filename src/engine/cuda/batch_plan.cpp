// Flattening a validated batch for the device. See batch_plan.h.
#include "engine/cuda/batch_plan.h"

#include <algorithm>

namespace pith::cuda {

void BatchPlan::build(const std::vector<SequenceInput>& batch, uint32_t page_size,
                      uint32_t vocab_size, uint32_t max_device_k) {
  n_tokens = 0;
  for (auto* v : {&token_rows, &embed_rows, &embed_slots, &positions, &write_pages, &write_slots,
                  &embed_out_rows, &embed_out_slots})
    v->clear();
  tokens.clear();
  attention.clear();
  topk_rows.clear();
  logits_rows.clear();
  hidden_rows.clear();
  max_top_k = 0;
  n_masked = 0;
  n_adjusts = 0;

  uint32_t row = 0;
  for (size_t si = 0; si < batch.size(); ++si) {
    const SequenceInput& s = batch[si];
    const auto n = static_cast<uint32_t>(s.n_inputs());
    const auto ctx = static_cast<uint32_t>((s.kv_pages.size() - 1) * page_size + s.last_page_len);
    attention.push_back(AttentionSequence{row, n, s.kv_pages, ctx, &s.mask});
    for (uint32_t i = 0; i < n; ++i) {
      if (!s.tokens.empty()) {
        token_rows.push_back(row + i);
        tokens.push_back(s.tokens[i]);
      } else {
        embed_rows.push_back(row + i);
        embed_slots.push_back(s.embed_slots[i]);
      }
      positions.push_back(s.positions[i]);
      const uint32_t slot = ctx - n + i;
      write_pages.push_back(s.kv_pages[slot / page_size]);
      write_slots.push_back(slot % page_size);
    }
    for (size_t oi = 0; oi < s.outputs.size(); ++oi) {
      const OutputSpec& o = s.outputs[oi];
      const uint32_t r = row + o.input_index;
      const LmHeadRow lm{r,
                         static_cast<uint32_t>(si),
                         static_cast<uint32_t>(oi),
                         std::min(o.top_k, vocab_size),
                         o.allowed.get(),
                         o.adjust.get()};
      switch (o.kind) {
        case OutputKind::Embed:
          embed_out_rows.push_back(r);
          embed_out_slots.push_back(o.embed_slot);
          break;
        case OutputKind::TopK:
          if (lm.top_k <= max_device_k) {
            topk_rows.push_back(lm);
            max_top_k = std::max(max_top_k, lm.top_k);
            n_masked += lm.allowed != nullptr;
            n_adjusts += lm.adjust ? static_cast<uint32_t>(lm.adjust->size()) : 0;
          } else {
            logits_rows.push_back(lm);
          }
          break;
        case OutputKind::Logits:
          logits_rows.push_back(LmHeadRow{r, lm.sequence, lm.output, 0, nullptr, nullptr});
          break;
        case OutputKind::Hidden:
          hidden_rows.push_back(LmHeadRow{r, lm.sequence, lm.output, 0, nullptr, nullptr});
          break;
      }
    }
    row += n;
  }
  n_tokens = row;
}

}  // namespace pith::cuda
