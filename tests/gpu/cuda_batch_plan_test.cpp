// The CUDA backend's host-side batch plan (engine/cuda/batch_plan.h): row order, token vs Embed
// rows, KV destinations across page boundaries and shuffled page tables, attention views, and
// which rows feed which outputs; which steps CUDA graphs take and their padding
// (engine/cuda/graph_plan.h). Runs on any machine (no CUDA).
#include <gtest/gtest.h>

#include <algorithm>
#include <array>

#include "engine/cuda/batch_plan.h"
#include "engine/cuda/graph_plan.h"

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

TEST(CudaBatchPlan, OutputRowsTopKFirstThenLogitsThenHidden) {
  SequenceInput a = tokens_seq({1, 2, 3}, 0, {0}, 3);
  a.outputs = {{2, OutputKind::Logits, 0, 0},
               {1, OutputKind::TopK, 5, 0},
               {0, OutputKind::Embed, 0, 9},
               {2, OutputKind::TopK, 5000, 0}};  // beyond the device limit: host top-K
  SequenceInput b = tokens_seq({4}, 3, {1}, 4);
  b.outputs = {
      {0, OutputKind::TopK, 300, 0}, {0, OutputKind::Hidden, 0, 0}, {0, OutputKind::TopK, 7, 0}};
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
  EXPECT_EQ(p.topk_rows[2].output, 2u);
  EXPECT_EQ(p.max_top_k, 300u);
  ASSERT_EQ(p.logits_rows.size(), 2u);
  EXPECT_EQ(p.logits_rows[0].row, 2u);
  EXPECT_EQ(p.logits_rows[0].output, 0u);
  EXPECT_EQ(p.logits_rows[0].top_k, 0u);
  EXPECT_EQ(p.logits_rows[1].output, 3u);
  EXPECT_EQ(p.logits_rows[1].top_k, 2000u);  // capped at the vocabulary
  EXPECT_EQ(p.embed_out_rows, (std::vector<uint32_t>{0}));
  EXPECT_EQ(p.embed_out_slots, (std::vector<uint32_t>{9}));
  ASSERT_EQ(p.hidden_rows.size(), 1u);  // after the LM-head rows: the normed state itself
  EXPECT_EQ(p.hidden_rows[0].row, 3u);
  EXPECT_EQ(p.hidden_rows[0].sequence, 1u);
  EXPECT_EQ(p.hidden_rows[0].output, 1u);
  EXPECT_EQ(p.n_lm_rows(), 6u);
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

TEST(DecodeGraphPlan, BucketsPadByLessThanTheirStep) {
  EXPECT_EQ(decode_graph_bucket(0), 0u);
  EXPECT_EQ(decode_graph_bucket(1), 1u);
  EXPECT_EQ(decode_graph_bucket(3), 4u);
  EXPECT_EQ(decode_graph_bucket(8), 8u);
  EXPECT_EQ(decode_graph_bucket(9), 16u);
  EXPECT_EQ(decode_graph_bucket(17), 24u);
  EXPECT_EQ(decode_graph_bucket(65), 80u);
  EXPECT_EQ(decode_graph_bucket(129), 160u);
  EXPECT_EQ(decode_graph_bucket(256), 256u);
  EXPECT_EQ(decode_graph_bucket(257), 0u);
  const std::vector<uint32_t> buckets = decode_graph_buckets();
  EXPECT_EQ(buckets.front(), 1u);
  EXPECT_EQ(buckets.back(), kMaxGraphBatch);
  for (uint32_t n = 1; n <= kMaxGraphBatch; ++n) {
    const uint32_t b = decode_graph_bucket(n);
    ASSERT_GE(b, n);
    ASSERT_TRUE(std::binary_search(buckets.begin(), buckets.end(), b)) << n;
    const uint32_t step = n <= 8 ? n : n <= 64 ? 8 : n <= 128 ? 16 : 32;
    ASSERT_LT(b - n, step) << n;
  }
}

SequenceInput decode_seq(int32_t token, uint32_t pos, std::vector<uint32_t> pages, uint32_t k) {
  SequenceInput s = tokens_seq({token}, pos, std::move(pages), pos % 4 + 1);
  s.outputs = {{0, OutputKind::TopK, k, 0}};
  return s;
}

TEST(DecodeGraphPlan, TopKWidthsRoundUpToPowersOfTwoWithinTheVocabulary) {
  EXPECT_EQ(graph_top_k(1, 32000), 1u);
  EXPECT_EQ(graph_top_k(5, 32000), 8u);
  EXPECT_EQ(graph_top_k(20, 32000), 32u);
  EXPECT_EQ(graph_top_k(64, 32000), 64u);
  EXPECT_EQ(graph_top_k(1000, 32000), 1024u);
  EXPECT_EQ(graph_top_k(70, 100), 100u);  // never past the vocabulary
  EXPECT_EQ(graph_top_k(100, 100), 100u);
}

TEST(DecodeGraphPlan, OnlyPureDecodeStepsQualify) {
  BatchPlan p;
  auto graphable = [&](const std::vector<SequenceInput>& batch) {
    p.build(batch, 4, 100, 64);
    return is_graphable_decode(batch, p);
  };
  const SequenceInput a = decode_seq(5, 6, {3, 1}, 8), b = decode_seq(7, 0, {2}, 1);
  EXPECT_TRUE(graphable({a, b}));
  EXPECT_FALSE(graphable({}));
  SequenceInput two = tokens_seq({1, 2}, 0, {4}, 2);  // a prefill
  two.outputs = {{1, OutputKind::TopK, 8, 0}};
  EXPECT_FALSE(graphable({a, two}));
  SequenceInput logits = a;
  logits.outputs = {{0, OutputKind::Logits, 0, 0}};
  EXPECT_FALSE(graphable({logits}));
  SequenceInput both = a;
  both.outputs.push_back({0, OutputKind::TopK, 4, 0});
  EXPECT_FALSE(graphable({both}));
  EXPECT_FALSE(graphable({decode_seq(5, 6, {3, 1}, 65)}));  // k beyond the device's top-K
  SequenceInput masked = a;
  masked.mask = {{7}};
  EXPECT_FALSE(graphable({masked}));
  SequenceInput adapted = a;
  adapted.adapter = 2;
  EXPECT_FALSE(graphable({adapted}));
  SequenceInput hybrid = a;  // a recurrent state's slot comes from the staged inputs
  hybrid.state_slot = 0;
  EXPECT_TRUE(graphable({hybrid, b}));
  SequenceInput embed;
  embed.embed_slots = {3};
  embed.positions = {6};
  embed.kv_pages = {3, 1};
  embed.last_page_len = 3;
  embed.outputs = {{0, OutputKind::TopK, 8, 0}};
  EXPECT_FALSE(graphable({embed}));
  SequenceInput no_output = a;
  no_output.outputs.clear();
  EXPECT_FALSE(graphable({no_output}));
  EXPECT_FALSE(graphable(std::vector<SequenceInput>(kMaxGraphBatch + 1, a)));
}

TEST(DecodeGraphPlan, PaddingRowsWriteAndReadOnlyThePadPage) {
  const std::vector<SequenceInput> batch{decode_seq(5, 6, {3, 1}, 8), decode_seq(7, 0, {2}, 1),
                                         decode_seq(9, 4, {0, 6}, 16)};
  BatchPlan p;
  p.build(batch, 4, 100, 64);
  ASSERT_TRUE(is_graphable_decode(batch, p));
  const std::array<uint32_t, 1> pad{99};
  pad_decode_plan(p, decode_graph_bucket(3), pad);
  EXPECT_EQ(p.n_tokens, 4u);
  EXPECT_EQ(p.tokens, (std::vector<int32_t>{5, 7, 9, 0}));
  EXPECT_EQ(p.token_rows, (std::vector<uint32_t>{0, 1, 2, 3}));
  EXPECT_EQ(p.positions, (std::vector<uint32_t>{6, 0, 4, 0}));
  EXPECT_EQ(p.write_pages, (std::vector<uint32_t>{1, 2, 6, 99}));
  EXPECT_EQ(p.write_slots, (std::vector<uint32_t>{2, 0, 0, 0}));
  ASSERT_EQ(p.attention.size(), 4u);
  EXPECT_EQ(p.attention[3].q_begin, 3u);
  EXPECT_EQ(p.attention[3].n_q, 1u);
  EXPECT_EQ(p.attention[3].context_len, 1u);
  ASSERT_EQ(p.attention[3].pages.size(), 1u);
  EXPECT_EQ(p.attention[3].pages[0], 99u);
  ASSERT_EQ(p.topk_rows.size(), 4u);
  EXPECT_EQ(p.topk_rows[3].sequence, kPaddingSequence);
  EXPECT_EQ(p.topk_rows[3].top_k, 1u);
  EXPECT_EQ(p.max_top_k, 16u);  // padding asks for less than any real row
  EXPECT_EQ(max_context_len(p), 7u);
  // A full bucket gets no padding.
  BatchPlan q;
  const std::vector<SequenceInput> four(4, batch[0]);
  q.build(four, 4, 100, 64);
  pad_decode_plan(q, decode_graph_bucket(4), pad);
  EXPECT_EQ(q.n_tokens, 4u);
  EXPECT_EQ(q.topk_rows.size(), 4u);
}

TEST(DecodeGraphPlan, PaddingRowsAdvanceTheSpareStateSlot) {
  std::vector<SequenceInput> batch{decode_seq(5, 6, {3, 1}, 8), decode_seq(7, 0, {2}, 1),
                                   decode_seq(9, 4, {0, 6}, 16)};
  batch[0].state_slot = 4;
  batch[1].state_slot = 0;
  batch[2].state_slot = 2;
  const StateRows padded = state_rows(batch, decode_graph_bucket(3), 7);
  EXPECT_EQ(padded.first, (std::vector<uint32_t>{0, 1, 2, 3}));
  EXPECT_EQ(padded.count, (std::vector<uint32_t>{1, 1, 1, 1}));
  EXPECT_EQ(padded.slot, (std::vector<uint32_t>{4, 0, 2, 7}));
  // An eager step: multi-token sequences, no padding.
  SequenceInput prefill = tokens_seq({1, 2, 3}, 0, {5}, 3);
  prefill.state_slot = 1;
  const StateRows eager = state_rows({batch[1], prefill, batch[2]}, 5, 7);
  EXPECT_EQ(eager.first, (std::vector<uint32_t>{0, 1, 4}));
  EXPECT_EQ(eager.count, (std::vector<uint32_t>{1, 3, 1}));
  EXPECT_EQ(eager.slot, (std::vector<uint32_t>{0, 1, 2}));
}

}  // namespace
}  // namespace pith::cuda
