#include "bench/bench_lora.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <random>

#include <unistd.h>

#include "backend/backend.h"
#include "common/error.h"
#include "engine/lora_adapter.h"
#include "engine/model_loader.h"
#include "model_gen/lora_gen.h"

namespace pith::bench {

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

struct Sequence {
  std::vector<uint32_t> pages;
  uint32_t ctx = 0;
  int32_t next = 0;
  uint32_t adapter = 0;
};

SequenceInput step_input(const Sequence& s, std::vector<int32_t> tokens, uint32_t ps) {
  SequenceInput in;
  const uint32_t n = static_cast<uint32_t>(tokens.size()), ctx = s.ctx + n;
  in.tokens = std::move(tokens);
  for (uint32_t i = 0; i < n; ++i) in.positions.push_back(s.ctx + i);
  const uint32_t pages = (ctx + ps - 1) / ps;
  in.kv_pages.assign(s.pages.begin(), s.pages.begin() + pages);
  in.last_page_len = ctx - (pages - 1) * ps;
  in.outputs.push_back({n - 1, OutputKind::TopK, 1, 0});
  in.adapter = s.adapter;
  return in;
}

// `steps` batched greedy decode steps over `seqs`; returns seconds.
double decode(Backend& b, std::vector<Sequence>& seqs, int steps) {
  std::vector<SequenceInput> batch(seqs.size());
  const auto t0 = Clock::now();
  for (int k = 0; k < steps; ++k) {
    for (size_t i = 0; i < seqs.size(); ++i)
      batch[i] = step_input(seqs[i], {seqs[i].next}, b.page_size());
    auto res = b.forward(batch);
    for (size_t i = 0; i < seqs.size(); ++i) {
      seqs[i].next = res[i].outputs[0].dist.ids[0];
      ++seqs[i].ctx;
    }
  }
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

}  // namespace

nlohmann::json run_lora_bench(const LoraBenchOptions& o) {
  if (o.batch < 1 || o.adapters < 1 || o.rank < 1 || o.steps < 1 || o.rounds < 1)
    fail("bench lora: batch, adapters, rank, steps and rounds must be at least 1");
  auto weights = load_model(o.model, LoadOptions{.quiet = true});
  const ModelConfig& c = weights->config;

  // Adapters, generated next to nothing else and removed afterwards.
  const fs::path dir =
      fs::temp_directory_path() / fmt::format("pith_bench_lora_{}", static_cast<long>(getpid()));
  fs::create_directories(dir);
  struct Cleanup {
    fs::path dir;
    ~Cleanup() {
      std::error_code ec;
      fs::remove_all(dir, ec);
    }
  } cleanup{dir};
  std::vector<std::shared_ptr<const LoraAdapter>> adapters;
  for (int a = 0; a < o.adapters; ++a) {
    LoraGenOptions g;
    g.base_path = o.model;
    g.format = "gguf";
    g.output = (dir / fmt::format("a{}.gguf", a)).string();
    g.rank = static_cast<uint32_t>(o.rank);
    g.alpha = 2.0f * float(o.rank);
    auto dt = dtype_from_name(o.adapter_dtype);
    if (!dt) fail("bench lora: --adapter-dtype {} (f32, f16 or bf16)", o.adapter_dtype);
    g.dtype = *dt;
    g.seed = uint64_t(a) + 1;
    generate_lora(g);
    adapters.push_back(load_lora_adapter(g.output, *weights));
  }

  BackendOptions eo;
  eo.n_threads = size_t(o.threads);
  eo.device = o.device;
  const uint32_t ps = eo.kv_page_size;
  const uint32_t max_ctx = uint32_t(o.context) + uint32_t(o.steps * o.rounds) + 1;
  const size_t pages_per_seq = (max_ctx + ps - 1) / ps;
  eo.kv_memory_bytes = 2 * size_t(o.batch) * pages_per_seq *
                       (size_t{c.n_layers} * 2 * ps * c.kv_dim() * sizeof(float));
  auto backend = make_backend(weights, eo);
  Backend& b = *backend;
  for (int a = 0; a < o.adapters; ++a) b.load_adapter(uint32_t(a) + 1, adapters[size_t(a)]);

  // Two sets of sequences with the same prompts: the base set and the mixed-adapter set.
  std::mt19937 rng(7);
  std::uniform_int_distribution<int32_t> tok(0, int32_t(c.vocab_size) - 1);
  std::vector<Sequence> base(size_t(o.batch)), mixed(size_t(o.batch));
  for (int i = 0; i < o.batch; ++i) {
    std::vector<int32_t> prompt(size_t(o.context));
    for (auto& t : prompt) t = tok(rng);
    for (auto* set : {&base, &mixed}) {
      Sequence& s = (*set)[size_t(i)];
      s.pages = b.page_slots().allocate(uint32_t(pages_per_seq));
      s.adapter = set == &mixed ? uint32_t(i % o.adapters) + 1 : 0;
      auto res = b.forward({step_input(s, prompt, ps)});
      s.ctx = uint32_t(o.context);
      s.next = res[0].outputs[0].dist.ids[0];
    }
  }
  fmt::print(
      "lora bench: {} ({} layers, d_model {}), batch {}, {} adapters of rank {} ({}), "
      "{} threads, {} rounds of {} steps, ABAB\n",
      o.model, c.n_layers, c.d_model, o.batch, o.adapters, o.rank, o.adapter_dtype, o.threads,
      o.rounds, o.steps);

  std::vector<double> base_tps, lora_tps;
  decode(b, base, 1);  // warm-up, both paths
  decode(b, mixed, 1);
  for (int r = 0; r < o.rounds; ++r) {
    const bool base_first = r % 2 == 0;
    for (int k = 0; k < 2; ++k) {
      const bool is_base = (k == 0) == base_first;
      const double s = decode(b, is_base ? base : mixed, o.steps);
      (is_base ? base_tps : lora_tps).push_back(double(o.batch) * o.steps / s);
    }
    fmt::print("  round {}: base {:.1f} tok/s, {} adapters mixed {:.1f} tok/s\n", r + 1,
               base_tps.back(), o.adapters, lora_tps.back());
  }
  const double bm = median(base_tps), lm = median(lora_tps);
  const size_t adapter_bytes = adapters[0]->weight_bytes();
  fmt::print(
      "decode, batch {}: base {:.1f} tok/s, mixed adapters {:.1f} tok/s: {:.3f}x of base "
      "(median); each adapter {:.1f} MiB ({}, targets {})\n",
      o.batch, bm, lm, lm / bm, double(adapter_bytes) / (1 << 20), o.adapter_dtype,
      adapters[0]->targets());
  nlohmann::json j = {{"suite", "lora"},
                      {"model", o.model},
                      {"device", b.info().device},
                      {"batch", o.batch},
                      {"adapters", o.adapters},
                      {"rank", o.rank},
                      {"adapter_dtype", o.adapter_dtype},
                      {"context", o.context},
                      {"steps", o.steps},
                      {"rounds", o.rounds},
                      {"threads", o.threads},
                      {"base_tok_s", bm},
                      {"lora_tok_s", lm},
                      {"ratio", lm / bm},
                      {"base_tok_s_rounds", base_tps},
                      {"lora_tok_s_rounds", lora_tps},
                      {"adapter_bytes", adapter_bytes},
                      {"adapter_targets", adapters[0]->targets()}};
  return j;
}

}  // namespace pith::bench
