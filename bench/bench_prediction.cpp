#include "bench/bench_prediction.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <vector>

#include "bench/child_server.h"
#include "cli/server_client.h"
#include "common/error.h"

namespace pith::bench {

namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

// The kinds of prediction, as a caller editing a document would send them.
enum class Kind { Exact, Edited, Unrelated };
constexpr Kind kKinds[] = {Kind::Exact, Kind::Edited, Kind::Unrelated};

const char* kind_name(Kind k) {
  return k == Kind::Exact ? "exact" : k == Kind::Edited ? "edited" : "unrelated";
}

// Two edits, as a rewrite makes them: a piece a third of the way in replaced, a phrase inserted
// two thirds in (at character boundaries: UTF-8 continuation bytes are skipped).
std::string edited(const std::string& text) {
  auto boundary = [&](size_t at) {
    while (at < text.size() && (static_cast<unsigned char>(text[at]) & 0xC0) == 0x80) ++at;
    return std::min(at, text.size());
  };
  const size_t a = boundary(text.size() / 3), a_end = boundary(a + 6),
               b = boundary(2 * text.size() / 3);
  return text.substr(0, a) + " (edited) " + text.substr(a_end, b - a_end) +
         " and one more sentence here. " + text.substr(b);
}

// A text that shares nothing with the model's output but its alphabet, as long as `like`.
std::string unrelated(const std::string& like) {
  static const std::string kText =
      "Spring arrived late that year; the river stayed high, the orchards bloomed in May, and "
      "the market opened a week after the usual date. ";
  std::string out;
  while (out.size() < like.size()) out += kText;
  return out.substr(0, std::max<size_t>(like.size(), 1));
}

struct Sample {
  double seconds = 0;
  int tokens = 0, accepted = 0, rejected = 0;
};

struct Tally {
  std::vector<double> plain, predicted;  // per run: seconds over every prompt
  long tokens = 0, accepted = 0, rejected = 0;
  int identical = 0, compared = 0;  // predicted outputs equal to the reference
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

json run_prediction_bench(const PredictionBenchOptions& o) {
  if (o.model.empty()) fail("pith bench prediction needs -m MODEL");
  if (o.prompts < 1 || o.max_tokens < 2 || o.runs < 1)
    fail("pith bench prediction: --prompts >= 1, --max-tokens >= 2 and --runs >= 1");
  ChildServer server("prediction bench",
                     {"-m", o.model, "--device", o.device, "-t", std::to_string(o.threads)});
  cli::ServerClient client(server.url(), "");
  const std::string model = client.get("/v1/models").at("data").at(0).at("id");

  auto request = [&](int prompt, const std::string* prediction) {
    json body = {
        {"model", model},
        {"messages",
         {{{"role", "user"},
           {"content", fmt::format("Rewrite document {} with the requested changes.", prompt)}}}},
        {"max_tokens", o.max_tokens},
        {"temperature", 0},
        {"ignore_eos", true}};
    if (prediction) body["prediction"] = {{"type", "content"}, {"content", *prediction}};
    if (o.ascii_only) {  // the byte vocabulary's bytes 0x80-0xFF (random picks are not UTF-8)
      json bias = json::object();  // and NUL (a prediction may not hold it)
      bias["0"] = -100;
      for (int t = 128; t < 256; ++t) bias[std::to_string(t)] = -100;
      body["logit_bias"] = bias;
    }
    const auto start = Clock::now();
    json r = client.post("/v1/chat/completions", body);
    Sample s;
    s.seconds = std::chrono::duration<double>(Clock::now() - start).count();
    s.tokens = r.at("usage").at("completion_tokens");
    if (prediction) {
      const json& d = r.at("usage").at("completion_tokens_details");
      s.accepted = d.at("accepted_prediction_tokens");
      s.rejected = d.at("rejected_prediction_tokens");
    }
    return std::make_pair(r.at("choices").at(0).at("message").at("content").get<std::string>(), s);
  };

  std::vector<std::string> reference;
  // The second request of a prompt is the reference: from then on its prompt comes from the
  // prefix cache, as for every timed request (a cached prefix computes the rest in another
  // grouping, which with 16-bit weights can move a near-tie).
  for (int p = 0; p < o.prompts; ++p) {
    (void)request(p, nullptr);
    reference.push_back(request(p, nullptr).first);
  }
  fmt::print("prediction: {} prompts x {} greedy tokens, model {}, device {}, {} run(s)\n",
             o.prompts, o.max_tokens, o.model, o.device, o.runs);
  fmt::print("{:<10} {:>12} {:>14} {:>8} {:>10} {:>14} {:>9}\n", "prediction", "plain tok/s",
             "predicted tok/s", "speedup", "accepted", "rejected/tok", "identical");

  json out = {{"suite", "prediction"},      {"model", o.model},           {"device", o.device},
              {"prompts", o.prompts},       {"max_tokens", o.max_tokens}, {"runs", o.runs},
              {"ascii_only", o.ascii_only}, {"kinds", json::array()}};
  for (Kind kind : kKinds) {
    Tally t;
    for (int run = 0; run < o.runs; ++run) {
      double plain = 0, predicted = 0;
      for (int p = 0; p < o.prompts; ++p) {
        const std::string prediction = kind == Kind::Exact    ? reference[p]
                                       : kind == Kind::Edited ? edited(reference[p])
                                                              : unrelated(reference[p]);
        // Alternated, so a slow spell of the machine hits both alike.
        auto [plain_text, a] = request(p, nullptr);
        auto [predicted_text, b] = request(p, &prediction);
        // Plain requests repeat the reference exactly (the engine is deterministic); a verified
        // draft's positions run as one multi-token forward, whose attention sums in another
        // order, so a near-tie may break the other way (docs/server-api.md).
        if (plain_text != reference[p])
          fail("prediction bench: prompt {}: the plain greedy output changed between runs", p);
        t.identical += predicted_text == reference[p];
        ++t.compared;
        plain += a.seconds;
        predicted += b.seconds;
        t.tokens += b.tokens;
        t.accepted += b.accepted;
        t.rejected += b.rejected;
      }
      t.plain.push_back(plain);
      t.predicted.push_back(predicted);
    }
    const double tokens_per_run = double(o.prompts) * o.max_tokens;
    const double plain_tps = tokens_per_run / median(t.plain);
    const double predicted_tps = tokens_per_run / median(t.predicted);
    const double accepted = double(t.accepted) / double(t.tokens);
    const double rejected = double(t.rejected) / double(t.tokens);
    fmt::print("{:<10} {:>12.1f} {:>14.1f} {:>7.2f}x {:>9.1f}% {:>14.2f} {:>6}/{}\n",
               kind_name(kind), plain_tps, predicted_tps, predicted_tps / plain_tps, 100 * accepted,
               rejected, t.identical, t.compared);
    out["kinds"].push_back({{"prediction", kind_name(kind)},
                            {"plain_tokens_per_s", plain_tps},
                            {"predicted_tokens_per_s", predicted_tps},
                            {"speedup", predicted_tps / plain_tps},
                            {"accepted_fraction", accepted},
                            {"rejected_per_token", rejected},
                            {"identical_outputs", t.identical},
                            {"outputs", t.compared}});
  }
  out["speedup_exact"] = out["kinds"][0]["speedup"];
  return out;
}

}  // namespace pith::bench
