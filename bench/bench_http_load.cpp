// `pith bench serving`. See bench_http_load.h.
#include "bench/bench_http_load.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <fstream>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include "bench/bench_words.h"
#include "bench/child_server.h"
#include "bench/request_driver.h"
#include "cli/server_client.h"
#include "common/error.h"

namespace pith::bench {

namespace {

using nlohmann::json;

// Request i of run `run`: the shared prefix (the same for every request), then distinct words.
// Both servers get the same prompts in a round; no prompt repeats across runs (a prefix cache
// would otherwise serve later rounds from memory).
std::string prompt_text(const HttpLoadOptions& o, int run, int i) {
  std::string text;
  uint64_t x = 0x9e3779b97f4a7c15ull * (o.seed + 1);
  append_words(text, x, o.shared_prefix_words);
  x ^= 0xda942042e4dd58b5ull *
       (static_cast<uint64_t>(run) * 1000003u + static_cast<uint64_t>(i) + 1);
  append_words(text, x, o.prompt_words);
  return text;
}

struct RequestResult {
  bool ok = false;
  std::string error;
  double ttft_ms = 0;
  std::vector<double> itl_ms;
  uint64_t completion_tokens = 0, prompt_tokens = 0;
};

// What every request of a run carries besides its prompt: the endpoint and the sampling.
struct RequestShape {
  bool chat = false;
  json response_format;  // null: none
  double temperature = 0;
  double presence_penalty = 0, frequency_penalty = 0, repetition_penalty = 1;
};

RequestShape request_shape(const HttpLoadOptions& o) {
  RequestShape s{o.chat || !o.response_format.empty(),
                 nullptr,
                 o.temperature,
                 o.presence_penalty,
                 o.frequency_penalty,
                 o.repetition_penalty};
  if (o.response_format == "json_object") {
    s.response_format = {{"type", "json_object"}};
  } else if (!o.response_format.empty()) {
    std::ifstream f(o.response_format);
    json schema = json::parse(f, nullptr, false);
    if (!f || schema.is_discarded())
      fail("serving: --response-format {} is neither json_object nor a JSON Schema file",
           o.response_format);
    s.response_format = {{"type", "json_schema"},
                         {"json_schema", {{"name", "bench"}, {"schema", schema}}}};
  }
  return s;
}

RequestResult one_request(const cli::ServerClient& client, const std::string& model,
                          const std::string& prompt, int max_tokens, const RequestShape& shape,
                          int seed) {
  json body = {{"model", model},
               {"max_tokens", max_tokens},
               {"temperature", shape.temperature},
               {"ignore_eos", true},
               {"stream", true},
               {"stream_options", {{"include_usage", true}}}};
  if (shape.chat)
    body["messages"] = json::array({{{"role", "user"}, {"content", prompt}}});
  else
    body["prompt"] = prompt;
  if (!shape.response_format.is_null()) body["response_format"] = shape.response_format;
  if (shape.temperature > 0) body["seed"] = seed;
  if (shape.presence_penalty != 0) body["presence_penalty"] = shape.presence_penalty;
  if (shape.frequency_penalty != 0) body["frequency_penalty"] = shape.frequency_penalty;
  if (shape.repetition_penalty != 1) body["repetition_penalty"] = shape.repetition_penalty;
  cli::HttpRequest r =
      cli::http_request("POST", shape.chat ? "/v1/chat/completions" : "/v1/completions",
                        body.dump(), "application/json");
  r.idle_timeout_s = 600;
  RequestResult out;
  const auto start = Clock::now();
  std::optional<Clock::time_point> last;
  uint64_t text_chunks = 0;
  bool done = false;
  try {
    client.stream(r, [&](const cli::SseEvent& e) {
      if (e.data == "[DONE]") {
        done = true;
        return false;
      }
      json chunk = json::parse(e.data, nullptr, false);
      if (chunk.is_discarded()) return true;
      if (chunk.contains("error")) {
        out.error = chunk["error"].dump();
        return false;
      }
      if (auto u = chunk.find("usage"); u != chunk.end() && u->is_object()) {
        out.completion_tokens = u->value("completion_tokens", uint64_t{0});
        out.prompt_tokens = u->value("prompt_tokens", uint64_t{0});
      }
      auto text_of = [&](const json& choice) {
        if (!shape.chat) return choice.value("text", std::string());
        auto d = choice.find("delta");
        return d != choice.end() && d->is_object() && d->contains("content") &&
                       (*d)["content"].is_string()
                   ? (*d)["content"].get<std::string>()
                   : std::string();
      };
      if (chunk.contains("choices") && chunk["choices"].is_array() && !chunk["choices"].empty() &&
          !text_of(chunk["choices"][0]).empty()) {
        const auto now = Clock::now();
        if (!last)
          out.ttft_ms = std::chrono::duration<double, std::milli>(now - start).count();
        else
          out.itl_ms.push_back(std::chrono::duration<double, std::milli>(now - *last).count());
        last = now;
        ++text_chunks;
      }
      return true;
    });
  } catch (const std::exception& e) {
    out.error = e.what();
  }
  if (out.completion_tokens == 0) out.completion_tokens = text_chunks;  // no usage chunk
  out.ok = out.error.empty() && done && last.has_value();
  if (!out.ok && out.error.empty()) out.error = "the stream ended without [DONE] or text";
  return out;
}

struct RunStats {
  double gen_tok_s = 0, seconds = 0, ttft_p50 = 0, ttft_p99 = 0, itl_p50 = 0, itl_p99 = 0;
  double prompt_tokens_mean = 0;
  int ok = 0, failed = 0;
  std::string first_error;
  json to_json() const {
    return {{"gen_tok_s", gen_tok_s},
            {"seconds", seconds},
            {"ttft_p50_ms", ttft_p50},
            {"ttft_p99_ms", ttft_p99},
            {"itl_p50_ms", itl_p50},
            {"itl_p99_ms", itl_p99},
            {"ok", ok},
            {"failed", failed},
            {"prompt_tokens_mean", prompt_tokens_mean}};
  }
};

// One closed-loop run: `concurrency` clients, `requests` requests in all.
RunStats run_load(const cli::ServerClient& client, const std::string& model,
                  const HttpLoadOptions& o, const RequestShape& shape, int run, int concurrency,
                  int requests) {
  std::vector<RequestResult> results(requests);
  std::atomic<int> next{0};
  const auto start = Clock::now();
  std::vector<std::thread> threads;
  for (int c = 0; c < concurrency; ++c)
    threads.emplace_back([&] {
      for (int i; (i = next.fetch_add(1)) < requests;)
        results[i] = one_request(client, model, prompt_text(o, run, i), o.max_tokens, shape, i);
    });
  for (auto& t : threads) t.join();
  RunStats s;
  s.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  std::vector<double> ttft, itl;
  uint64_t tokens = 0, prompt_tokens = 0;
  for (const RequestResult& r : results) {
    if (!r.ok) {
      ++s.failed;
      if (s.first_error.empty()) s.first_error = r.error;
      continue;
    }
    ++s.ok;
    tokens += r.completion_tokens;
    prompt_tokens += r.prompt_tokens;
    ttft.push_back(r.ttft_ms);
    itl.insert(itl.end(), r.itl_ms.begin(), r.itl_ms.end());
  }
  s.gen_tok_s = double(tokens) / s.seconds;
  s.prompt_tokens_mean = s.ok ? double(prompt_tokens) / s.ok : 0;
  s.ttft_p50 = percentile(ttft, 50);
  s.ttft_p99 = percentile(ttft, 99);
  s.itl_p50 = percentile(itl, 50);
  s.itl_p99 = percentile(itl, 99);
  return s;
}

// Medians over rounds, field by field.
RunStats median_of(const std::vector<RunStats>& runs) {
  auto med = [&](double RunStats::*f) {
    std::vector<double> v;
    for (const auto& r : runs) v.push_back(r.*f);
    return percentile(v, 50);
  };
  RunStats m;
  m.gen_tok_s = med(&RunStats::gen_tok_s);
  m.seconds = med(&RunStats::seconds);
  m.ttft_p50 = med(&RunStats::ttft_p50);
  m.ttft_p99 = med(&RunStats::ttft_p99);
  m.itl_p50 = med(&RunStats::itl_p50);
  m.itl_p99 = med(&RunStats::itl_p99);
  m.prompt_tokens_mean = med(&RunStats::prompt_tokens_mean);
  for (const auto& r : runs) {
    m.ok += r.ok;
    m.failed += r.failed;
    if (m.first_error.empty()) m.first_error = r.first_error;
  }
  return m;
}

// The served model's name; waits up to 2 minutes for a server still loading (503).
std::string served_model(const cli::ServerClient& client) {
  for (int attempt = 0;; ++attempt) {
    try {
      return client.get("/v1/models").at("data").at(0).at("id").get<std::string>();
    } catch (const cli::ServerError& e) {
      if (e.status() != 503 || attempt >= 1200)
        fail("serving: {}/v1/models does not name a model: {}", client.url(), e.what());
    } catch (const std::exception& e) {
      fail("serving: {}/v1/models does not name a model: {}", client.url(), e.what());
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

void print_run(const char* name, const RunStats& s) {
  fmt::print(
      "    {:<8} {:8.1f} gen tok/s  TTFT p50 {:8.0f} ms p99 {:8.0f} ms  ITL p50 {:6.1f} ms p99 "
      "{:7.1f} ms  {} ok, {} failed{}\n",
      name, s.gen_tok_s, s.ttft_p50, s.ttft_p99, s.itl_p50, s.itl_p99, s.ok, s.failed,
      s.first_error.empty() ? "" : " (" + s.first_error.substr(0, 160) + ")");
}

}  // namespace

json run_http_load_bench(const HttpLoadOptions& o) {
  if (o.url.empty() && o.model.empty())
    fail("serving: give the server under test (--url URL) or a model to serve (-m MODEL)");
  if (o.concurrency.empty() || o.max_tokens < 1 || o.rounds < 1 || o.prompt_words < 1)
    fail("serving: --concurrency, --max-tokens, --rounds and --prompt-words must be positive");
  if (!o.url.empty() && o.kv_dtype != "auto")
    fail("serving: --kv-dtype sets the server started with -m; a --url server keeps its own");
  std::unique_ptr<ChildServer> started;
  std::string url = o.url;
  if (url.empty()) {
    std::vector<std::string> args = {
        "-m",         o.model,          "--device", o.device,          "--kv-memory",
        o.kv_memory,  "--log-interval", "0",        "--max-instances", "4096",
        "--kv-dtype", o.kv_dtype};
    if (o.threads) args.insert(args.end(), {"-t", std::to_string(o.threads)});
    started = std::make_unique<ChildServer>("serving", args);
    url = started->url();
  }
  struct Server {
    std::string name;
    std::unique_ptr<cli::ServerClient> client;
    std::string model;
  };
  std::vector<Server> servers;
  servers.push_back({"pith", std::make_unique<cli::ServerClient>(url, o.api_key), ""});
  if (!o.against.empty())
    servers.push_back({"against", std::make_unique<cli::ServerClient>(o.against, o.api_key), ""});
  for (auto& s : servers) s.model = served_model(*s.client);

  const RequestShape shape = request_shape(o);
  fmt::print(
      "serving: {} {}requests per run of {} distinct words{} + {} generated tokens "
      "(ignore_eos, {}{}{}), {} round(s) alternating order\n",
      o.requests ? fmt::format("{}", o.requests) : "2 x concurrency", shape.chat ? "chat " : "",
      o.prompt_words,
      o.shared_prefix_words ? fmt::format(" after a {}-word shared prefix", o.shared_prefix_words)
                            : "",
      o.max_tokens,
      o.temperature > 0 ? fmt::format("temperature {}", o.temperature) : std::string("greedy"),
      o.response_format.empty() ? "" : ", response_format " + o.response_format,
      o.presence_penalty != 0 || o.frequency_penalty != 0 || o.repetition_penalty != 1
          ? fmt::format(", presence_penalty {} frequency_penalty {} repetition_penalty {}",
                        o.presence_penalty, o.frequency_penalty, o.repetition_penalty)
          : "",
      o.rounds);
  for (const auto& s : servers)
    fmt::print("  {:<8} {} (model {})\n", s.name, s.client->url(), s.model);

  // Warm both (native builds, first pages, caches of the prompt format) outside the timing.
  for (auto& s : servers) {
    RequestResult w = one_request(*s.client, s.model, "warm up", 4, shape, 0);
    if (!w.ok) fail("serving: warm-up request to {} failed: {}", s.client->url(), w.error);
  }

  json out;
  out["suite"] = "serving";
  out["prompt_words"] = o.prompt_words;
  out["shared_prefix_words"] = o.shared_prefix_words;
  out["max_tokens"] = o.max_tokens;
  out["rounds"] = o.rounds;
  out["chat"] = shape.chat;
  out["response_format"] = o.response_format;
  out["temperature"] = o.temperature;
  out["presence_penalty"] = o.presence_penalty;
  out["frequency_penalty"] = o.frequency_penalty;
  out["repetition_penalty"] = o.repetition_penalty;
  out["servers"] = json::object();
  for (const auto& s : servers)
    out["servers"][s.name] = {{"url", s.client->url()}, {"model", s.model}};
  out["results"] = json::array();
  bool any_failed = false;
  int run = 0;
  for (int c : o.concurrency) {
    const int requests = o.requests ? o.requests : 2 * c;
    std::vector<std::vector<RunStats>> runs(servers.size());
    for (int r = 0; r < o.rounds; ++r, ++run)
      for (size_t k = 0; k < servers.size(); ++k) {
        const size_t i = r % 2 == 0 ? k : servers.size() - 1 - k;  // AB, BA, ...
        runs[i].push_back(
            run_load(*servers[i].client, servers[i].model, o, shape, run, c, requests));
      }
    fmt::print("  concurrency {} ({} requests per run):\n", c, requests);
    json row = {{"concurrency", c}, {"requests", requests}};
    std::vector<RunStats> med;
    for (size_t i = 0; i < servers.size(); ++i) {
      med.push_back(median_of(runs[i]));
      print_run(servers[i].name.c_str(), med.back());
      row[servers[i].name] = med.back().to_json();
      any_failed = any_failed || med.back().failed > 0;
    }
    if (med.size() == 2) {
      auto ratio = [](double a, double b) { return b > 0 ? a / b : 0.0; };
      json ratios = {{"gen_tok_s", ratio(med[0].gen_tok_s, med[1].gen_tok_s)},
                     {"ttft_p50", ratio(med[0].ttft_p50, med[1].ttft_p50)},
                     {"ttft_p99", ratio(med[0].ttft_p99, med[1].ttft_p99)},
                     {"itl_p50", ratio(med[0].itl_p50, med[1].itl_p50)}};
      fmt::print("    pith / against: gen tok/s {:.2f}x, TTFT p50 {:.2f}x, ITL p50 {:.2f}x\n",
                 ratios["gen_tok_s"].get<double>(), ratios["ttft_p50"].get<double>(),
                 ratios["itl_p50"].get<double>());
      row["ratio"] = ratios;
    }
    out["results"].push_back(row);
  }
  out["failed_requests"] = any_failed;
  return out;
}

}  // namespace pith::bench
