// The CUDA backend's host-side batch plan (engine/cuda/batch_plan.h): row order, token vs Embed
// rows, KV destinations across page boundaries and shuffled page tables, attention views, and
// which rows feed which outputs. Runs on any machine (no CUDA).
#include <gtest/gtest.h>

#include "engine/cuda/batch_plan.h"

namespace pith::cuda {
namespace {

SequenceInput tokens_seq(std::vector<int32_t> tokens, uint32_t first_pos,
                         std::vector<uint32_t> pages, uint32_t last_len) {
  SequenceInput s;
  s.tokens = std::move(tokens);
  for (uint32_t i = 0; i < s.tokens.size(); ++i) s.positions.push_back(first_pos + i);
  s.kv_pages = std::move(pages);
  s.last_page_len = last_len;
  return s;
}

TEST(CudaBatchPlan, FlattensRowsAndKvDestinations) {
  // Page size 4. Sequence 0: 6-token prefill over pages {7, 2} (ctx 6). Sequence 1: one decode
  // token at context slot 9 over pages {5, 1, 3} (ctx 10, last page holds 2).
  std::vector<SequenceInput> batch{tokens_seq({10, 11, 12, 13, 14, 15}, 0, {7, 2}, 2),
                                   tokens_seq({20}, 9, {5, 1, 3}, 2)};
  BatchPlan p;
  p.build(batch, 4, 100, 1024);
  EXPECT_EQ(p.n_tokens, 7u);
  EXPECT_TRUE(p.all_rows_are_tokens());
  EXPECT_EQ(p.tokens, (std::vector<int32_t>{10, 11, 12, 13, 14, 15, 20}));
  EXPECT_EQ(p.token_rows, (std::vector<uint32_t>{0, 1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(p.positions, (std::vector<uint32_t>{0, 1, 2, 3, 4, 5, 9}));
  EXPECT_EQ(p.write_pages, (std::vector<uint32_t>{7, 7, 7, 7, 2, 2, 3}));
  EXPECT_EQ(p.write_slots, (std::vector<uint32_t>{0, 1, 2, 3, 0, 1, 1}));
  ASSERT_EQ(p.attention.size(), 2u);
  EXPECT_EQ(p.attention[0].q_begin, 0u);
  EXPECT_EQ(p.attention[0].n_q, 6u);
  EXPECT_EQ(p.attention[0].context_len, 6u);
  EXPECT_EQ(p.attention[0].pages.data(), batch[0].kv_pages.data());
  EXPECT_EQ(p.attention[1].q_begin, 6u);
  EXPECT_EQ(p.attention[1].n_q, 1u);
  EXPECT_EQ(p.attention[1].context_len, 10u);
  EXPECT_EQ(p.attention[1].mask, &batch[1].mask);
}

TEST(CudaBatchPlan, EmbedInputsKeepTheirRows) {
  SequenceInput a = tokens_seq({1, 2}, 0, {0}, 2);
  SequenceInput b;
  b.embed_slots = {30, 31, 32};
  b.positions = {4, 5, 6};
  b.kv_pages = {1, 2};
  b.last_page_len = 3;  // ctx 7 at page size 4: inputs at slots 4..6 -> page 2 slots 0..2
  SequenceInput c = tokens_seq({3}, 0, {3}, 1);
  BatchPlan p;
  p.build({a, b, c}, 4, 100, 1024);
  EXPECT_FALSE(p.all_rows_are_tokens());
  EXPECT_EQ(p.token_rows, (std::vector<uint32_t>{0, 1, 5}));
  EXPECT_EQ(p.tokens, (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(p.embed_rows, (std::vector<uint32_t>{2, 3, 4}));
  EXPECT_EQ(p.embed_slots, (std::vector<uint32_t>{30, 31, 32}));
  EXPECT_EQ(p.write_pages, (std::vector<uint32_t>{0, 0, 2, 2, 2, 3}));
  EXPECT_EQ(p.write_slots, (std::vector<uint32_t>{0, 1, 0, 1, 2, 0}));
}

TEST(CudaBatchPlan, OutputRowsTopKFirstThenLogits) {
  SequenceInput a = tokens_seq({1, 2, 3}, 0, {0}, 3);
  a.outputs = {{2, OutputKind::Logits, 0, 0},
               {1, OutputKind::TopK, 5, 0},
               {0, OutputKind::Embed, 0, 9},
               {2, OutputKind::TopK, 5000, 0}};  // beyond the device limit: host top-K
  SequenceInput b = tokens_seq({4}, 3, {1}, 4);
  b.outputs = {{0, OutputKind::TopK, 300, 0}, {0, OutputKind::TopK, 7, 0}};
  BatchPlan p;
  p.build({a, b}, 4, 2000, 1024);
  ASSERT_EQ(p.topk_rows.size(), 3u);
  EXPECT_EQ(p.topk_rows[0].row, 1u);
  EXPECT_EQ(p.topk_rows[0].sequence, 0u);
  EXPECT_EQ(p.topk_rows[0].output, 1u);
  EXPECT_EQ(p.topk_rows[0].top_k, 5u);
  EXPECT_EQ(p.topk_rows[1].row, 3u);
  EXPECT_EQ(p.topk_rows[1].sequence, 1u);
  EXPECT_EQ(p.topk_rows[1].top_k, 300u);
  EXPECT_EQ(p.topk_rows[2].output, 1u);
  EXPECT_EQ(p.max_top_k, 300u);
  ASSERT_EQ(p.logits_rows.size(), 2u);
  EXPECT_EQ(p.logits_rows[0].row, 2u);
  EXPECT_EQ(p.logits_rows[0].output, 0u);
  EXPECT_EQ(p.logits_rows[0].top_k, 0u);
  EXPECT_EQ(p.logits_rows[1].output, 3u);
  EXPECT_EQ(p.logits_rows[1].top_k, 2000u);  // capped at the vocabulary
  EXPECT_EQ(p.embed_out_rows, (std::vector<uint32_t>{0}));
  EXPECT_EQ(p.embed_out_slots, (std::vector<uint32_t>{9}));
  EXPECT_EQ(p.n_lm_rows(), 5u);
}

TEST(CudaBatchPlan, RebuildClearsThePreviousBatch) {
  BatchPlan p;
  SequenceInput a = tokens_seq({1, 2, 3}, 0, {0}, 3);
  a.outputs = {{2, OutputKind::TopK, 4, 0}};
  p.build({a}, 4, 100, 1024);
  SequenceInput b = tokens_seq({5}, 0, {1}, 1);
  p.build({b}, 4, 100, 1024);
  EXPECT_EQ(p.n_tokens, 1u);
  EXPECT_EQ(p.tokens, (std::vector<int32_t>{5}));
  EXPECT_EQ(p.write_pages, (std::vector<uint32_t>{1}));
  EXPECT_TRUE(p.topk_rows.empty());
  EXPECT_EQ(p.max_top_k, 0u);
  EXPECT_EQ(p.attention.size(), 1u);
}

}  // namespace
}  // namespace pith::cuda
