// The SDK's predicted-output drafter (<pith/prediction_drafter.hpp>), natively: it follows a
// completion through the prediction's text, drafts the prediction's next tokens, finds the
// prediction again after an edit (a replacement, an insertion, a deletion, a repeated line),
// and stays in step when the completion tokenizes the same text differently.
#include <gtest/gtest.h>

#include <cctype>
#include <pith/prediction_drafter.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace pith {
namespace {

// A word-level tokenizer over a growing vocabulary: a word is its leading spaces plus the
// letters after them (" brown"), or one other byte. Deterministic, canonical, like BPE's
// pre-tokenisation.
struct Words {
  std::vector<std::string> vocab;
  std::vector<uint32_t> operator()(std::string_view text) {
    std::vector<uint32_t> ids;
    size_t i = 0;
    while (i < text.size()) {
      size_t j = i;
      while (j < text.size() && text[j] == ' ') ++j;
      while (j < text.size() && std::isalpha(static_cast<unsigned char>(text[j]))) ++j;
      if (j == i) j = i + 1;
      ids.push_back(id(std::string(text.substr(i, j - i))));
      i = j;
    }
    return ids;
  }
  uint32_t id(const std::string& w) {
    for (uint32_t k = 0; k < vocab.size(); ++k)
      if (vocab[k] == w) return k;
    vocab.push_back(w);
    return static_cast<uint32_t>(vocab.size() - 1);
  }
  std::string text(const std::vector<uint32_t>& ids) const {
    std::string s;
    for (uint32_t t : ids) s += vocab[t];
    return s;
  }
};

// Generates `target` (already tokenized) against the drafter as the inferlet does, greedy: each
// step verifies the draft against the target's next tokens and keeps the agreeing prefix plus
// one token. Returns the number of steps (forwards) and the accepted / drafted totals.
struct Tally {
  size_t steps = 0, accepted = 0, drafted = 0;
};
Tally generate(PredictionDrafter& d, Words& w, const std::vector<uint32_t>& target,
               size_t max_draft_limit = 1000) {
  Tally r;
  size_t at = 0;
  while (at < target.size()) {
    std::vector<uint32_t> draft = d.draft(std::min(max_draft_limit, target.size() - at - 1), w);
    ++r.steps;
    size_t k = 0;
    while (k < draft.size() && draft[k] == target[at + k]) ++k;
    const size_t took = k + 1;  // the agreeing drafts plus the model's own token after them
    std::string appended;
    for (size_t i = 0; i < took; ++i) appended += w.vocab[target[at + i]];
    r.accepted += k;
    r.drafted += draft.size();
    d.advance(appended, draft.size(), k);
    at += took;
  }
  return r;
}

const std::string kText =
    "the quick brown fox jumps over the lazy dog and then the fox runs far away into the "
    "green forest where the other animals live in peace and nobody bothers them at all";

TEST(PredictionDrafter, FollowsAnExactPredictionInFewForwards) {
  Words w;
  PredictionDrafter d(kText, 32);
  const std::vector<uint32_t> target = w(kText);
  const Tally r = generate(d, w, target);
  EXPECT_EQ(r.accepted + r.steps, target.size());
  EXPECT_EQ(r.drafted, r.accepted);  // nothing rejected
  EXPECT_LE(r.steps, 6u) << "drafts of 16, 32 tokens: " << target.size() << " tokens";
  EXPECT_EQ(d.cursor(), kText.size());
}

TEST(PredictionDrafter, FindsThePredictionAgainAfterAReplacedWord) {
  Words w;
  std::string edited = kText;
  edited.replace(edited.find("lazy"), 4, "sleepy old");
  PredictionDrafter d(kText, 32);
  const std::vector<uint32_t> target = w(edited);
  const Tally r = generate(d, w, target);
  // Only the new words and the first word after them cost a forward each; the rest is drafted.
  EXPECT_GE(r.accepted, target.size() - 8) << r.steps << " steps";
  EXPECT_LE(r.drafted - r.accepted, 40u);
  EXPECT_EQ(d.cursor(), kText.size());
}

TEST(PredictionDrafter, InsertionsAndDeletionsKeepTheRestDrafted) {
  Words w;
  std::string edited = kText;
  edited.insert(edited.find(" and then"), " and barks twice at the moon");
  edited.erase(edited.find(" where the other"),
               std::string(" where the other animals live").size());
  PredictionDrafter d(kText, 32);
  const std::vector<uint32_t> target = w(edited);
  const Tally r = generate(d, w, target);
  EXPECT_GE(r.accepted, target.size() - 20) << r.steps << " steps of " << target.size();
  EXPECT_EQ(d.cursor(), kText.size());
}

TEST(PredictionDrafter, RepeatedTextResyncsToTheNextOccurrenceNotAnEarlierOne) {
  Words w;
  const std::string pred = "alpha beta gamma delta x alpha beta gamma epsilon y";
  // The completion edits the first line's tail, then both lines continue as predicted.
  const std::string completion = "alpha beta gamma zeta x alpha beta gamma epsilon y";
  PredictionDrafter d(pred, 32);
  const std::vector<uint32_t> target = w(completion);
  generate(d, w, target);
  EXPECT_EQ(d.cursor(), pred.size());
}

TEST(PredictionDrafter, AfterAnInsertionTheNearestLaterOccurrenceWins) {
  Words w;
  const std::string pred = "red green blue. red green yellow. done";
  // A word inserted into the second sentence: " green" occurs before and at the place the
  // completion left; drafting on from the earlier one would propose " blue" for " yellow".
  const std::string completion = "red green blue. red extra green yellow. done";
  PredictionDrafter d(pred, 32);
  const std::vector<uint32_t> target = w(completion);
  const Tally r = generate(d, w, target);
  EXPECT_EQ(d.cursor(), pred.size());
  // The first draft (the whole prediction) is taken up to " extra": 4 rejected; then " green"
  // finds the second sentence and the rest is drafted and taken.
  EXPECT_EQ(r.drafted - r.accepted, 4u);
  EXPECT_EQ(r.accepted, target.size() - 3);  // all but " extra", " green" and the first word
}

TEST(PredictionDrafter, AnInsertionTheCompletionSkipsIsNotDraftedOverAndOver) {
  Words w;
  // Repetitive text (as a random model writes): the prediction holds an insertion the
  // completion does not write. Text behind the insertion matches the completion's tail best, but
  // drafting from there proposes the insertion again; the search looks ahead first, and a
  // rejected draft's pause holds whatever the match.
  const std::string run(40, '\n');
  const std::string pred = run + " and one more sentence here." + run + "xyz";
  const std::string completion = run + run + "xyz";
  PredictionDrafter d(pred, 32);
  const std::vector<uint32_t> target = w(completion);
  const Tally r = generate(d, w, target);
  // The first run is drafted and taken; after the insertion a run's tail cannot tell where in
  // the next run the completion is, so drafts may miss there, but their waste stays bounded.
  EXPECT_LE(r.drafted - r.accepted, 24u) << r.steps << " steps, " << r.accepted << " taken";
  EXPECT_GE(r.accepted, run.size() - 1);
}

TEST(PredictionDrafter, AnUnrelatedPredictionDraftsAlmostNothing) {
  Words w;
  PredictionDrafter d("completely different words about weather and cooking", 32);
  const std::vector<uint32_t> target = w(kText);
  const Tally r = generate(d, w, target);
  // The first draft is tried (the completion may start as predicted); once it fails, only a
  // tail of 4+ bytes found in the prediction drafts again.
  EXPECT_LE(r.drafted, 40u);
  EXPECT_GE(r.steps, target.size() - 10);
}

TEST(PredictionDrafter, StaysInStepWhenTheCompletionTokenizesDifferently) {
  Words w;
  PredictionDrafter d("abc def ghi", 8);
  // The completion spells "abc" as "a", "bc": the bytes still follow the prediction.
  d.advance("a", 0, 0);
  EXPECT_EQ(d.cursor(), 1u);
  d.advance("bc", 4, 0);  // a draft of 4 rejected outright
  EXPECT_EQ(d.cursor(), 3u);
  EXPECT_EQ(d.length(), 2u);  // a rejected draft shrinks the next one ...
  EXPECT_EQ(d.pause(), 1u);   // ... and pauses drafting for a step
  EXPECT_TRUE(d.draft(8, w).empty());
  d.advance(" ", 0, 0);  // a plain step
  EXPECT_EQ(d.pause(), 0u);
  EXPECT_EQ(w.text(d.draft(8, w)), "def ghi");
  d.advance("de", 2, 1);  // one of two taken, then the model's own "e"
  EXPECT_EQ(d.length(), 3u);
  EXPECT_EQ(d.pause(), 0u);
  d.advance("f", 1, 1);  // taken whole: doubled
  EXPECT_EQ(d.length(), 6u);
  d.advance("X", 0, 0);  // leaves the prediction; "fX" occurs nowhere
  EXPECT_EQ(d.cursor(), PredictionDrafter::kLost);
  EXPECT_TRUE(d.draft(8, w).empty());
}

TEST(PredictionDrafter, PausesGrowWhileDraftsFailOutright) {
  Words w;
  std::string xs;
  for (int i = 0; i < 400; ++i) xs += " x";
  PredictionDrafter d(xs, 8);
  std::vector<size_t> pauses;
  for (int miss = 0; miss < 7; ++miss) {
    d.advance(" x", 2, 0);  // in step, but every draft rejected
    pauses.push_back(d.pause());
    while (d.pause() > 0) d.advance(" x", 0, 0);
  }
  EXPECT_EQ(pauses, (std::vector<size_t>{1, 3, 7, 15, 31, 31, 31}));
  d.advance(" x", 2, 1);  // one taken: drafting resumes at once
  EXPECT_EQ(d.pause(), 0u);
  EXPECT_FALSE(d.draft(8, w).empty());
}

TEST(PredictionDrafter, DraftsStopAtTheLimitAndTheWindowEnd) {
  Words w;
  PredictionDrafter d(kText, 64);
  EXPECT_EQ(d.draft(3, w).size(), 3u);
  const std::vector<uint32_t> first = d.draft(100, w);
  EXPECT_EQ(first.size(), 16u);  // the first draft's length
  const std::vector<uint32_t> all = w(kText);
  EXPECT_EQ(first, std::vector<uint32_t>(all.begin(), all.begin() + 16));
  EXPECT_TRUE(PredictionDrafter().draft(8, w).empty());
  EXPECT_TRUE(PredictionDrafter().empty());
}

}  // namespace
}  // namespace pith
