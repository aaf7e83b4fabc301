// pith/hidden_state.hpp: a model's final hidden states (abi.h PITH_TOP_K_HIDDEN, asked for with
// Context::start_hidden) and the pooling that turns them into one sequence embedding, as
// embedding models are trained: the last token's state (Qwen3-Embedding, gte-Qwen2,
// e5-mistral), the mean over every token, or the first token's (CLS), then scaled to unit length.
#pragma once

#include <math.h>
#include <stdint.h>
#include <string.h>

#include <string>
#include <string_view>
#include <vector>

namespace pith {

// Parses the future layout of forward_tokens with PITH_TOP_K_HIDDEN: per output, uint32 n, then
// n float32. A truncated tail is dropped (the caller checks the count it expects).
inline std::vector<std::vector<float>> parse_hidden_states(const std::string& bytes) {
  std::vector<std::vector<float>> out;
  size_t at = 0;
  while (at + 4 <= bytes.size()) {
    uint32_t n;
    memcpy(&n, bytes.data() + at, 4);
    at += 4;
    if (at + size_t{n} * 4 > bytes.size()) break;
    std::vector<float> h(n);
    memcpy(h.data(), bytes.data() + at, size_t{n} * 4);
    at += size_t{n} * 4;
    out.push_back(static_cast<std::vector<float>&&>(h));
  }
  return out;
}

enum class Pooling : uint8_t { Last, Mean, Cls };

// "last", "mean", "cls"; false for anything else.
inline bool parse_pooling(std::string_view name, Pooling* out) {
  if (name == "last")
    *out = Pooling::Last;
  else if (name == "mean")
    *out = Pooling::Mean;
  else if (name == "cls")
    *out = Pooling::Cls;
  else
    return false;
  return true;
}

// Whether a pooling reads every token's state (Mean) or one (Last: the last, Cls: the first).
inline bool pools_every_token(Pooling p) {
  return p != Pooling::Last;
}

// Pools a sequence's states into one embedding as they arrive, chunk by chunk in token order
// (a long input's states need not be held at once): Last keeps the latest, Cls the first, Mean
// sums them.
class Pooler {
 public:
  explicit Pooler(Pooling p) : p_(p) {}
  void add(const std::vector<std::vector<float>>& states) {
    for (const auto& s : states) {
      if (p_ == Pooling::Last || (p_ == Pooling::Cls && n_ == 0)) last_ = s;
      if (p_ == Pooling::Mean) {
        if (sum_.size() < s.size()) sum_.resize(s.size(), 0.0);
        for (size_t i = 0; i < s.size(); ++i) sum_[i] += s[i];
      }
      ++n_;
    }
  }
  size_t count() const { return n_; }
  std::vector<float> result() const {
    if (p_ != Pooling::Mean || n_ == 0) return last_;
    std::vector<float> mean(sum_.size());
    for (size_t i = 0; i < sum_.size(); ++i) mean[i] = static_cast<float>(sum_[i] / n_);
    return mean;
  }

 private:
  Pooling p_;
  size_t n_ = 0;
  std::vector<float> last_;
  std::vector<double> sum_;
};

// Keeps the first `dims` values (0: all; Matryoshka-trained models keep their meaning in the
// leading ones) and scales them to unit L2 norm (a zero vector stays zero).
inline void truncate_and_normalize(std::vector<float>& v, size_t dims) {
  if (dims > 0 && dims < v.size()) v.resize(dims);
  double sq = 0;
  for (float x : v) sq += double(x) * x;
  if (sq <= 0) return;
  const double inv = 1.0 / sqrt(sq);
  for (float& x : v) x = static_cast<float>(x * inv);
}

}  // namespace pith
