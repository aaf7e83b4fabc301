// Helpers shared by the engine tests: load a bundled model into an Engine, run a whole prompt
// as one prefill (or one token per call), and read llama.cpp oracle files from tests/data.
#pragma once

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <random>

#include <cstdint>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "engine/model_loader.h"

namespace pith::test {

inline std::string model_path(const std::string& name) {
  return std::string(PITH_TEST_DATA) + "/models/" + name + ".gguf";
}
inline std::string oracle_path(const std::string& file) {
  return std::string(PITH_TEST_DATA) + "/oracle/" + file;
}

inline std::shared_ptr<const ModelWeights> load_test_model(const std::string& name) {
  LoadOptions opt;
  opt.quiet = true;
  return load_model(model_path(name), opt);
}

inline std::unique_ptr<Engine> make_engine(std::shared_ptr<const ModelWeights> w,
                                           uint32_t page_size = 16, size_t n_threads = 2,
                                           KvDType kv_dtype = KvDType::Auto) {
  EngineOptions o;
  o.kv_page_size = page_size;
  o.kv_dtype = kv_dtype;
  o.kv_memory_bytes = size_t{8} << 20;
  o.max_embeds = 1024;
  o.n_threads = n_threads;
  return std::make_unique<Engine>(std::move(w), o);
}

// The same weights on two CPU engines: the mapped rows only, and with the load-time weight
// panels (the same as `rows` on a CPU without them: compare info().weight_bytes).
struct RowsAndPanels {
  std::unique_ptr<Engine> rows, panels;
};
inline RowsAndPanels rows_and_panels(const std::shared_ptr<const ModelWeights>& w) {
  EngineOptions o;
  o.kv_memory_bytes = size_t{8} << 20;
  o.n_threads = 2;
  o.cpu_weight_panels = false;
  RowsAndPanels e;
  e.rows = std::make_unique<Engine>(w, o);
  o.cpu_weight_panels = true;
  e.panels = std::make_unique<Engine>(w, o);
  return e;
}

// A prompt of n tokens: BOS (1), then ids drawn from [3, vocab) by `seed`.
inline std::vector<int32_t> random_tokens(size_t n, uint32_t seed, int32_t vocab = 1000) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> d(3, vocab - 1);
  std::vector<int32_t> t{1};
  while (t.size() < n) t.push_back(d(rng));
  return t;
}

// Largest |a[i] - b[i]| (and a failed expectation when the lengths differ).
inline float max_diff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  float m = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) m = std::max(m, std::abs(a[i] - b[i]));
  return m;
}

inline uint32_t pages_for(uint32_t n_tokens, uint32_t page_size) {
  return (n_tokens + page_size - 1) / page_size;
}
inline uint32_t last_len(uint32_t n_tokens, uint32_t page_size) {
  return n_tokens - (pages_for(n_tokens, page_size) - 1) * page_size;
}

// A sequence of `tokens` occupying context slots [0, n) with positions 0..n-1 over `pages`,
// asking for full logits at every input.
inline SequenceInput prefill_input(const std::vector<int32_t>& tokens,
                                   const std::vector<uint32_t>& pages, uint32_t page_size,
                                   uint32_t first_pos = 0) {
  SequenceInput s;
  s.tokens = tokens;
  uint32_t n = static_cast<uint32_t>(tokens.size());
  for (uint32_t i = 0; i < n; ++i) s.positions.push_back(first_pos + i);
  uint32_t ctx = first_pos + n;
  s.kv_pages.assign(pages.begin(), pages.begin() + pages_for(ctx, page_size));
  s.last_page_len = last_len(ctx, page_size);
  for (uint32_t i = 0; i < n; ++i) s.outputs.push_back({i, OutputKind::Logits, 0, 0});
  return s;
}

// A fresh (empty) recurrent state slot on a hybrid model, kNoState on others.
inline uint32_t new_state(Engine& e) {
  if (!e.config().hybrid()) return SequenceInput::kNoState;
  uint32_t slot = e.states().slots().allocate(1)[0];
  e.clear_states(std::span<const uint32_t>(&slot, 1));
  return slot;
}
inline void free_state(Engine& e, uint32_t slot) {
  if (slot != SequenceInput::kNoState) e.states().slots().free(std::span<const uint32_t>(&slot, 1));
}

// Logits [n][vocab] of one prefill of `tokens`.
inline std::vector<std::vector<float>> prefill_logits(Engine& e,
                                                      const std::vector<int32_t>& tokens) {
  uint32_t ps = e.kv_pool().page_size();
  auto pages = e.kv_pool().allocate(pages_for(uint32_t(tokens.size()), ps));
  SequenceInput s = prefill_input(tokens, pages, ps);
  s.state_slot = new_state(e);
  auto res = e.forward({s});
  e.kv_pool().free(pages);
  free_state(e, s.state_slot);
  std::vector<std::vector<float>> out;
  for (auto& o : res[0].outputs) out.push_back(std::move(o.logits));
  return out;
}

// Logits of tokens[0, n) fed one token per forward call (the decode path), each call seeing
// the KV written by the earlier ones; the pages are freed at the end.
inline std::vector<std::vector<float>> decode_logits(Engine& e, const std::vector<int32_t>& tokens,
                                                     uint32_t n) {
  const uint32_t ps = e.kv_pool().page_size();
  auto pages = e.kv_pool().allocate(pages_for(n, ps));
  const uint32_t state = new_state(e);
  std::vector<std::vector<float>> out;
  for (uint32_t i = 0; i < n; ++i) {
    SequenceInput s;
    s.state_slot = state;
    s.tokens = {tokens[i]};
    s.positions = {i};
    s.kv_pages.assign(pages.begin(), pages.begin() + pages_for(i + 1, ps));
    s.last_page_len = last_len(i + 1, ps);
    s.outputs = {{0, OutputKind::Logits, 0, 0}};
    out.push_back(std::move(e.forward({s})[0].outputs[0].logits));
  }
  e.kv_pool().free(pages);
  free_state(e, state);
  return out;
}

struct OracleTop {
  int32_t id;
  double logit;
};
struct OraclePosition {
  double logsumexp;
  std::vector<OracleTop> top;
};
struct Oracle {
  std::string model;
  std::vector<int32_t> tokens;
  std::vector<OraclePosition> positions;
};

inline Oracle read_oracle(const std::string& file) {
  std::ifstream in(oracle_path(file));
  if (!in) throw std::runtime_error("cannot open " + oracle_path(file));
  nlohmann::json j = nlohmann::json::parse(in);
  Oracle o;
  o.model = j.at("model").get<std::string>();
  o.tokens = j.at("tokens").get<std::vector<int32_t>>();
  for (const auto& p : j.at("positions")) {
    OraclePosition op;
    op.logsumexp = p.at("logsumexp").get<double>();
    for (const auto& t : p.at("top"))
      op.top.push_back({t.at("id").get<int32_t>(), t.at("logit").get<double>()});
    o.positions.push_back(std::move(op));
  }
  return o;
}

// Raw [n_pos][n_vocab] f32 little-endian logits.
inline std::vector<float> read_f32(const std::string& file) {
  std::ifstream in(oracle_path(file), std::ios::binary | std::ios::ate);
  if (!in) throw std::runtime_error("cannot open " + oracle_path(file));
  size_t n = static_cast<size_t>(in.tellg()) / sizeof(float);
  in.seekg(0);
  std::vector<float> v(n);
  in.read(reinterpret_cast<char*>(v.data()), std::streamsize(n * sizeof(float)));
  return v;
}

}  // namespace pith::test
