// `pith bench embeddings`. See bench_embeddings.h.
#include "bench/bench_embeddings.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "bench/bench_words.h"
#include "bench/child_server.h"
#include "cli/server_client.h"
#include "common/error.h"

namespace pith::bench {

namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

// Input i of a run: `words` words of its own stream (runs never repeat an input).
std::string input_text(const EmbeddingBenchOptions& o, int run, int i) {
  std::string text;
  uint64_t x = 0x9e3779b97f4a7c15ull * (o.seed + 1) ^
               0xda942042e4dd58b5ull * (uint64_t(run) * 1000003u + uint64_t(i) + 1);
  append_words(text, x, o.words);
  return text;
}

struct Target {
  std::string name;
  std::unique_ptr<cli::ServerClient> client;
  std::string model;
};

struct Run {
  double seconds = 0;
  uint64_t tokens = 0;
  std::vector<std::vector<float>> vectors;  // per input
};

// Sends inputs [0, n) of run `run` in requests of `batch` from `concurrency` clients.
Run embed_all(const Target& t, const EmbeddingBenchOptions& o, int run, int batch,
              int concurrency) {
  Run r;
  r.vectors.resize(o.inputs);
  const int requests = (o.inputs + batch - 1) / batch;
  std::atomic<int> next{0};
  std::atomic<uint64_t> tokens{0};
  std::vector<std::string> errors(requests);
  const auto start = Clock::now();
  std::vector<std::thread> threads;
  for (int c = 0; c < concurrency; ++c)
    threads.emplace_back([&] {
      for (int q; (q = next.fetch_add(1)) < requests;) {
        const int first = q * batch, last = std::min(o.inputs, first + batch);
        json input = json::array();
        for (int i = first; i < last; ++i) input.push_back(input_text(o, run, i));
        try {
          const json res =
              t.client->post("/v1/embeddings",
                             {{"model", t.model}, {"input", input}, {"encoding_format", "float"}});
          const json& data = res.at("data");
          if (data.size() != size_t(last - first))
            fail("{} vectors for {} inputs", data.size(), last - first);
          for (const json& d : data)
            r.vectors.at(first + d.at("index").get<int>()) =
                d.at("embedding").get<std::vector<float>>();
          tokens += res.at("usage").at("prompt_tokens").get<uint64_t>();
        } catch (const std::exception& e) {
          errors[q] = e.what();
        }
      }
    });
  for (auto& th : threads) th.join();
  r.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  r.tokens = tokens;
  for (const std::string& e : errors)
    if (!e.empty()) fail("embeddings bench: {}: {}", t.name, e);
  return r;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

double cosine(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size() || a.empty()) return 0;
  double ab = 0, aa = 0, bb = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    ab += double(a[i]) * b[i];
    aa += double(a[i]) * a[i];
    bb += double(b[i]) * b[i];
  }
  return aa > 0 && bb > 0 ? ab / std::sqrt(aa * bb) : 0;
}

Target connect(std::string name, const std::string& url, const std::string& key) {
  Target t{std::move(name), std::make_unique<cli::ServerClient>(url, key), ""};
  t.model = t.client->get("/v1/models").at("data").at(0).at("id");
  return t;
}

}  // namespace

json run_embedding_bench(const EmbeddingBenchOptions& o) {
  if (o.model.empty() == o.url.empty()) fail("pith bench embeddings needs -m MODEL or --url URL");
  if (o.inputs < 1 || o.batch < 1 || o.concurrency < 1 || o.words < 1 || o.rounds < 1)
    fail("embeddings: --inputs, --batch, --concurrency, --words and --rounds must be positive");
  std::optional<ChildServer> child;
  if (!o.model.empty()) {
    std::vector<std::string> args = {"-m",     o.model, "--device",
                                     o.device, "-t",    std::to_string(o.threads)};
    if (!o.kv_memory.empty()) args.insert(args.end(), {"--kv-memory", o.kv_memory});
    if (!o.pooling.empty()) args.insert(args.end(), {"--pooling", o.pooling});
    child.emplace("embeddings bench", args);
  }
  const Target pith = connect("pith", child ? child->url() : o.url, o.api_key);
  std::optional<Target> other;
  if (!o.against.empty()) other = connect("against", o.against, o.api_key);

  fmt::print(
      "embeddings: {} inputs of {} distinct words per run, {} per request, {} clients; {} "
      "round(s){}\n",
      o.inputs, o.words, o.batch, o.concurrency, o.rounds,
      other ? fmt::format(", against {}", o.against) : std::string());
  (void)embed_all(pith, o, -1, o.batch, o.concurrency);  // warm-up (compiles the inferlet)
  if (other) (void)embed_all(*other, o, -1, o.batch, o.concurrency);

  std::vector<double> batched, single, against, batched_tok;
  double min_cos = 1, mean_cos = 0;
  for (int round = 0; round < o.rounds; ++round) {
    // Each kind on texts of its own; the order alternates so a slow spell hits all alike.
    const int base = 3 * round;
    auto run_pith = [&] {
      Run r = embed_all(pith, o, base, o.batch, o.concurrency);
      batched.push_back(o.inputs / r.seconds);
      batched_tok.push_back(r.tokens / r.seconds);
      return r;
    };
    auto run_single = [&] {
      single.push_back(o.inputs / embed_all(pith, o, base + 1, 1, 1).seconds);
    };
    auto run_other = [&] {  // pith's batched texts
      Run r = embed_all(*other, o, base, o.batch, o.concurrency);
      against.push_back(o.inputs / r.seconds);
      return r;
    };
    Run mine, theirs;
    if (round % 2 == 0) {
      mine = run_pith();
      run_single();
      if (other) theirs = run_other();
    } else {
      if (other) theirs = run_other();
      run_single();
      mine = run_pith();
    }
    if (other) {
      if (round == 0) {
        mean_cos = 0;
        for (int i = 0; i < o.inputs; ++i) {
          const double c = cosine(mine.vectors[i], theirs.vectors[i]);
          min_cos = std::min(min_cos, c);
          mean_cos += c / o.inputs;
        }
      }
    }
  }
  const double b = median(batched), s = median(single);
  json out = {{"suite", "embeddings"},
              {"inputs", o.inputs},
              {"batch", o.batch},
              {"concurrency", o.concurrency},
              {"words", o.words},
              {"rounds", o.rounds},
              {"model", o.model.empty() ? pith.model : o.model},
              {"batched_inputs_per_s", b},
              {"batched_tokens_per_s", median(batched_tok)},
              {"one_by_one_inputs_per_s", s},
              {"batched_vs_one_by_one", b / s}};
  fmt::print("{:<28} {:>10.2f} inputs/s {:>10.1f} tok/s\n", "pith batched", b, median(batched_tok));
  fmt::print("{:<28} {:>10.2f} inputs/s   ({:.2f}x batched)\n", "pith one input per request", s,
             b / s);
  if (other) {
    const double a = median(against);
    out["against"] = o.against;
    out["against_inputs_per_s"] = a;
    out["ratio_vs_against"] = b / a;
    out["min_cosine_vs_against"] = min_cos;
    out["mean_cosine_vs_against"] = mean_cos;
    fmt::print("{:<28} {:>10.2f} inputs/s   (pith {:.2f}x)\n", "against (batched)", a, b / a);
    fmt::print("vectors vs against: cosine min {:.6f}, mean {:.6f}\n", min_cos, mean_cos);
  }
  return out;
}

}  // namespace pith::bench
