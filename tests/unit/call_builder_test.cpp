// Call building without a backend: handle translation, the scheduler's read/write sets and the
// message of every rejection.
#include "control/call_builder.h"

#include <gtest/gtest.h>

namespace pith {
namespace {

constexpr CallLimits kLimits{16, 1000};
constexpr CallLimits kHybrid{16, 1000, true};
const HandleTable kNoStates;

// A table whose handle i names physical id base + i - 1.
HandleTable table(uint32_t n, uint32_t base) {
  HandleTable t;
  for (uint32_t i = 0; i < n; ++i) t.insert(base + i);
  return t;
}

SequenceInput tokens_at(std::vector<int32_t> tokens, uint32_t first_pos,
                        std::vector<uint32_t> pages, uint32_t last_len) {
  SequenceInput s;
  s.tokens = std::move(tokens);
  for (size_t i = 0; i < s.tokens.size(); ++i)
    s.positions.push_back(first_pos + static_cast<uint32_t>(i));
  s.kv_pages = std::move(pages);
  s.last_page_len = last_len;
  return s;
}

TEST(CallBuilder, ForwardTranslatesHandlesAndSplitsReadsFromWrites) {
  HandleTable pages = table(3, 40), embeds = table(2, 7);
  // 2 inputs at the end of a 16 + 1 slot context: page 1 (slot 15) and page 2 are written.
  SequenceInput seq = tokens_at({5, 6}, 15, {1, 2}, 1);
  seq.outputs.push_back({1, OutputKind::Embed, 0, 2});
  auto built = build_forward(kLimits, pages, embeds, kNoStates, seq);
  ASSERT_TRUE(built.ok()) << built;
  const auto& call = std::get<ForwardCall>(built->call);
  EXPECT_EQ(call.seq.kv_pages, (std::vector<uint32_t>{40, 41}));
  EXPECT_EQ(call.seq.outputs[0].embed_slot, 8u);
  EXPECT_EQ(built->info.type, CallType::Forward);
  EXPECT_EQ(built->info.n_tokens, 2u);
  EXPECT_TRUE(built->info.splittable);
  EXPECT_EQ(built->info.writes, (std::vector<uint32_t>{40, 41, 8 | kEmbedTag}));
  EXPECT_TRUE(built->info.reads.empty());
  EXPECT_EQ(built->held_pages, (std::vector<uint32_t>{40, 41}));
  EXPECT_EQ(built->held_embeds, (std::vector<uint32_t>{8}));

  // A decode step reads the full first page and writes only the second.
  auto decode = build_forward(kLimits, pages, embeds, kNoStates, tokens_at({5}, 16, {1, 2}, 1));
  ASSERT_TRUE(decode.ok());
  EXPECT_EQ(decode->info.reads, (std::vector<uint32_t>{40}));
  EXPECT_EQ(decode->info.writes, (std::vector<uint32_t>{41}));
  EXPECT_FALSE(decode->info.splittable);
}

TEST(CallBuilder, ForwardRejectionsNameTheProblem) {
  HandleTable pages = table(2, 0), embeds = table(1, 0);
  auto expect = [&](SequenceInput seq, Status code, const std::string& message) {
    auto r = build_forward(kLimits, pages, embeds, kNoStates, std::move(seq));
    EXPECT_EQ(r, code);
    EXPECT_EQ(r.message(), message);
  };
  SequenceInput none;
  none.kv_pages = {1};
  none.last_page_len = 1;
  expect(none, Status::BadArgument, "forward needs either input tokens or input embeds");
  auto positions = tokens_at({1, 2}, 0, {1}, 2);
  positions.positions.pop_back();
  expect(positions, Status::BadArgument, "2 inputs but 1 positions");
  expect(tokens_at({1}, 0, {}, 1), Status::BadArgument, "forward needs at least one KV page");
  expect(tokens_at({1}, 0, {1}, 17), Status::BadArgument, "last_page_len 17 not in [1, 16]");
  expect(tokens_at({1, 2, 3}, 0, {1}, 2), Status::BadArgument,
         "3 inputs do not fit a context of 2 slots");
  expect(tokens_at({1, 1000}, 0, {1}, 2), Status::BadArgument,
         "token id 1000 outside vocabulary of 1000");
  auto rows = tokens_at({1, 2}, 0, {1}, 2);
  rows.mask = {{1, 1}};
  expect(rows, Status::BadArgument, "mask has 1 rows for 2 inputs");
  auto runs = tokens_at({1, 2}, 0, {1, 2}, 16);
  runs.mask = {{17, 15}, {30, 10}};
  expect(runs, Status::BadArgument, "mask runs cover 40 slots, context has 32");
  expect(tokens_at({1}, 0, {3}, 1), Status::BadHandle, "page handle 3");
  auto out = tokens_at({1}, 0, {1}, 1);
  out.outputs.push_back({1, OutputKind::TopK, 5, 0});
  expect(out, Status::BadArgument, "output for input 1 of 1");
  out.outputs = {{0, OutputKind::TopK, 1001, 0}};
  expect(out, Status::BadArgument, "top_k 1001 not in [1, 1000]");
  out.outputs = {{0, OutputKind::Embed, 0, 9}};
  expect(out, Status::BadHandle, "output embed handle 9");
}

TEST(CallBuilder, OtherKindsValidateAndCarryOnlyTheirFields) {
  HandleTable pages = table(2, 10), embeds = table(2, 20);
  const std::vector<uint32_t> two{1, 2};
  auto embed = build_embed_tokens(kLimits, embeds, {3, 4}, {0, 1}, two);
  ASSERT_TRUE(embed.ok());
  EXPECT_EQ(std::get<EmbedTokensCall>(embed->call).slots, (std::vector<uint32_t>{20, 21}));
  EXPECT_EQ(call_type(embed->call), CallType::EmbedTokens);
  EXPECT_EQ(build_embed_tokens(kLimits, embeds, {3}, {0, 1}, two), Status::BadArgument);
  EXPECT_EQ(
      build_embed_tokens(kLimits, embeds, {3, 4}, {0, 1}, std::vector<uint32_t>{1, 5}).message(),
      "embed handle 5");

  auto dist = build_next_dist(kLimits, embeds, 2, 8);
  ASSERT_TRUE(dist.ok());
  EXPECT_EQ(std::get<NextDistCall>(dist->call).embed_slot, 21u);
  EXPECT_EQ(dist->info.reads, (std::vector<uint32_t>{21 | kEmbedTag}));
  EXPECT_EQ(build_next_dist(kLimits, embeds, 2, 0).message(), "top_k 0 not in [1, 1000]");

  auto copy = build_copy_kv(kLimits, pages, 1, 2, 3, 4, 5);
  ASSERT_TRUE(copy.ok());
  const auto& c = std::get<CopyKvCall>(copy->call);
  EXPECT_EQ(c.src, 10u);
  EXPECT_EQ(c.dst, 11u);
  EXPECT_EQ(copy->info.n_seqs, 0u);
  EXPECT_EQ(build_copy_kv(kLimits, pages, 1, 2, 12, 0, 5).message(),
            "copy of 5 slots from 12 to 0 exceeds page size 16");
  EXPECT_EQ(build_copy_kv(kLimits, pages, 1, 9, 0, 0, 1), Status::BadHandle);
  // Offsets near UINT32_MAX must not wrap around the page-size check.
  EXPECT_EQ(build_copy_kv(kLimits, pages, 1, 2, UINT32_MAX, 0, 2), Status::BadArgument);
}

TEST(CallBuilder, HybridForwardsNameTheirStateAndCopiesReadAndWriteStates) {
  HandleTable pages = table(2, 40), embeds = table(1, 7), states = table(2, 3);
  SequenceInput seq = tokens_at({5, 6}, 0, {1}, 2);
  seq.state_slot = 2;
  auto built = build_forward(kHybrid, pages, embeds, states, seq);
  ASSERT_TRUE(built.ok()) << built;
  EXPECT_EQ(std::get<ForwardCall>(built->call).seq.state_slot, 4u);
  EXPECT_EQ(built->held_states, (std::vector<uint32_t>{4}));
  EXPECT_EQ(built->info.writes, (std::vector<uint32_t>{40, 4 | kStateTag}));

  auto expect = [&](const CallLimits& limits, SequenceInput s, const std::string& message) {
    auto r = build_forward(limits, pages, embeds, states, std::move(s));
    EXPECT_EQ(r, Status::BadArgument) << r;
    EXPECT_EQ(r.message(), message);
  };
  expect(kHybrid, tokens_at({5}, 0, {1}, 1),
         "the model has recurrent layers: bind a state to the queue first (state_alloc, "
         "queue_set_state)");
  expect(kLimits, seq, "the model has no recurrent layers: a forward names no state");
  auto masked = seq;
  masked.mask = {{1, 1}, {2}};
  expect(kHybrid, masked,
         "attention masks are not supported on a model with recurrent layers (its state "
         "advances over every input in order)");
  seq.state_slot = 9;
  auto bad = build_forward(kHybrid, pages, embeds, states, seq);
  EXPECT_EQ(bad, Status::BadHandle);
  EXPECT_EQ(bad.message(), "state handle 9");

  auto copy = build_copy_state(states, 1, 2);
  ASSERT_TRUE(copy.ok()) << copy;
  const auto& c = std::get<CopyStateCall>(copy->call);
  EXPECT_EQ(c.src, 3u);
  EXPECT_EQ(c.dst, 4u);
  EXPECT_EQ(copy->info.type, CallType::CopyState);
  EXPECT_EQ(copy->info.reads, (std::vector<uint32_t>{3 | kStateTag}));
  EXPECT_EQ(copy->info.writes, (std::vector<uint32_t>{4 | kStateTag}));
  EXPECT_EQ(copy->held_states, (std::vector<uint32_t>{3, 4}));
  EXPECT_EQ(build_copy_state(states, 1, 5).message(), "copy_state destination state handle 5");
}

}  // namespace
}  // namespace pith
