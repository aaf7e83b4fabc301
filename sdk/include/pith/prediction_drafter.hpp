// pith/prediction_drafter.hpp: drafts from a predicted output (OpenAI's `prediction`: the text a
// caller expects the completion to mostly repeat, such as a file being edited). The drafter
// follows the completion through the prediction's text byte by byte, so a completion that
// tokenizes the same text differently stays in step; the draft is the prediction's text from
// there, tokenized. Where the completion leaves the prediction (an edit), the drafter waits until
// the completion's last bytes occur in the prediction again, preferring the first such place
// after where it left (edits keep the order of what they do not touch), and drafts from there.
// Verification is the caller's: one forward over [last token, draft...] (Context::decode_all),
// then Sampler::sample_draft per position, so the output is the one sampling without a
// prediction would give.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include <string>
#include <string_view>
#include <vector>

namespace pith {

class PredictionDrafter {
 public:
  static constexpr size_t kLost = SIZE_MAX;

  PredictionDrafter() = default;
  explicit PredictionDrafter(std::string prediction, size_t max_draft = 32)
      : prediction_(static_cast<std::string&&>(prediction)),
        max_draft_(max_draft > 0 ? max_draft : 1) {
    cursor_ = prediction_.empty() ? kLost : 0;
    length_ = kFirstDraft * 4 < max_draft_ ? kFirstDraft * 4 : max_draft_;
  }

  bool empty() const { return prediction_.empty(); }
  // The byte of the prediction the completion's next token should start at; kLost when the
  // completion left the prediction and has not come back.
  size_t cursor() const { return cursor_; }
  // How many tokens the next draft has at most (it grows while drafts are taken whole).
  size_t length() const { return length_; }
  // Plain steps left before drafting again (after drafts rejected outright).
  size_t pause() const { return pause_; }

  // Up to min(limit, length()) tokens of the prediction's text from the cursor; empty when lost
  // or at its end. `tokenize(std::string_view)` returns the model's tokens of a text (an
  // inferlet passes Model::tokenize, whose errors leave the draft empty).
  template <typename Tokenize>
  std::vector<uint32_t> draft(size_t limit, Tokenize&& tokenize) const {
    if (cursor_ == kLost || cursor_ >= prediction_.size() || limit == 0 || pause_ > 0) return {};
    const size_t n = length_ < limit ? length_ : limit;
    // A window of text that holds n tokens or more; its last token may be cut by the window's
    // end (unless the prediction ends there), so it is dropped.
    const size_t room = prediction_.size() - cursor_;
    const size_t window = n * kBytesPerToken + 16 < room ? n * kBytesPerToken + 16 : room;
    std::vector<uint32_t> tokens = tokenize(std::string_view(prediction_).substr(cursor_, window));
    if (window < room && !tokens.empty()) tokens.pop_back();
    if (tokens.size() > n) tokens.resize(n);
    return tokens;
  }

  // The text of the tokens just appended to the completion: follows it through the prediction,
  // or finds the prediction again. `drafted` and `accepted`: the last draft's length and how
  // many of its tokens the completion took.
  void advance(std::string_view appended, size_t drafted = 0, size_t accepted = 0) {
    if (prediction_.empty()) return;
    if (drafted > 0) {  // a draft taken whole doubles the next one; one cut short shrinks it
      const size_t next = accepted == drafted ? length_ * 2 : accepted + kMinDraft;
      length_ = next < max_draft_ ? next : max_draft_;
      // Drafts rejected outright cost forwards for nothing: after each, a pause of plain steps
      // that doubles while they keep failing.
      misses_ = accepted == 0 ? misses_ + 1 : 0;
      pause_ = (size_t{1} << (misses_ < kMaxPauseLog ? misses_ : kMaxPauseLog)) - 1;
    } else if (pause_ > 0) {
      --pause_;
    }
    tail_.append(appended.data(), appended.size());
    if (tail_.size() > kTail) tail_.erase(0, tail_.size() - kTail);
    if (cursor_ != kLost) {  // as far as the new text follows the prediction
      size_t same = 0;
      while (same < appended.size() && cursor_ + same < prediction_.size() &&
             prediction_[cursor_ + same] == appended[same])
        ++same;
      cursor_ += same;
      followed_to_ = cursor_;
      if (same == appended.size()) return;
    }
    cursor_ = kLost;
    resync();
  }

 private:
  static constexpr size_t kFirstDraft = 4;
  static constexpr size_t kMinDraft = 2;
  static constexpr size_t kBytesPerToken = 8;  // generous: most tokens are shorter
  static constexpr size_t kTail = 64;          // the longest tail looked up in the prediction
  static constexpr size_t kMinAhead = 4;       // a tail this long may match ahead of the cursor
  static constexpr size_t kMinBehind = 16;     // ... and this long behind it (text repeated)
  static constexpr size_t kMaxPauseLog = 5;    // pauses of 1, 3, 7, 15, then 31 steps

  // The longest tail of the completion's text that occurs in the prediction at or after where
  // the completion last followed it: the cursor goes after its first such occurrence. Failing
  // that, the longest tail of 16+ bytes that occurs before (text the completion repeats): the
  // cursor goes after its last occurrence. Long matches start with longer drafts. A rejected
  // draft's pause stays: only a taken draft ends it.
  void resync() {
    if (tail_.size() < kMinAhead) return;
    const std::string_view text(tail_);
    if (prediction_.find(text.substr(text.size() - kMinAhead)) == std::string::npos) return;
    for (const bool ahead : {true, false}) {
      if (!ahead && followed_to_ == 0) break;
      for (size_t n = text.size(); n >= (ahead ? kMinAhead : kMinBehind); --n) {
        const std::string_view t = text.substr(text.size() - n);
        const size_t at =
            ahead ? prediction_.find(t, followed_to_) : prediction_.rfind(t, followed_to_ - 1);
        if (at == std::string::npos || at + n >= prediction_.size()) continue;
        cursor_ = at + n;
        const size_t first = n >= kMinBehind ? kFirstDraft * 2 : kFirstDraft;
        length_ = first < max_draft_ ? first : max_draft_;
        return;
      }
    }
  }

  std::string prediction_;
  size_t max_draft_ = 32;
  size_t cursor_ = kLost;
  size_t followed_to_ = 0;  // the cursor when the completion last followed the prediction
  size_t length_ = kFirstDraft;
  size_t misses_ = 0;  // drafts rejected outright in a row
  size_t pause_ = 0;   // plain steps left before the next draft
  std::string tail_;   // the completion's last kTail bytes
};

}  // namespace pith
