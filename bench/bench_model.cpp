// The model benchmark suite (see bench_model.h).
#include "bench/bench_model.h"
#include "bench/model_profile.h"
#include "engine/kv_pool.h"

#include <fmt/format.h>

#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <random>

#include "backend/backend.h"
#include "bench/machine_baselines.h"
#include "bench/transformers_baseline.h"
#include "common/error.h"
#include "engine/model_loader.h"

namespace pith::bench {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// CPU seconds used by this process (all threads). With 1 thread it is the compute time even
// on a loaded machine; with more it also counts the pool's spin-waits.
double process_cpu_seconds() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
}

// One sequence's KV pages and context length, grown as tokens are appended, and its recurrent
// state slot on a hybrid model.
struct Sequence {
  std::vector<uint32_t> pages;
  size_t ctx = 0;
  uint32_t state = SequenceInput::kNoState;
};

// The forward input appending `tokens` to `s` (allocating pages as needed), asking for the
// top-1 token after the last one.
SequenceInput append(Backend& engine, Sequence& s, std::vector<int32_t> tokens) {
  const uint32_t ps = engine.page_size();
  const size_t n = tokens.size(), new_ctx = s.ctx + n;
  const size_t need = (new_ctx + ps - 1) / ps;
  if (need > s.pages.size()) {
    auto more = engine.page_slots().allocate(need - s.pages.size());
    s.pages.insert(s.pages.end(), more.begin(), more.end());
  }
  if (engine.config().hybrid() && s.state == SequenceInput::kNoState) {
    s.state = engine.state_slots().allocate(1)[0];
    engine.clear_states(std::span<const uint32_t>(&s.state, 1));
  }
  SequenceInput in;
  in.state_slot = s.state;
  in.tokens = std::move(tokens);
  for (size_t i = 0; i < n; ++i) in.positions.push_back(static_cast<uint32_t>(s.ctx + i));
  in.kv_pages = s.pages;
  in.last_page_len = static_cast<uint32_t>(new_ctx - (need - 1) * ps);
  in.outputs.push_back(OutputSpec{static_cast<uint32_t>(n - 1), OutputKind::TopK, 1, 0});
  s.ctx = new_ctx;
  return in;
}

// A sequence holding a copy of `src`'s context (its K/V pages and recurrent state), so tests
// at depth start without prefilling every sequence: the copies cost page copies, untimed.
Sequence copy_of(Backend& engine, const Sequence& src) {
  Sequence s;
  if (src.ctx == 0) return s;
  s.pages = engine.page_slots().allocate(src.pages.size());
  const uint32_t ps = engine.page_size();
  for (size_t i = 0; i < src.pages.size(); ++i)
    engine.copy_kv(src.pages[i], s.pages[i], 0, 0,
                   static_cast<uint32_t>(std::min<size_t>(ps, src.ctx - i * ps)));
  if (src.state != SequenceInput::kNoState) {
    s.state = engine.state_slots().allocate(1)[0];
    engine.copy_state(src.state, s.state);
  }
  s.ctx = src.ctx;
  return s;
}

void release(Backend& engine, Sequence& s) {
  engine.page_slots().free(s.pages);
  if (s.state != SequenceInput::kNoState)
    engine.state_slots().free(std::span<const uint32_t>(&s.state, 1));
  s = Sequence{};
}

int32_t next_token(const SequenceResult& r) {
  return r.outputs.at(0).dist.ids.at(0);
}

// Tokens/s of one prefill after `context`'s tokens; adds the process CPU seconds it took to
// *cpu_seconds.
double run_prefill(Backend& engine, const Sequence& context, size_t n_prompt, std::mt19937& rng,
                   double* cpu_seconds) {
  std::uniform_int_distribution<int32_t> tok(0,
                                             static_cast<int32_t>(engine.config().vocab_size) - 1);
  std::vector<int32_t> tokens(n_prompt);
  for (auto& t : tokens) t = tok(rng);
  Sequence s = copy_of(engine, context);
  const double c0 = process_cpu_seconds();
  auto t0 = Clock::now();
  engine.forward({append(engine, s, tokens)});
  double sec = seconds_since(t0);
  *cpu_seconds += process_cpu_seconds() - c0;
  release(engine, s);
  return double(n_prompt) / sec;
}

// B sequences decoding `steps` tokens each after `context`'s tokens; aggregate tokens/s.
double run_decode(Backend& engine, const Sequence& context, size_t batch, size_t steps,
                  std::mt19937& rng) {
  std::uniform_int_distribution<int32_t> tok(0,
                                             static_cast<int32_t>(engine.config().vocab_size) - 1);
  std::vector<Sequence> seqs;
  for (size_t b = 0; b < batch; ++b) seqs.push_back(copy_of(engine, context));
  std::vector<int32_t> next(batch);
  for (auto& t : next) t = tok(rng);
  auto t0 = Clock::now();
  for (size_t step = 0; step < steps; ++step) {
    std::vector<SequenceInput> inputs;
    for (size_t b = 0; b < batch; ++b) inputs.push_back(append(engine, seqs[b], {next[b]}));
    auto results = engine.forward(inputs);
    for (size_t b = 0; b < batch; ++b) next[b] = next_token(results[b]);
  }
  double sec = seconds_since(t0);
  for (auto& s : seqs) release(engine, s);
  return double(batch * steps) / sec;
}

template <typename Fn>
double median_of(int reps, Fn&& fn) {
  std::vector<double> v;
  for (int r = 0; r < reps; ++r) v.push_back(fn());
  return median(v);
}

struct LlamaBenchResult {
  double pp_tok_s = 0, tg_tok_s = 0;
  std::string version;
};

double samples_median(const nlohmann::json& e) {
  if (e.contains("samples_ts") && e["samples_ts"].is_array() && !e["samples_ts"].empty()) {
    std::vector<double> v;
    for (const auto& x : e["samples_ts"]) v.push_back(x.get<double>());
    return median(v);
  }
  return e.value("avg_ts", 0.0);
}

// llama-bench with the KV type pith ran with where llama-bench has it (f16, bf16); for f32,
// which its -ctk refuses, its default f16. On a GPU always f16: as many bytes as pith's bf16,
// and the type llama.cpp's CUDA flash attention is built for (its tensor-core kernels convert
// any other K/V type to f16 first), so it runs in its best configuration.
KvDType llama_bench_kv(KvDType pith_kv, bool gpu) {
  return pith_kv == KvDType::BF16 && !gpu ? KvDType::BF16 : KvDType::F16;
}

LlamaBenchResult run_llama_bench(const ModelBenchOptions& o, KvDType kv) {
  std::string cmd =
      fmt::format("'{}' -m '{}' -p {} -n {} -d {} -t {} -r {} -ctk {} -ctv {} -o json 2>/dev/null",
                  o.llama_bench, o.model_path, o.n_prompt, o.n_gen, o.depth, o.threads, o.reps,
                  kv_dtype_name(kv), kv_dtype_name(kv));
  std::unique_ptr<FILE, int (*)(FILE*)> p(popen(cmd.c_str(), "r"), pclose);
  if (!p) fail("cannot run llama-bench: {}", cmd);
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p.get())) > 0) out.append(buf, n);
  nlohmann::json j = nlohmann::json::parse(out, nullptr, false);
  if (j.is_discarded() || !j.is_array()) fail("llama-bench gave no JSON (command: {})", cmd);
  LlamaBenchResult r;
  for (const auto& e : j) {
    if (e.value("n_gen", 0) > 0)
      r.tg_tok_s = samples_median(e);
    else if (e.value("n_prompt", 0) > 0)
      r.pp_tok_s = samples_median(e);
    r.version = e.value("build_commit", std::string{});
  }
  return r;
}

}  // namespace

nlohmann::json run_model_bench(const ModelBenchOptions& o) {
  if (o.n_prompt == 0 && o.n_gen == 0) fail("bench model: nothing to run (-p 0 -n 0)");
  check_profile_cases(o.profile_cases);  // before minutes of tests, not after them
  if (!o.profile_cases.empty() && !o.profile) fail("bench model: --profile-cases needs --profile");
  if (!o.transformers_model.empty() && o.transformers.empty())
    fail("bench model: --transformers-model needs --transformers PYTHON");
  const std::string hf_folder = o.transformers_model.empty() ? o.model_path : o.transformers_model;
  if (!o.transformers.empty()) {  // checked before minutes of pith's own tests
    if (o.depth > 0) fail("bench model: --transformers measures from an empty context (-d 0)");
    if (!std::filesystem::is_directory(hf_folder))
      fail(
          "bench model: transformers reads Hugging Face folders, and {} is not one: pass "
          "--transformers-model DIR (`pith model gen --format hf` writes one)",
          hf_folder);
  }
  auto weights = load_model(o.model_path, LoadOptions{.quiet = true});
  const ModelConfig& c = weights->config;

  BackendOptions eo;
  eo.n_threads = o.threads;
  size_t max_batch = 0;
  for (size_t b : o.batch_sizes) max_batch = std::max(max_batch, b);
  eo.kv_dtype = o.kv_dtype;
  // Pages sized as f32, the largest any backend stores.
  const size_t page_bytes = kv_shape_for(c, eo.kv_page_size, KvDType::F32).page_bytes();
  const auto pages_for = [&](size_t tokens) {
    return (tokens + eo.kv_page_size - 1) / eo.kv_page_size;
  };
  // The depth context, and a copy of it under each sequence of the largest test.
  const size_t pages = pages_for(o.depth) + pages_for(o.depth + o.n_prompt) +
                       pages_for(o.depth + o.n_gen) +
                       max_batch * pages_for(o.depth + o.batch_steps) + 4;
  eo.kv_memory_bytes = pages * page_bytes;
  // Hybrid models: a recurrent state per sequence of the largest batch (and the prefill's).
  eo.state_memory_bytes = (std::max<size_t>(max_batch, 1) + 2) * c.recurrent_state_floats() * 4;
  eo.device = o.device;
  eo.cpu_weight_panels = o.cpu_weight_panels;
  eo.cuda_graphs = o.cuda_graphs;
  eo.cuda_gemv = o.cuda_gemv;
  eo.cuda_attention = o.cuda_attention;
  auto backend = make_backend(weights, eo);
  Backend& engine = *backend;

  // As the backend holds them: a GPU keeps BF16 copies of quantised weights.
  const size_t wbytes = decode_token_cost(*weights, engine.info().name == "cuda").bytes;
  const KvDType kv_dtype = engine.info().kv_dtype;
  fmt::print(
      "model bench: {} ({} layers, d_model {}, vocab {}), {} threads, KV {}, median of {} runs\n",
      o.model_path, c.n_layers, c.d_model, c.vocab_size, o.threads, kv_dtype_name(kv_dtype),
      o.reps);
  fmt::print("weights streamed per decode step: {:.1f} MiB\n", wbytes / 1048576.0);
  if (!engine.info().attention.empty())
    fmt::print("paged attention: {}\n", engine.info().attention);

  // The floor's bandwidth is sampled before the tests and between the decode runs (the host's
  // bandwidth drifts by 10-20 % over minutes here); its median gives the floor. A backend whose
  // weights live in device memory measures that memory (the CUDA backend: device-to-device
  // copies); for the host's, a read probe on the bench's own threads.
  const bool device_bw = engine.weight_memory_bandwidth_gb_s(o.bandwidth_bytes) > 0;
  std::optional<ThreadPool> bw_pool;
  std::optional<ReadBandwidthProbe> probe;
  if (!device_bw) {
    bw_pool.emplace(o.threads);
    probe.emplace(*bw_pool, o.bandwidth_bytes);
  }
  auto sample_bandwidth = [&] {
    return device_bw ? engine.weight_memory_bandwidth_gb_s(o.bandwidth_bytes) : probe->sample();
  };
  std::vector<double> bw_samples;
  for (int i = 0; i < 3; ++i) bw_samples.push_back(sample_bandwidth());

  std::mt19937 rng(1);
  // The tests' common context: `depth` random tokens prefilled once (untimed).
  Sequence context;
  if (o.depth > 0) {
    std::uniform_int_distribution<int32_t> tok(0, static_cast<int32_t>(c.vocab_size) - 1);
    std::vector<int32_t> tokens(o.depth);
    for (auto& t : tokens) t = tok(rng);
    engine.forward({append(engine, context, tokens)});
  }
  // What one decode step streams at depth besides the weights: every layer's K/V of the context.
  const size_t kv_bytes = o.depth * engine.kv_page_bytes() / engine.page_size();
  if (o.depth > 0)
    fmt::print(
        "depth {}: every test starts after {} tokens of context, whose K/V ({:.1f} MiB) "
        "each decode step also reads\n",
        o.depth, o.depth, kv_bytes / 1048576.0);
  double pp = 0, tg = 0, pp_cpu = 0;
  if (o.n_prompt > 0) {
    double cpu = 0;
    run_prefill(engine, context, std::min<size_t>(o.n_prompt, 64), rng, &cpu);  // warm-up
    cpu = 0;
    pp = median_of(o.reps, [&] { return run_prefill(engine, context, o.n_prompt, rng, &cpu); });
    pp_cpu = double(o.n_prompt) * o.reps / cpu;
    fmt::print("pp{}: {:.2f} tok/s ({:.2f} tokens per process-CPU-second)\n", o.n_prompt, pp,
               pp_cpu);
  }
  if (o.n_gen > 0) {
    run_decode(engine, context, 1, 4, rng);  // warm-up
    tg = median_of(o.reps, [&] {
      bw_samples.push_back(sample_bandwidth());
      return run_decode(engine, context, 1, o.n_gen, rng);
    });
    bw_samples.push_back(sample_bandwidth());
  }
  const double bw = median(bw_samples);
  const double floor = bw * 1e9 / double(wbytes + kv_bytes);
  fmt::print(
      "{}: {:.2f} GB/s (median of {} samples, {:.1f}-{:.1f}) -> decode floor {:.2f} tok/s\n",
      device_bw ? "device memory bandwidth (device-to-device copy)" : "memory read bandwidth", bw,
      bw_samples.size(), *std::min_element(bw_samples.begin(), bw_samples.end()),
      *std::max_element(bw_samples.begin(), bw_samples.end()), floor);
  if (o.n_gen > 0)
    fmt::print("tg{}: {:.2f} tok/s = {:.2f} of the decode floor\n", o.n_gen, tg, tg / floor);
  nlohmann::json batch = nlohmann::json::object();
  for (size_t b : o.batch_sizes) {
    if (b == 0) fail("bench model: batch size 0");
    double agg =
        median_of(o.reps, [&] { return run_decode(engine, context, b, o.batch_steps, rng); });
    batch[std::to_string(b)] = agg;
    fmt::print("batch {:>3} decode ({} steps): {:.2f} tok/s aggregate{}\n", b, o.batch_steps, agg,
               pp > 0 ? fmt::format(" = {:.2f} of prefill", agg / pp) : "");
  }

  nlohmann::json j = {{"suite", "model"},
                      {"model", o.model_path},
                      {"threads", o.threads},
                      {"n_prompt", o.n_prompt},
                      {"n_gen", o.n_gen},
                      {"reps", o.reps},
                      {"pp_tok_s", pp},
                      {"pp_tok_per_cpu_s", pp_cpu},
                      {"tg_tok_s", tg},
                      {"batch_tg_tok_s", batch},
                      {"batch_steps", o.batch_steps},
                      {"bandwidth_gb_s", bw},
                      {"bandwidth_samples_gb_s", bw_samples},
                      {"bandwidth_probe", device_bw ? "device_copy" : "host_read"},
                      {"weight_bytes_per_token", wbytes},
                      {"depth", o.depth},
                      {"kv_bytes_per_token_at_depth", kv_bytes},
                      {"weight_panels", o.cpu_weight_panels},
                      {"cuda_graphs", o.cuda_graphs},
                      {"cuda_gemv", o.cuda_gemv},
                      {"kv_dtype", kv_dtype_name(kv_dtype)},
                      {"backend", engine.info().name},
                      {"decode_floor_tok_s", floor},
                      {"tg_over_floor", tg / floor}};
  // The paged-attention kernel a GPU ran (null on the CPU).
  if (const std::string attention = engine.info().attention; !attention.empty())
    j["attention"] = attention;
  else
    j["attention"] = nullptr;
  if (!o.llama_bench.empty()) {
    const KvDType lb_kv = llama_bench_kv(kv_dtype, engine.info().name == "cuda");
    LlamaBenchResult lb = run_llama_bench(o, lb_kv);
    fmt::print("llama.cpp ({}, KV {}): pp{} {:.2f} tok/s, tg{} {:.2f} tok/s\n", lb.version,
               kv_dtype_name(lb_kv), o.n_prompt, lb.pp_tok_s, o.n_gen, lb.tg_tok_s);
    if (lb.pp_tok_s > 0) fmt::print("pith / llama.cpp: prefill {:.2f}x", pp / lb.pp_tok_s);
    if (lb.tg_tok_s > 0) fmt::print(", decode {:.2f}x", tg / lb.tg_tok_s);
    fmt::print("\n");
    j["llama_cpp"] = {{"pp_tok_s", lb.pp_tok_s},
                      {"tg_tok_s", lb.tg_tok_s},
                      {"build", lb.version},
                      {"kv_dtype", kv_dtype_name(lb_kv)}};
    j["pp_vs_llama_cpp"] = lb.pp_tok_s > 0 ? pp / lb.pp_tok_s : 0.0;
    j["tg_vs_llama_cpp"] = lb.tg_tok_s > 0 ? tg / lb.tg_tok_s : 0.0;
  }
  if (!o.transformers.empty()) {
    TransformersRun run;
    run.python = o.transformers;
    run.model = hf_folder;
    const bool gpu = engine.info().name == "cuda";
    run.device = !gpu ? "cpu" : o.device.starts_with("cuda") ? o.device : "cuda";
    run.threads = gpu ? 0 : o.threads;
    run.n_prompt = o.n_prompt;
    run.n_gen = o.n_gen;
    run.batch_sizes = o.batch_sizes;
    run.batch_steps = o.batch_steps;
    run.reps = o.reps;
    backend.reset();  // the device memory pith held goes back before torch takes its own
    j.update(compare_with_transformers(run, pp, tg, batch));
  }
  if (o.profile) {
    backend.reset();  // the profile builds its own, with a pool sized for its cases
    j["profile"] = run_forward_profile(weights, eo, o.profile_context, o.reps, o.profile_cases);
  }
  return j;
}

}  // namespace pith::bench
