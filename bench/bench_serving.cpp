#include "bench/bench_serving.h"

#include <fmt/format.h>

#include <atomic>
#include <mutex>
#include <random>
#include <thread>

#include "bench/request_driver.h"
#include "common/error.h"
#include "engine/model_loader.h"

namespace pith::bench {

namespace {

double ms(Clock::duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

BackendOptions engine_options(const ModelWeights& w, size_t kv_tokens, int threads,
                              const std::string& device) {
  BackendOptions eo;
  eo.device = device;
  eo.n_threads = static_cast<size_t>(threads);
  const auto& c = w.config;
  eo.kv_memory_bytes = (kv_tokens + 64) * size_t{c.n_layers} * 2 * c.kv_dim() * sizeof(float);
  return eo;
}

std::vector<int32_t> random_tokens(std::mt19937& rng, int n, uint32_t vocab) {
  std::vector<int32_t> v(n);
  for (auto& t : v) t = static_cast<int32_t>(rng() % vocab);
  return v;
}

}  // namespace

nlohmann::json run_prefix_cache_bench(const PrefixCacheBenchOptions& o) {
  if (o.model.empty()) fail("pith bench prefix-cache needs -m MODEL");
  auto weights = load_model(o.model, LoadOptions{.quiet = true});
  const uint32_t vocab = weights->config.vocab_size;
  std::mt19937 rng(42);
  auto system = random_tokens(rng, o.system_tokens, vocab);
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < o.requests; ++i) {
    auto p = system;
    auto q = random_tokens(rng, o.question_tokens, vocab);
    p.insert(p.end(), q.begin(), q.end());
    prompts.push_back(std::move(p));
  }
  const size_t per_request = o.system_tokens + o.question_tokens + o.max_tokens;

  struct Result {
    uint64_t prefill = 0;
    double seconds = 0;
    double ttft_p50 = 0;
  };
  auto run = [&](bool cache) {
    auto backend = make_backend(
        weights, engine_options(*weights, per_request * (o.concurrency + 2) + o.requests * 80,
                                o.threads, o.device));
    Backend& engine = *backend;
    ControllerOptions co;
    co.prefix_cache = cache;
    Controller ctl(engine, co);
    std::atomic<int> next{0};
    std::atomic<uint64_t> prefill{0};
    std::mutex mu;
    std::vector<double> ttft;
    auto t0 = Clock::now();
    std::vector<std::thread> workers;
    for (int w = 0; w < o.concurrency; ++w)
      workers.emplace_back([&] {
        for (int i; (i = next++) < o.requests;) {
          RequestSpec spec{prompts[i], o.max_tokens, cache};
          auto t = run_request(ctl, static_cast<InstanceId>(i + 1), spec);
          prefill += t.prefill_tokens;
          std::lock_guard lock(mu);
          ttft.push_back(ms(t.first_token - t.arrival));
        }
      });
    for (auto& w : workers) w.join();
    Result r;
    r.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    r.prefill = prefill;
    r.ttft_p50 = percentile(ttft, 50);
    return r;
  };
  fmt::print(
      "prefix-cache: {} requests = {}-token system prompt + {}-token question, {} generated, "
      "concurrency {}, model {}\n",
      o.requests, o.system_tokens, o.question_tokens, o.max_tokens, o.concurrency, o.model);
  Result off = run(false);
  fmt::print("  cache off: {:>8} prompt tokens computed, {:8.2f} s, TTFT p50 {:8.1f} ms\n",
             off.prefill, off.seconds, off.ttft_p50);
  Result on = run(true);
  fmt::print("  cache on:  {:>8} prompt tokens computed, {:8.2f} s, TTFT p50 {:8.1f} ms\n",
             on.prefill, on.seconds, on.ttft_p50);
  nlohmann::json out;
  out["suite"] = "prefix-cache";
  out["prefill_tokens_on"] = on.prefill;
  out["prefill_tokens_off"] = off.prefill;
  out["prefill_ratio"] = double(on.prefill) / double(off.prefill);
  out["seconds_on"] = on.seconds;
  out["seconds_off"] = off.seconds;
  out["speedup"] = off.seconds / on.seconds;
  out["ttft_p50_ms_on"] = on.ttft_p50;
  out["ttft_p50_ms_off"] = off.ttft_p50;
  fmt::print("  prompt tokens computed: {:.3f}x of no-cache; end-to-end speedup {:.2f}x\n",
             out["prefill_ratio"].get<double>(), out["speedup"].get<double>());
  return out;
}

nlohmann::json run_chunked_prefill_bench(const ChunkedPrefillBenchOptions& o) {
  if (o.model.empty()) fail("pith bench chunked-prefill needs -m MODEL");
  auto weights = load_model(o.model, LoadOptions{.quiet = true});
  const uint32_t vocab = weights->config.vocab_size;

  struct Result {
    double ttft_p50 = 0, ttft_p99 = 0, itl_p50 = 0, itl_p99 = 0, seconds = 0, tok_s = 0;
  };
  auto run = [&](uint32_t budget) {
    size_t kv = size_t(o.long_tokens) + o.short_requests * (o.short_tokens + o.short_max_tokens) +
                o.decoders * (o.short_tokens + o.decode_tokens) + 64 * 16;
    auto backend = make_backend(weights, engine_options(*weights, kv, o.threads, o.device));
    Backend& engine = *backend;
    ControllerOptions co;
    co.max_batch_tokens = budget;
    co.prefix_cache = false;
    Controller ctl(engine, co);
    std::mt19937 rng(7);
    std::mutex mu;
    std::vector<double> ttft, itl;
    std::vector<std::vector<Clock::time_point>> decoder_tokens;
    std::atomic<uint64_t> tokens{0};
    Clock::time_point long_start{}, long_first{};
    auto t0 = Clock::now();
    std::vector<std::thread> threads;
    // Decoders: already generating when the long prompt arrives.
    std::atomic<int> decoders_ready{0};
    for (int d = 0; d < o.decoders; ++d) {
      auto prompt = random_tokens(rng, o.short_tokens, vocab);
      threads.emplace_back([&, d, prompt] {
        RequestSpec spec{prompt, o.decode_tokens, false};
        ++decoders_ready;
        auto t = run_request(ctl, 1000 + d, spec);
        tokens += spec.prompt.size() + spec.max_tokens;
        std::lock_guard lock(mu);
        decoder_tokens.push_back(std::move(t.tokens));
      });
    }
    while (decoders_ready < o.decoders) std::this_thread::yield();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    auto long_prompt = random_tokens(rng, o.long_tokens, vocab);
    threads.emplace_back([&] {
      {
        std::lock_guard lock(mu);
        long_start = Clock::now();
      }
      auto t = run_request(ctl, 1, RequestSpec{long_prompt, 1, false});
      tokens += long_prompt.size() + 1;
      std::lock_guard lock(mu);
      long_first = t.first_token;
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    for (int s = 0; s < o.short_requests; ++s) {
      auto prompt = random_tokens(rng, o.short_tokens, vocab);
      threads.emplace_back([&, s, prompt] {
        auto t = run_request(ctl, 2 + s, RequestSpec{prompt, o.short_max_tokens, false});
        tokens += prompt.size() + o.short_max_tokens;
        std::lock_guard lock(mu);
        ttft.push_back(ms(t.first_token - t.arrival));
      });
    }
    for (auto& t : threads) t.join();
    // The decoders' inter-token gaps that overlap the long prompt's prefill.
    for (const auto& ts : decoder_tokens)
      for (size_t i = 1; i < ts.size(); ++i)
        if (ts[i] > long_start && ts[i - 1] < long_first) itl.push_back(ms(ts[i] - ts[i - 1]));
    Result r;
    r.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    r.tok_s = double(tokens) / r.seconds;
    r.ttft_p50 = percentile(ttft, 50);
    r.ttft_p99 = percentile(ttft, 99);
    r.itl_p50 = percentile(itl, 50);
    r.itl_p99 = percentile(itl, 99);
    return r;
  };
  fmt::print(
      "chunked-prefill: 1 x {} tokens + {} x {} tokens arriving together, {} decoders, model {}\n",
      o.long_tokens, o.short_requests, o.short_tokens, o.decoders, o.model);
  Result off = run(0);
  Result on = run(o.budget);
  auto row = [](const char* name, const Result& r) {
    fmt::print(
        "  {:<22} TTFT p50 {:9.1f} ms p99 {:9.1f} ms | ITL p50 {:8.1f} ms p99 {:8.1f} ms | {:8.1f} "
        "tok/s\n",
        name, r.ttft_p50, r.ttft_p99, r.itl_p50, r.itl_p99, r.tok_s);
  };
  row("no chunking", off);
  row(fmt::format("budget {}", o.budget).c_str(), on);
  nlohmann::json out;
  out["suite"] = "chunked-prefill";
  out["budget"] = o.budget;
  out["ttft_p99_ms_on"] = on.ttft_p99;
  out["ttft_p99_ms_off"] = off.ttft_p99;
  out["ttft_p50_ms_on"] = on.ttft_p50;
  out["ttft_p50_ms_off"] = off.ttft_p50;
  out["ttft_p99_ratio"] = off.ttft_p99 / on.ttft_p99;
  out["itl_p50_ms_on"] = on.itl_p50;
  out["itl_p99_ms_on"] = on.itl_p99;
  out["itl_p50_ms_off"] = off.itl_p50;
  out["itl_p99_ms_off"] = off.itl_p99;
  out["tok_s_on"] = on.tok_s;
  out["tok_s_off"] = off.tok_s;
  out["throughput_loss_pct"] = (off.tok_s - on.tok_s) / off.tok_s * 100.0;
  fmt::print("  short-request TTFT p99 {:.1f}x better with chunking; throughput loss {:.1f}%\n",
             out["ttft_p99_ratio"].get<double>(), out["throughput_loss_pct"].get<double>());
  return out;
}

}  // namespace pith::bench
