#include "bench/bench_techniques.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <mutex>
#include <thread>

#include "bench/bench_stack.h"
#include "bench/inferlet_files.h"
#include "common/error.h"
#include "stack/serving_stack.h"

namespace pith::bench {

namespace {

using Clock = std::chrono::steady_clock;
using Args = std::vector<std::string>;

// One row of the figure: the inferlet, the arguments of instance i generating about n tokens,
// and what runs once before the timed instances (an export, a module cache), if anything.
struct Workload {
  std::string name, technique, inferlet;
  std::function<Args(int i, int n)> args;
  std::function<Args()> setup = nullptr;
  bool on_request = false;  // runs only when named (not one of the paper's eleven)
};

// Distinct prompts per instance, so the prefix cache cannot turn a workload into a lookup.
std::string prompt(int i) {
  static const char* kTopics[] = {
      "the harbour at dawn", "a chess opening",     "learning the piano", "the river in winter",
      "a museum on Monday",  "an old stone bridge", "bread and patience", "the northern lights"};
  return fmt::format("Request {}: write a few careful sentences about {}.", i, kTopics[i % 8]);
}

std::string num(int n) {
  return std::to_string(std::max(n, 1));
}

const char* kSystem =
    "You are a helpful assistant for a small town's visitor office. You answer briefly, you "
    "name opening hours exactly, and you never invent a place that is not on the list.";

std::vector<Workload> workloads() {
  std::vector<Workload> w;
  w.push_back({"text_completion", "Text completion", "text_completion", [](int i, int n) {
                 return Args{"--prompt", prompt(i), "--max-tokens", num(n)};
               }});
  w.push_back(
      {"prefix_tree", "Prefix tree (a shared exported prefix)", "prefix_caching",
       [](int i, int n) {
         return Args{"--mode",   "import",        "--name",       "bench-techniques",
                     "--suffix", " " + prompt(i), "--max-tokens", num(n)};
       },
       [] { return Args{"--mode", "export", "--name", "bench-techniques", "--prefix", kSystem}; }});
  w.push_back({"tree_of_thought", "ToT", "tree_of_thought", [](int i, int n) {
                 return Args{"--prompt",         prompt(i),  "--breadth",       "2",
                             "--expand",         "2",        "--depth",         "2",
                             "--thought-tokens", num(n / 2), "--answer-tokens", num(n / 2)};
               }});
  w.push_back({"recursion_of_thought", "RoT", "recursion_of_thought", [](int i, int n) {
                 return Args{"--prompt",        prompt(i), "--split",           "2",
                             "--depth",         "2",       "--question-tokens", num(n / 4),
                             "--answer-tokens", num(n / 2)};
               }});
  w.push_back({"graph_of_thought", "GoT", "graph_of_thought", [](int i, int n) {
                 return Args{"--prompt",   prompt(i), "--rounds",         "2",
                             "--thoughts", "3",       "--merge",          "2",
                             "--refine",   "1",       "--thought-tokens", num(n / 2)};
               }});
  w.push_back({"skeleton_of_thought", "SkoT", "skeleton_of_thought", [](int i, int n) {
                 return Args{"--prompt",       prompt(i),  "--points",        "3",
                             "--point-tokens", num(n / 4), "--expand-tokens", num(n / 2)};
               }});
  w.push_back(
      {"modular_cache", "Cache (modular prompt cache)", "modular_caching",
       [](int i, int n) {
         return Args{"--cache",      "bench-techniques",
                     "--use",        i % 2 ? "doc_a,doc_b" : "doc_b",
                     "--question",   fmt::format("\nQuestion {}: when does it open?\nAnswer:", i),
                     "--max-tokens", num(n)};
       },
       [] {
         return Args{"--prefill",
                     "--cache",
                     "bench-techniques",
                     "--module",
                     std::string("prelude=") + kSystem,
                     "--module",
                     "doc_a=The harbour opens at dawn; ferries leave every hour until dusk.",
                     "--module",
                     "doc_b=The museum closes on Mondays; students pay half price."};
       }});
  w.push_back(
      {"ebnf", "EBNF (JSON grammar)", "constrained_decoding", [](int i, int n) {
         return Args{
             "--grammar",       "json-object",   "--prompt", prompt(i) + " As JSON:", "--seed",
             std::to_string(i), "--temperature", "1.0",      "--max-tokens",          num(n)};
       }});
  // The same steps with the grammar's mask sent down and the 256 best allowed tokens back,
  // beside the row above, which brings the whole vocabulary up every step.
  w.push_back({"ebnf_masked", "EBNF, masked top-256 on the server", "constrained_decoding",
               [](int i, int n) {
                 return Args{"--grammar",     "json-object",
                             "--prompt",      prompt(i) + " As JSON:",
                             "--seed",        std::to_string(i),
                             "--temperature", "1.0",
                             "--max-tokens",  num(n),
                             "--top-k",       "256"};
               },
               nullptr, true});
  w.push_back({"speculative_decoding", "Spec. decoding (n-gram drafts)", "speculative_decoding",
               [](int i, int n) {
                 return Args{"--prompt",     prompt(i) + " " + prompt(i),
                             "--max-tokens", num(n),
                             "--ngram",      "3",
                             "--draft",      "4"};
               }});
  w.push_back({"beam_search", "Beam search (4 beams)", "beam_search", [](int i, int n) {
                 return Args{"--prompt",     prompt(i),  "--beams", "4",
                             "--max-tokens", num(n / 2), "--no-eos"};
               }});
  w.push_back(
      {"attention_sink", "Attention sink (4 + 8 slots)", "attention_sink", [](int i, int n) {
         return Args{"--prompt", prompt(i), "--sink", "4", "--window", "8", "--max-tokens", num(n)};
       }});
  return w;
}

struct RowResult {
  double seconds = 0, p50_ms = 0, p99_ms = 0, mean_batch = 0;
  double forward_tokens = 0;  // per request
  std::string backend;        // what ran it (BackendInfo: name and device)
};

// One timed run of `wl` on a fresh stack: setup, a warm instance (native build), then
// `instances` concurrent instances; each one's latency from its launch to its exit.
RowResult run_row(const TechniquesBenchOptions& o, const std::string& device, const Workload& wl) {
  ServingStack stack(bench_serving_options(o.model, device, o.threads, o.cache_dir));
  const std::string dir = o.inferlet_dir.empty() ? PITH_BUILD_INFERLET_DIR : o.inferlet_dir;
  auto program = stack.runtime().load_program_file(find_inferlet(dir, wl.inferlet));
  // Launches one instance; `log` receives its first warning or error (the cause, where a later
  // line only says it ended), for the failure message.
  auto launch = [&](Args args, std::shared_ptr<std::string> log) {
    args.insert(args.begin(), wl.inferlet);
    return stack.launch(program, std::move(args), [log](uint64_t, const runtime::InstanceEvent& e) {
      if (e.kind == runtime::InstanceEvent::Kind::Log && e.level >= 2 && log->empty())
        *log = e.text;
    });
  };
  auto ended_badly = [](const runtime::ExitStatus& st, const std::string& log) {
    if (st.kind == runtime::ExitStatus::Kind::Exited && st.code == 0) return std::string();
    return fmt::format("'{}'{}", st.reason, log.empty() ? "" : ": " + log);
  };
  auto run_to_end = [&](Args args) {
    auto log = std::make_shared<std::string>();
    const std::string bad = ended_badly(launch(std::move(args), log)->wait(), *log);
    if (!bad.empty()) fail("techniques bench: {} ended with {}", wl.name, bad);
  };
  // Timed instances run native code: wait for the build (a fresh binary or cache compiles it in
  // the background, and launches before it is done would run on the interpreter).
  if (program->policy() != runtime::TierPolicy::InterpreterOnly) program->native();
  if (wl.setup) run_to_end(wl.setup());
  run_to_end(wl.args(o.instances, 2));  // warm: caches touched

  std::atomic<uint64_t> calls{0}, batches{0}, tokens{0};
  stack.controller().set_batch_observer([&](const BatchStats& s) {
    if (s.type != CallType::Forward) return;
    calls += s.calls;
    tokens += s.tokens;
    ++batches;
  });
  std::vector<double> latency(static_cast<size_t>(o.instances));
  std::vector<std::thread> waiters;
  std::mutex failure_mu;
  std::string failure;
  const auto t0 = Clock::now();
  for (int i = 0; i < o.instances; ++i) {
    const auto launched = Clock::now();
    auto log = std::make_shared<std::string>();
    auto inst = launch(wl.args(i, o.max_tokens), log);
    waiters.emplace_back([&, inst, log, launched, i] {
      const runtime::ExitStatus st = inst->wait();
      latency[static_cast<size_t>(i)] =
          std::chrono::duration<double, std::milli>(Clock::now() - launched).count();
      if (std::string bad = ended_badly(st, *log); !bad.empty()) {
        std::lock_guard lock(failure_mu);
        failure = std::move(bad);
      }
    });
  }
  for (auto& t : waiters) t.join();
  RowResult r;
  r.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  const BackendInfo info = stack.backend().info();
  r.backend = info.name + ": " + info.device;
  stack.controller().set_batch_observer({});
  if (!failure.empty()) fail("techniques bench: an instance of {} ended with {}", wl.name, failure);
  std::sort(latency.begin(), latency.end());
  r.p50_ms = latency[latency.size() / 2];
  r.p99_ms = latency[std::min(latency.size() - 1, latency.size() * 99 / 100)];
  r.mean_batch = batches ? double(calls) / double(batches) : 0;
  r.forward_tokens = double(tokens) / o.instances;
  return r;
}

RowResult median_row(const TechniquesBenchOptions& o, const std::string& device,
                     const Workload& wl) {
  std::vector<RowResult> runs;
  for (int r = 0; r < o.runs; ++r) runs.push_back(run_row(o, device, wl));
  std::sort(runs.begin(), runs.end(),
            [](const RowResult& a, const RowResult& b) { return a.seconds < b.seconds; });
  return runs[runs.size() / 2];
}

nlohmann::json row_json(const RowResult& r, int instances) {
  return {{"req_per_s", instances / r.seconds},
          {"seconds", r.seconds},
          {"latency_p50_ms", r.p50_ms},
          {"latency_p99_ms", r.p99_ms},
          {"forward_tokens_per_request", r.forward_tokens},
          {"mean_batch", r.mean_batch},
          {"backend", r.backend}};
}

}  // namespace

std::vector<std::string> technique_workload_names() {
  std::vector<std::string> names;
  for (const Workload& w : workloads()) names.push_back(w.name);
  return names;
}

nlohmann::json run_techniques_bench(const TechniquesBenchOptions& o) {
  if (o.model.empty()) fail("pith bench techniques needs -m MODEL");
  if (o.instances < 1 || o.max_tokens < 2 || o.runs < 1)
    fail("pith bench techniques: --instances >= 1, --max-tokens >= 2 and --runs >= 1");
  std::vector<Workload> chosen;
  for (const Workload& w : workloads())
    if ((o.workloads.empty() && !w.on_request) ||
        std::find(o.workloads.begin(), o.workloads.end(), w.name) != o.workloads.end())
      chosen.push_back(w);
  for (const std::string& name : o.workloads) {
    const auto all = technique_workload_names();
    if (std::find(all.begin(), all.end(), name) == all.end())
      fail("pith bench techniques: no workload '{}' (one of: {})", name, fmt::join(all, ", "));
  }
  // The baseline row runs whatever was chosen.
  if (std::none_of(chosen.begin(), chosen.end(),
                   [](const Workload& w) { return w.name == "text_completion"; }))
    chosen.insert(chosen.begin(), workloads().front());

  const bool against = !o.against_device.empty();
  fmt::print(
      "techniques: {} concurrent instances per workload, ~{} tokens each, model {}, "
      "device {}{}, {} run(s)\n",
      o.instances, o.max_tokens, o.model, o.device,
      against ? fmt::format(" (beside {})", o.against_device) : "", o.runs);
  fmt::print("{:<22} {:>9} {:>9} {:>11} {:>11} {:>12} {:>8}{}\n", "workload", "req/s", "x text",
             "p50 ms", "p99 ms", "fwd tok/req", "batch", against ? "   req/s there   ratio" : "");
  nlohmann::json rows = nlohmann::json::array();
  double text_rps = 0;
  for (const Workload& wl : chosen) {
    // Interleaved: this workload on the device, then on the other backend. A workload the model
    // cannot run (e.g. modular caching on a hybrid model, refused with a reason) is reported as
    // such and the others go on; the baseline must run.
    RowResult r;
    try {
      r = median_row(o, o.device, wl);
    } catch (const Error& e) {
      if (wl.name == "text_completion") throw;
      fmt::print("{:<22} failed: {}\n", wl.name, e.what());
      rows.push_back({{"workload", wl.name},
                      {"technique", wl.technique},
                      {"inferlet", wl.inferlet},
                      {"error", e.what()}});
      continue;
    }
    const double rps = o.instances / r.seconds;
    if (wl.name == "text_completion") text_rps = rps;
    nlohmann::json row = row_json(r, o.instances);
    row["workload"] = wl.name;
    row["technique"] = wl.technique;
    row["inferlet"] = wl.inferlet;
    row["vs_text_completion"] = rps / text_rps;
    std::string there;
    if (against) {
      const RowResult b = median_row(o, o.against_device, wl);
      const double brps = o.instances / b.seconds;
      row["against"] = row_json(b, o.instances);
      row["ratio_vs_against"] = rps / brps;
      there = fmt::format(" {:>13.2f} {:>7.2f}x", brps, rps / brps);
    }
    fmt::print("{:<22} {:>9.2f} {:>8.2f}x {:>11.1f} {:>11.1f} {:>12.1f} {:>8.1f}{}\n", wl.name, rps,
               rps / text_rps, r.p50_ms, r.p99_ms, r.forward_tokens, r.mean_batch, there);
    rows.push_back(std::move(row));
  }
  nlohmann::json out;
  out["suite"] = "techniques";
  out["model"] = o.model;
  out["device"] = o.device;
  if (against) out["against_device"] = o.against_device;
  out["instances"] = o.instances;
  out["max_tokens"] = o.max_tokens;
  out["runs"] = o.runs;
  out["baseline"] = "text_completion";
  out["workloads"] = std::move(rows);
  return out;
}

}  // namespace pith::bench
