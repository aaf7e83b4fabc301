// Distribution futures' bytes. See distribution_bytes.h.
#include "runtime/distribution_bytes.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace pith::runtime {

void append_dist(std::string& out, const TokenDistribution& d) {
  uint32_t k = static_cast<uint32_t>(d.ids.size());
  size_t at = out.size();
  out.resize(at + 4 + 8 * size_t{k});
  char* p = out.data() + at;
  std::memcpy(p, &k, 4);
  std::memcpy(p + 4, d.ids.data(), 4 * size_t{k});
  std::memcpy(p + 4 + 4 * size_t{k}, d.probs.data(), 4 * size_t{k});
}

namespace {

// log(sum(exp(logits))), max-subtracted and accumulated in double. Plain code: this is the
// rare whole-vocabulary path, and the runtime does not link the engine's vectorised kernels.
double logsumexp(const std::vector<float>& logits) {
  float max = -INFINITY;
  for (float x : logits) max = std::max(max, x);
  if (!std::isfinite(max)) return max;
  double sum = 0;
  for (float x : logits) sum += std::exp(double(x) - double(max));
  return double(max) + std::log(sum);
}

}  // namespace

void append_full_dist(std::string& out, const std::vector<float>& logits) {
  const uint32_t k = static_cast<uint32_t>(logits.size());
  const float lse = static_cast<float>(logsumexp(logits));
  size_t at = out.size();
  out.resize(at + 4 + 8 * size_t{k});
  char* p = out.data() + at;
  std::memcpy(p, &k, 4);
  for (uint32_t i = 0; i < k; ++i) std::memcpy(p + 4 + 4 * size_t{i}, &i, 4);
  for (uint32_t i = 0; i < k; ++i) {
    float pr = std::exp(logits[i] - lse);
    std::memcpy(p + 4 + 4 * size_t{k} + 4 * size_t{i}, &pr, 4);
  }
}

void append_raw_logits(std::string& out, const std::vector<float>& logits) {
  const uint32_t k = static_cast<uint32_t>(logits.size());
  size_t at = out.size();
  out.resize(at + 4 + 8 * size_t{k});
  char* p = out.data() + at;
  std::memcpy(p, &k, 4);
  for (uint32_t i = 0; i < k; ++i) std::memcpy(p + 4 + 4 * size_t{i}, &i, 4);
  std::memcpy(p + 4 + 4 * size_t{k}, logits.data(), 4 * size_t{k});
}

void append_dist_by_id(std::string& out, const TokenDistribution& d) {
  TokenDistribution byid;
  byid.ids.resize(d.ids.size());
  byid.probs.assign(d.ids.size(), 0.0f);
  for (size_t i = 0; i < d.ids.size(); ++i) {
    byid.ids[i] = static_cast<int32_t>(i);
    byid.probs[static_cast<size_t>(d.ids[i])] = d.probs[i];
  }
  append_dist(out, byid);
}

void append_hidden(std::string& out, const std::vector<float>& hidden) {
  const auto n = static_cast<uint32_t>(hidden.size());
  const size_t at = out.size();
  out.resize(at + 4 + 4 * size_t{n});
  std::memcpy(out.data() + at, &n, 4);
  std::memcpy(out.data() + at + 4, hidden.data(), 4 * size_t{n});
}

}  // namespace pith::runtime
