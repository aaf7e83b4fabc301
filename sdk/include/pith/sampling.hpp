// pith/sampling.hpp: next-token distributions, samplers and stop conditions for inferlets.
// Header-only, no exceptions, deterministic for a given seed.
//
//   pith::Sampler s = pith::Sampler::top_p(0.9f, /*temperature=*/0.7f, /*seed=*/42);
//   uint32_t tok = s.sample(dist);
#pragma once

#include <math.h>
#include <pith/abi.h>
#include <stdint.h>
#include <string.h>
#include <pith/step_shaping.hpp>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

namespace pith {

// A next-token distribution truncated to its top K (sorted by probability, descending).
// Probabilities are softmax over the whole vocabulary, so they sum to <= 1.
// With `logits` set (asked for with PITH_TOP_K_LOGITS) it is the whole vocabulary in id order
// and `probs` holds the raw logits instead; Sampler::sample takes both forms.
struct Distribution {
  std::vector<uint32_t> ids;
  std::vector<float> probs;
  bool logits = false;
};

// Parses the future layout of next_dist / forward_tokens: per distribution, uint32 k, k ids,
// k float32 probabilities (raw logits when `logits`), back to back.
inline std::vector<Distribution> parse_distributions(const std::string& bytes,
                                                     bool logits = false) {
  std::vector<Distribution> out;
  size_t at = 0;
  while (at + 4 <= bytes.size()) {
    uint32_t k;
    memcpy(&k, bytes.data() + at, 4);
    at += 4;
    if (at + size_t{k} * 8 > bytes.size()) break;
    Distribution d;
    d.logits = logits;
    d.ids.resize(k);
    d.probs.resize(k);
    memcpy(d.ids.data(), bytes.data() + at, size_t{k} * 4);
    memcpy(d.probs.data(), bytes.data() + at + size_t{k} * 4, size_t{k} * 4);
    at += size_t{k} * 8;
    out.push_back(static_cast<Distribution&&>(d));
  }
  return out;
}

struct SamplerConfig {
  float temperature = 0.0f;  // 0: greedy
  uint32_t top_k = 0;        // 0: no limit (beyond the distribution's own K)
  float top_p = 1.0f;        // nucleus
  float min_p = 0.0f;        // drop tokens below min_p * p(max)
  float typical_p = 1.0f;    // locally typical sampling
  uint64_t seed = 0;
  // Penalties and biases with OpenAI / vLLM semantics, applied to the logits before everything
  // above: on the server with a shaped step (step_top_k, shaping, sample_step: a few hundred
  // adjusted logits go down), or in the inferlet over the whole vocabulary's logits that
  // candidates() then asks for (PITH_TOP_K_LOGITS: 4 bytes per vocabulary entry per step).
  float presence_penalty = 0.0f;    // subtracted once from every token this sampler returned
  float frequency_penalty = 0.0f;   // subtracted once per time this sampler returned the token
  float repetition_penalty = 1.0f;  // tokens of the prompt (observe_prompt) or returned so far:
                                    // a positive logit is divided by it, a negative multiplied
  std::vector<std::pair<uint32_t, float>> logit_bias = {};  // added to those tokens' logits

  bool adjusts_logits() const {
    return presence_penalty != 0 || frequency_penalty != 0 || repetition_penalty != 1 ||
           !logit_bias.empty();
  }
};

class Sampler {
 public:
  explicit Sampler(SamplerConfig c = {})
      : c_(c), state_(c.seed * 0x9E3779B97F4A7C15ull + 0x2545F4914F6CDD1Dull) {}
  static Sampler greedy() { return Sampler(); }
  static Sampler temperature(float t, uint64_t seed) {
    return Sampler({.temperature = t, .seed = seed});
  }
  static Sampler top_k(uint32_t k, float t, uint64_t seed) {
    return Sampler({.temperature = t, .top_k = k, .seed = seed});
  }
  static Sampler top_p(float p, float t, uint64_t seed) {
    return Sampler({.temperature = t, .top_p = p, .seed = seed});
  }
  static Sampler min_p(float p, float t, uint64_t seed) {
    return Sampler({.temperature = t, .min_p = p, .seed = seed});
  }
  static Sampler typical(float p, float t, uint64_t seed) {
    return Sampler({.temperature = t, .typical_p = p, .seed = seed});
  }

  const SamplerConfig& config() const { return c_; }
  // How many candidates to request from the server: the top-K of the distribution, the whole
  // vocabulary's logits (PITH_TOP_K_LOGITS) when penalties or biases are set, and room for the
  // tokens suppress_until holds back.
  uint32_t candidates() const {
    if (c_.adjusts_logits()) return PITH_TOP_K_LOGITS;
    uint32_t k = c_.temperature <= 0 ? 1 : (c_.top_k ? c_.top_k : kDefaultCandidates);
    if (suppressing()) k += static_cast<uint32_t>(suppressed_.size());
    return k;
  }

  // A step the server shapes (Context::decode_step(step_top_k(), shaping(allowed)), then
  // sample_step): the penalties, biases and held-back tokens go down as logit adjustments and
  // `allowed` (a grammar's mask, null: none) as the step's mask, so the step returns the top
  // candidates of the very distribution sample() would build from the whole vocabulary. The
  // shaping points into this sampler: valid until its next shaping() or sample.
  uint32_t step_top_k() const { return c_.adjusts_logits() ? keep_count(SIZE_MAX) : candidates(); }
  StepShaping shaping(const std::vector<uint64_t>* allowed = nullptr) {
    if (!c_.adjusts_logits()) return StepShaping{allowed, nullptr};
    build_adjustments();
    return StepShaping{allowed, &adjust_};
  }
  // Samples from a shaped step's distribution and records the token; UINT32_MAX (nothing
  // recorded) when the step's mask allowed no token.
  uint32_t sample_step(const Distribution& d) {
    if (d.ids.empty()) return UINT32_MAX;
    if (!c_.adjusts_logits()) return sample(d);
    const uint32_t tok = sample_sorted(d);
    record(tok);
    return tok;
  }

  // The prompt's tokens, which repetition_penalty also discourages (vLLM's semantics).
  void observe_prompt(const std::vector<uint32_t>& tokens) {
    prompt_tokens_.insert(prompt_tokens_.end(), tokens.begin(), tokens.end());
    std::sort(prompt_tokens_.begin(), prompt_tokens_.end());
    prompt_tokens_.erase(std::unique(prompt_tokens_.begin(), prompt_tokens_.end()),
                         prompt_tokens_.end());
  }
  // Never returns any of `ids` until `n` tokens have been sampled (min_tokens: the end-of-
  // sequence and stop tokens are held back, as vLLM does).
  void suppress_until(uint32_t n, std::vector<uint32_t> ids) {
    suppress_left_ = n > sampled_ ? n - sampled_ : 0;
    suppressed_ = static_cast<std::vector<uint32_t>&&>(ids);
  }
  uint32_t sampled() const { return sampled_; }

  // What to ask for when sampling under a token mask (sample's `allowed`): the whole vocabulary,
  // as logits when penalties or biases need them.
  uint32_t whole_vocabulary() const {
    return c_.adjusts_logits() ? PITH_TOP_K_LOGITS : PITH_TOP_K_ALL;
  }

  // Samples the next token and records it (penalties count the tokens this sampler returned).
  // `allowed` (one bit per token id, e.g. a grammar's mask; null: every token) restricts the
  // choice; `d` must then cover the whole vocabulary (whole_vocabulary()). Returns UINT32_MAX,
  // recording nothing, when the mask allows no token.
  uint32_t sample(const Distribution& d, const std::vector<uint64_t>* allowed = nullptr) {
    return sample_against(d, allowed, kNoDraft);
  }

  // sample() against a draft token (speculative decoding with a deterministic draft, such as a
  // predicted output's next token): returns `draft` with the probability sample() would return
  // it, else a token drawn from the rest of the distribution renormalised, so the token's law is
  // sample()'s (Leviathan et al. 2023 with a one-hot draft); greedy returns the argmax. The
  // caller keeps the draft's continuation only when the result is `draft`.
  uint32_t sample_draft(const Distribution& d, uint32_t draft,
                        const std::vector<uint64_t>* allowed = nullptr) {
    return sample_against(d, allowed, draft);
  }

 private:
  static constexpr uint32_t kDefaultCandidates = 256;
  static constexpr uint32_t kNoDraft = UINT32_MAX;

  uint32_t sample_against(const Distribution& d, const std::vector<uint64_t>* allowed,
                          uint32_t draft) {
    uint32_t tok;
    if (d.logits) {
      Distribution a = adjusted(d, allowed);
      if (a.ids.empty()) return UINT32_MAX;
      tok = sample_sorted(a, draft);
    } else if (allowed) {
      Distribution r = restricted(d, *allowed);
      if (r.ids.empty()) return UINT32_MAX;
      tok = sample_sorted(r, draft);
    } else if (suppressing()) {
      tok = sample_sorted(without_suppressed(d), draft);
    } else {
      tok = sample_sorted(d, draft);
    }
    record(tok);
    return tok;
  }

  bool suppressing() const { return suppress_left_ > 0 && !suppressed_.empty(); }
  bool is_suppressed(uint32_t t) const {
    return suppressing() &&
           std::find(suppressed_.begin(), suppressed_.end(), t) != suppressed_.end();
  }
  bool in_prompt(uint32_t t) const {
    return std::binary_search(prompt_tokens_.begin(), prompt_tokens_.end(), t);
  }

  void record(uint32_t tok) {
    ++sampled_;
    if (suppress_left_ > 0) --suppress_left_;
    if (c_.presence_penalty != 0 || c_.frequency_penalty != 0 || c_.repetition_penalty != 1) {
      if (tok >= counts_.size()) counts_.resize(size_t{tok} + 1, 0);
      if (counts_[tok]++ == 0) returned_.push_back(tok);
    }
  }

  // The adjustments adjusted() applies, as one sorted list for the server: the biased tokens,
  // the prompt's and returned tokens (repetition; presence and frequency), the held-back ones
  // (banned: ranked last, probability 0, as -infinity is in adjusted()).
  void build_adjustments() {
    adjust_.clear();
    auto entry = [&](uint32_t t) -> pith_logit_adjust_t& {
      adjust_.push_back(pith_logit_adjust_t{0, t, 0.0f, 1.0f, 0.0f});
      return adjust_.back();
    };
    for (const auto& [id, bias] : c_.logit_bias) entry(id).bias = bias;
    if (c_.repetition_penalty != 1)
      for (uint32_t t : prompt_tokens_) entry(t).repetition = c_.repetition_penalty;
    for (uint32_t t : returned_) {
      pith_logit_adjust_t& e = entry(t);
      if (c_.repetition_penalty != 1) e.repetition = c_.repetition_penalty;
      e.penalty = c_.presence_penalty + c_.frequency_penalty * float(counts_[t]);
    }
    if (suppressing())
      for (uint32_t t : suppressed_) entry(t).penalty = PITH_LOGIT_BAN;
    // One entry per token: sorted, then merged (a bias, repetition and penalty of one token
    // came in separately; repeated biases add up as adjusted()'s loop does).
    std::stable_sort(adjust_.begin(), adjust_.end(),
                     [](const pith_logit_adjust_t& a, const pith_logit_adjust_t& b) {
                       return a.token < b.token;
                     });
    size_t out = 0;
    for (size_t i = 0; i < adjust_.size(); ++i) {
      if (out > 0 && adjust_[out - 1].token == adjust_[i].token) {
        pith_logit_adjust_t& m = adjust_[out - 1];
        m.bias += adjust_[i].bias;
        if (adjust_[i].repetition != 1) m.repetition = adjust_[i].repetition;
        if (m.penalty != PITH_LOGIT_BAN)
          m.penalty = adjust_[i].penalty == PITH_LOGIT_BAN ? PITH_LOGIT_BAN
                                                           : m.penalty + adjust_[i].penalty;
      } else {
        adjust_[out++] = adjust_[i];
      }
    }
    adjust_.resize(out);
  }

  // A top-K distribution without the held-back tokens (the server sent room for them).
  Distribution without_suppressed(const Distribution& d) const {
    Distribution out;
    for (size_t i = 0; i < d.ids.size(); ++i)
      if (!is_suppressed(d.ids[i])) {
        out.ids.push_back(d.ids[i]);
        out.probs.push_back(d.probs[i]);
      }
    return out;
  }

  static bool bit(const std::vector<uint64_t>& mask, uint32_t t) {
    return (t >> 6) < mask.size() && ((mask[t >> 6] >> (t & 63)) & 1);
  }

  uint32_t keep_count(size_t v) const {
    size_t n = c_.temperature <= 0 ? 1 : (c_.top_k ? c_.top_k : kDefaultCandidates);
    return static_cast<uint32_t>(n < v ? n : v);
  }

  // Sorts ids[0..n) to the front by decreasing value (ties: the lower id) and drops the rest.
  static void keep_top(std::vector<uint32_t>& ids, const std::vector<float>& value, size_t n) {
    if (n > ids.size()) n = ids.size();
    std::partial_sort(ids.begin(), ids.begin() + static_cast<ptrdiff_t>(n), ids.end(),
                      [&](uint32_t a, uint32_t b) {
                        return value[a] > value[b] || (value[a] == value[b] && a < b);
                      });
    ids.resize(n);
  }

  // Whole-vocabulary probabilities (id order) restricted to the allowed, not held-back tokens:
  // the top candidates among them, sorted.
  Distribution restricted(const Distribution& d, const std::vector<uint64_t>& allowed) {
    order_.clear();
    for (uint32_t t = 0; t < d.probs.size(); ++t)
      if (bit(allowed, t) && !is_suppressed(t)) order_.push_back(t);
    keep_top(order_, d.probs, keep_count(d.probs.size()));
    Distribution out;
    out.ids = order_;
    for (uint32_t id : out.ids) out.probs.push_back(d.probs[id]);
    return out;
  }

  // Biases and penalties applied to whole-vocabulary logits, then softmax, then the top
  // candidates sorted by probability: the form the rest of sample() works on. Empty when
  // `allowed` leaves nothing.
  Distribution adjusted(const Distribution& d, const std::vector<uint64_t>* allowed) {
    std::vector<float>& l = scratch_;
    l.assign(d.probs.begin(), d.probs.end());
    const size_t v = l.size();
    for (const auto& [id, bias] : c_.logit_bias)
      if (id < v) l[id] += bias;
    if (c_.repetition_penalty != 1) {
      const float r = c_.repetition_penalty;
      auto penalize = [&](uint32_t t) { l[t] = l[t] > 0 ? l[t] / r : l[t] * r; };
      for (uint32_t t : prompt_tokens_)
        if (t < v) penalize(t);
      for (uint32_t t : returned_)
        if (t < v && !in_prompt(t)) penalize(t);
    }
    for (uint32_t t : returned_)
      if (t < v) l[t] -= c_.presence_penalty + c_.frequency_penalty * float(counts_[t]);
    if (suppressing())
      for (uint32_t t : suppressed_)
        if (t < v) l[t] = -INFINITY;
    if (allowed)
      for (uint32_t t = 0; t < v; ++t)
        if (!bit(*allowed, t)) l[t] = -INFINITY;
    float max = -INFINITY;
    for (float x : l) max = x > max ? x : max;
    Distribution out;
    if (allowed && !(max > -INFINITY)) {  // a biased-away allowed token is still allowed
      for (uint32_t t = 0; t < v; ++t)
        if (bit(*allowed, t)) {
          out.ids.push_back(t);
          out.probs.push_back(1.0f);
          break;
        }
      return out;
    }
    if (!(max > -INFINITY)) {  // everything held back: keep the model's own argmax
      out.ids.push_back(0);
      out.probs.push_back(1.0f);
      for (uint32_t i = 1; i < v; ++i)
        if (d.probs[i] > d.probs[out.ids[0]]) out.ids[0] = i;
      return out;
    }
    double sum = 0;
    for (float x : l) sum += ::exp(double(x) - double(max));
    order_.clear();
    for (uint32_t i = 0; i < v; ++i)
      if (l[i] > -INFINITY) order_.push_back(i);
    keep_top(order_, l, keep_count(v));
    out.ids = order_;
    for (uint32_t id : out.ids)
      out.probs.push_back(static_cast<float>(::exp(double(l[id]) - double(max)) / sum));
    return out;
  }

  // Samples from a distribution sorted by decreasing probability; against a draft token (not
  // kNoDraft) as sample_draft() says.
  uint32_t sample_sorted(const Distribution& d, uint32_t draft = kNoDraft) {
    if (d.ids.empty()) return 0;
    if (c_.temperature <= 0) return d.ids[0];  // sorted: the first is the argmax
    size_t n = d.ids.size();
    if (c_.top_k && c_.top_k < n) n = c_.top_k;
    // Temperature on the truncated distribution: p^(1/T), renormalised.
    std::vector<double> w(n);
    double sum = 0;
    for (size_t i = 0; i < n; ++i)
      sum += (w[i] = ::pow(double(d.probs[i]), 1.0 / double(c_.temperature)));
    if (!(sum > 0)) return d.ids[0];  // every candidate at probability 0 (all held back)
    for (auto& x : w) x /= sum;
    if (c_.min_p > 0) {
      double floor = double(c_.min_p) * w[0];
      while (n > 1 && w[n - 1] < floor) --n;
    }
    if (c_.typical_p < 1) n = typical_cut(w, n);
    if (c_.top_p < 1) {
      double acc = 0;
      size_t keep = 0;
      while (keep < n) {
        acc += w[keep++];
        if (acc >= c_.top_p) break;
      }
      n = keep;
    }
    double total = 0;
    for (size_t i = 0; i < n; ++i) total += w[i];
    if (draft != kNoDraft) {
      // Accept with probability w(draft) / total; else draw from the others renormalised.
      size_t at = 0;
      while (at < n && d.ids[at] != draft) ++at;
      if (at < n && w[at] > 0) {
        if (uniform() * total < w[at]) return draft;
        total -= w[at];
        w[at] = 0;
        if (!(total > 0)) return draft;
      }
    }
    double r = uniform() * total;
    for (size_t i = 0; i < n; ++i) {
      r -= w[i];
      if (r <= 0 && w[i] > 0) return d.ids[i];
    }
    for (size_t i = n; i-- > 0;)  // rounding left r above 0: the last token with weight
      if (w[i] > 0) return d.ids[i];
    return d.ids[n - 1];
  }

  // Locally typical sampling (Meister et al. 2022): keeps the tokens whose surprisal is closest
  // to the entropy until they hold typical_p of the mass, and zeroes the others' weights.
  size_t typical_cut(std::vector<double>& w, size_t n) const {
    double total = 0, h = 0;
    for (size_t i = 0; i < n; ++i) total += w[i];
    for (size_t i = 0; i < n; ++i) {
      double p = w[i] / total;
      if (p > 0) h -= p * ::log(p);
    }
    std::vector<size_t> order(n);
    for (size_t i = 0; i < n; ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      return ::fabs(-::log(w[a] / total) - h) < ::fabs(-::log(w[b] / total) - h);
    });
    double acc = 0;
    std::vector<bool> keep(n, false);
    for (size_t i : order) {
      keep[i] = true;
      acc += w[i] / total;
      if (acc >= c_.typical_p) break;
    }
    for (size_t i = 0; i < n; ++i)
      if (!keep[i]) w[i] = 0;
    return n;
  }
  double uniform() {  // xorshift64*
    state_ ^= state_ >> 12;
    state_ ^= state_ << 25;
    state_ ^= state_ >> 27;
    return double((state_ * 0x2545F4914F6CDD1Dull) >> 11) * (1.0 / 9007199254740992.0);
  }

  SamplerConfig c_;
  uint64_t state_;
  uint32_t sampled_ = 0;
  uint32_t suppress_left_ = 0;
  std::vector<uint32_t> suppressed_;
  std::vector<uint32_t> prompt_tokens_;  // distinct, sorted
  std::vector<uint32_t> counts_;         // by token id: times returned
  std::vector<uint32_t> returned_;       // distinct tokens returned, in first-seen order
  std::vector<float> scratch_;
  std::vector<uint32_t> order_;
  std::vector<pith_logit_adjust_t> adjust_;  // shaping()'s logit adjustments
};

// When generation ends: any of max tokens, an end-of-generation token, a stop token, a stop
// string; none but max tokens before min_tokens (the sampler holds the tokens back meanwhile:
// Sampler::suppress_until, which Context::generate sets up).
struct Stop {
  uint32_t max_tokens = 256;
  uint32_t min_tokens = 0;
  std::vector<uint32_t> eos_ids;     // filled from the model by Context::generate if empty
  bool stop_at_eos = true;           // false: ignore_eos (eos_ids are ordinary tokens)
  std::vector<uint32_t> stop_ids;    // stop tokens that hold even when stop_at_eos is false
  std::vector<std::string> strings;  // stop when the generated text ends with one of these

  // The tokens that end generation (what min_tokens holds back).
  std::vector<uint32_t> ending_ids() const {
    std::vector<uint32_t> ids = stop_ids;
    if (stop_at_eos) ids.insert(ids.end(), eos_ids.begin(), eos_ids.end());
    return ids;
  }

  // Length of the longest stop string: how much of the text's end check() looks at.
  size_t max_string_bytes() const {
    size_t n = 0;
    for (const auto& s : strings) n = s.size() > n ? s.size() : n;
    return n;
  }

  // "length", "eos", "stop" or "" (keep going); `text` is the generated text so far, or any
  // suffix of it at least max_string_bytes() long (Model::detokenize_tail).
  const char* check(const std::vector<uint32_t>& generated, const std::string& text) const {
    if (generated.size() < min_tokens) return generated.size() >= max_tokens ? "length" : "";
    if (!generated.empty() && stop_at_eos &&
        std::find(eos_ids.begin(), eos_ids.end(), generated.back()) != eos_ids.end())
      return "eos";
    if (!generated.empty() &&
        std::find(stop_ids.begin(), stop_ids.end(), generated.back()) != stop_ids.end())
      return "stop";
    for (const auto& s : strings)
      if (!s.empty() && text.size() >= s.size() &&
          text.compare(text.size() - s.size(), s.size(), s) == 0)
        return "stop";
    if (generated.size() >= max_tokens) return "length";
    return "";
  }
};

}  // namespace pith
