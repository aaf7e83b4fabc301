// pith/sampling.hpp: next-token distributions, samplers and stop conditions for inferlets.
// Header-only, no exceptions, deterministic for a given seed.
//
//   pith::Sampler s = pith::Sampler::top_p(0.9f, /*temperature=*/0.7f, /*seed=*/42);
//   uint32_t tok = s.sample(dist);
#pragma once

#include <math.h>
#include <stdint.h>
#include <string.h>

#include <algorithm>
#include <string>
#include <vector>

namespace pith {

// A next-token distribution truncated to its top K (sorted by probability, descending).
// Probabilities are softmax over the whole vocabulary, so they sum to <= 1.
struct Distribution {
  std::vector<uint32_t> ids;
  std::vector<float> probs;
};

// Parses the future layout of next_dist / forward_tokens: per distribution, uint32 k, k ids,
// k float32 probabilities, back to back.
inline std::vector<Distribution> parse_distributions(const std::string& bytes) {
  std::vector<Distribution> out;
  size_t at = 0;
  while (at + 4 <= bytes.size()) {
    uint32_t k;
    memcpy(&k, bytes.data() + at, 4);
    at += 4;
    if (at + size_t{k} * 8 > bytes.size()) break;
    Distribution d;
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
};

class Sampler {
 public:
  explicit Sampler(SamplerConfig c = {})
      : c_(c), state_(c.seed * 0x9E3779B97F4A7C15ull + 0x2545F4914F6CDD1Dull) {}
  static Sampler greedy() { return Sampler(); }
  static Sampler temperature(float t, uint64_t seed) { return Sampler({t, 0, 1, 0, 1, seed}); }
  static Sampler top_k(uint32_t k, float t, uint64_t seed) {
    return Sampler({t, k, 1, 0, 1, seed});
  }
  static Sampler top_p(float p, float t, uint64_t seed) { return Sampler({t, 0, p, 0, 1, seed}); }
  static Sampler min_p(float p, float t, uint64_t seed) { return Sampler({t, 0, 1, p, 1, seed}); }
  static Sampler typical(float p, float t, uint64_t seed) { return Sampler({t, 0, 1, 0, p, seed}); }

  const SamplerConfig& config() const { return c_; }
  // How many candidates to request from the server (top-K of the distribution).
  uint32_t candidates() const {
    if (c_.temperature <= 0) return 1;
    return c_.top_k ? c_.top_k : 256;
  }

  uint32_t sample(const Distribution& d) {
    if (d.ids.empty()) return 0;
    if (c_.temperature <= 0) return d.ids[0];  // sorted: the first is the argmax
    size_t n = d.ids.size();
    if (c_.top_k && c_.top_k < n) n = c_.top_k;
    // Temperature on the truncated distribution: p^(1/T), renormalised.
    std::vector<double> w(n);
    double sum = 0;
    for (size_t i = 0; i < n; ++i)
      sum += (w[i] = ::pow(double(d.probs[i]), 1.0 / double(c_.temperature)));
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
    double r = uniform() * total;
    for (size_t i = 0; i < n; ++i) {
      r -= w[i];
      if (r <= 0) return d.ids[i];
    }
    return d.ids[n - 1];
  }

 private:
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
};

// When generation ends: any of max tokens, an end-of-generation token, a stop string.
struct Stop {
  uint32_t max_tokens = 256;
  std::vector<uint32_t> eos_ids;  // filled from the model by Context::generate if empty
  bool stop_at_eos = true;
  std::vector<std::string> strings;  // stop when the generated text ends with one of these

  // Length of the longest stop string: how much of the text's end check() looks at.
  size_t max_string_bytes() const {
    size_t n = 0;
    for (const auto& s : strings) n = s.size() > n ? s.size() : n;
    return n;
  }

  // "length", "eos", "stop" or "" (keep going); `text` is the generated text so far, or any
  // suffix of it at least max_string_bytes() long (Model::detokenize_tail).
  const char* check(const std::vector<uint32_t>& generated, const std::string& text) const {
    if (!generated.empty() && stop_at_eos &&
        std::find(eos_ids.begin(), eos_ids.end(), generated.back()) != eos_ids.end())
      return "eos";
    for (const auto& s : strings)
      if (!s.empty() && text.size() >= s.size() &&
          text.compare(text.size() - s.size(), s.size(), s) == 0)
        return "stop";
    if (generated.size() >= max_tokens) return "length";
    return "";
  }
};

}  // namespace pith
