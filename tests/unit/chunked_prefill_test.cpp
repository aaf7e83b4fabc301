// Chunked prefill as pure functions: splitting a forward into a chunk and the rest (inputs,
// page-table prefix, truncated mask rows, outputs by origin), narrowing the rest's scheduling
// info, and merging the outputs back in submission order.
#include "control/chunked_prefill.h"

#include <gtest/gtest.h>

#include "control/calls.h"

namespace pith {
namespace {

constexpr uint32_t kPage = 4;

// n token inputs at the end of a context of ctx slots, over pages 100, 101, ...
SequenceInput prefill(uint32_t n, uint32_t ctx) {
  SequenceInput s;
  for (uint32_t i = 0; i < n; ++i) {
    s.tokens.push_back(static_cast<int32_t>(i + 1));
    s.positions.push_back(ctx - n + i);
  }
  const uint32_t pages = (ctx + kPage - 1) / kPage;
  for (uint32_t p = 0; p < pages; ++p) s.kv_pages.push_back(100 + p);
  s.last_page_len = ctx - (pages - 1) * kPage;
  return s;
}

TEST(ChunkedPrefill, SplitTakesThePrefixOfInputsPagesAndMaskRows) {
  SequenceInput rest = prefill(10, 10);  // pages 100..102, last page holds 2
  rest.mask.assign(10, {});
  for (uint32_t i = 0; i < 10; ++i) rest.mask[i] = {i + 1, 10 - (i + 1)};
  rest.mask[2] = {1, 1, 8};  // input 2 does not see slot 1
  rest.outputs = {
      {9, OutputKind::TopK, 3, 0}, {2, OutputKind::TopK, 3, 0}, {5, OutputKind::Logits, 0, 0}};
  std::vector<uint32_t> origin;

  PrefillChunk chunk = split_prefill(rest, origin, 6, kPage);
  EXPECT_EQ(chunk.seq.tokens, (std::vector<int32_t>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(chunk.seq.positions, (std::vector<uint32_t>{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(chunk.seq.kv_pages, (std::vector<uint32_t>{100, 101}));  // context of 6 slots
  EXPECT_EQ(chunk.seq.last_page_len, 2u);
  ASSERT_EQ(chunk.seq.mask.size(), 6u);
  EXPECT_EQ(chunk.seq.mask[0], (std::vector<uint32_t>{1, 5}));  // truncated to 6 slots
  EXPECT_EQ(chunk.seq.mask[2], (std::vector<uint32_t>{1, 1, 4}));
  // Outputs of inputs 2 and 5 go with the chunk, by their origin in the submitted call.
  ASSERT_EQ(chunk.seq.outputs.size(), 2u);
  EXPECT_EQ(chunk.seq.outputs[0].input_index, 2u);
  EXPECT_EQ(chunk.seq.outputs[1].input_index, 5u);
  EXPECT_EQ(chunk.origin, (std::vector<uint32_t>{1, 2}));

  // The rest keeps inputs 6..9 re-indexed, its full page table and its context.
  EXPECT_EQ(rest.tokens, (std::vector<int32_t>{7, 8, 9, 10}));
  EXPECT_EQ(rest.kv_pages.size(), 3u);
  EXPECT_EQ(rest.last_page_len, 2u);
  EXPECT_EQ(rest.mask.size(), 4u);
  ASSERT_EQ(rest.outputs.size(), 1u);
  EXPECT_EQ(rest.outputs[0].input_index, 3u);
  EXPECT_EQ(origin, (std::vector<uint32_t>{0}));
}

TEST(ChunkedPrefill, RestWritesOnlyThePagesAfterTheChunk) {
  SequenceInput rest = prefill(10, 10);
  rest.embed_slots.clear();
  CallInfo info;
  info.n_tokens = 10;
  info.splittable = true;
  info.writes = {100, 101, 102, 7 | kEmbedTag};
  std::vector<uint32_t> origin;
  split_prefill(rest, origin, 5, kPage);
  narrow_after_split(info, rest, 5, kPage);
  EXPECT_EQ(info.n_tokens, 5u);
  EXPECT_TRUE(info.splittable);
  // The rest's inputs start at slot 5 (page 101): page 100 is only read now.
  EXPECT_EQ(info.reads, (std::vector<uint32_t>{100}));
  EXPECT_EQ(info.writes, (std::vector<uint32_t>{101, 102, 7 | kEmbedTag}));
  split_prefill(rest, origin, 4, kPage);
  narrow_after_split(info, rest, 4, kPage);
  EXPECT_EQ(info.n_tokens, 1u);
  EXPECT_FALSE(info.splittable);
  EXPECT_EQ(info.reads, (std::vector<uint32_t>{100, 101}));
  EXPECT_EQ(info.writes, (std::vector<uint32_t>{102, 7 | kEmbedTag}));
}

TEST(ChunkedPrefill, GatherRestoresSubmissionOrder) {
  std::vector<OutputResult> gathered(3);
  std::vector<OutputResult> chunk_out(2), last_out(1);
  chunk_out[0].logits = {1};
  chunk_out[1].logits = {2};
  last_out[0].logits = {0};
  gather_outputs(gathered, std::vector<uint32_t>{1, 2}, chunk_out);
  gather_outputs(gathered, std::vector<uint32_t>{0}, last_out);
  EXPECT_EQ(gathered[0].logits, (std::vector<float>{0}));
  EXPECT_EQ(gathered[1].logits, (std::vector<float>{1}));
  EXPECT_EQ(gathered[2].logits, (std::vector<float>{2}));
}

}  // namespace
}  // namespace pith
