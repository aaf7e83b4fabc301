// pith bench SUITE: performance suites (implementations in bench/). Each prints a readable
// report; with --json the last line of stdout is one JSON object with the numbers.
#include <fmt/format.h>

#include <memory>
#include <string>
#include <vector>

#include "bench/bench_agents.h"
#include "bench/bench_batching.h"
#include "bench/bench_contention.h"
#include "bench/bench_delta_rule.h"
#include "bench/bench_embeddings.h"
#include "bench/bench_grammar.h"
#include "bench/bench_http_load.h"
#include "bench/bench_lora.h"
#include "bench/bench_matmul.h"
#include "bench/bench_model.h"
#include "bench/bench_overhead.h"
#include "bench/bench_paper.h"
#include "bench/bench_prediction.h"
#include "bench/bench_runtime.h"
#include "bench/bench_serving.h"
#include "bench/bench_soak.h"
#include "bench/bench_techniques.h"
#include "bench/bench_tokenizer.h"
#include "cli/commands.h"
#include "common/error.h"

namespace pith::cli {

namespace {

std::vector<DType> parse_dtypes(const std::vector<std::string>& names) {
  std::vector<DType> out;
  for (const auto& n : names) {
    auto d = dtype_from_name(n);
    if (!d)
      fail(
          "unknown dtype '{}' (expected f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q4_k, q5_k "
          "or q6_k)",
          n);
    out.push_back(*d);
  }
  return out;
}

KernelIsa parse_isa(const std::string& name) {
  if (name.empty()) return best_isa();
  auto isa = isa_from_name(name);
  if (!isa) fail("unknown kernel isa '{}' (expected scalar, avx2 or avx512)", name);
  if (!isa_supported(*isa)) fail("kernel isa '{}' is not supported by this CPU", name);
  return *isa;
}

struct MatmulArgs {
  std::vector<std::string> dtypes{"f32", "f16", "bf16", "q8_0", "q4_0"};
  std::vector<size_t> tokens{1, 512};
  size_t threads = 2;
  int reps = 5;
  std::string isa;
  bool json = false;
};

void add_matmul_suite(CLI::App& bench) {
  auto args = std::make_shared<MatmulArgs>();
  auto* cmd =
      bench.add_subcommand("matmul", "matmul kernels on Llama 3.2 1B shapes (random weights)");
  cmd->add_option("--dtype", args->dtypes, "weight dtypes")->delimiter(',');
  cmd->add_option("--tokens", args->tokens, "token counts (1 = decode, 512 = prefill)")
      ->delimiter(',');
  cmd->add_option("-t,--threads", args->threads, "threads (including the caller)");
  cmd->add_option("--reps", args->reps, "timed runs per case (the median is reported)");
  cmd->add_option("--isa", args->isa, "force a kernel level: scalar, avx2, avx512");
  cmd->add_flag("--json", args->json, "print a JSON summary as the last line");
  cmd->callback([args] {
    bench::MatmulBenchOptions o;
    o.dtypes = parse_dtypes(args->dtypes);
    o.tokens = args->tokens;
    if (args->threads == 0) fail("--threads must be at least 1");
    if (args->reps < 1) fail("--reps must be at least 1");
    o.threads = args->threads;
    o.reps = args->reps;
    o.isa = parse_isa(args->isa);
    auto j = bench::run_matmul_bench(o);
    if (args->json) fmt::print("{}\n", j.dump());
  });
}

void add_delta_rule_suite(CLI::App& bench) {
  auto o = std::make_shared<bench::DeltaRuleBenchOptions>();
  auto isa = std::make_shared<std::string>();
  auto json = std::make_shared<bool>(false);
  auto* cmd = bench.add_subcommand(
      "delta-rule", "Gated DeltaNet delta rule: chunked vs recurrent form, one head, one thread");
  cmd->add_option("-n,--tokens", o->tokens, "tokens of the prefill")->capture_default_str();
  cmd->add_option("--k-dim", o->k_dim, "key head size")->capture_default_str();
  cmd->add_option("--v-dim", o->v_dim, "value head size")->capture_default_str();
  cmd->add_option("--reps", o->reps, "timed runs per form (the median is reported)")
      ->capture_default_str();
  cmd->add_option("--isa", *isa, "force a kernel level: scalar, avx2, avx512");
  cmd->add_flag("--json", *json, "print a JSON summary as the last line");
  cmd->callback([o, isa, json] {
    if (!isa->empty()) o->isa = parse_isa(*isa);
    auto j = bench::run_delta_rule_bench(*o);
    if (*json) fmt::print("{}\n", j.dump());
  });
}

void add_tokenizer_suite(CLI::App& bench) {
  auto o = std::make_shared<bench::TokenizerBenchOptions>();
  auto json = std::make_shared<bool>(false);
  auto* cmd = bench.add_subcommand("tokenizer", "tokenizer encode/decode throughput (MB/s)");
  cmd->add_option("-m,--model", o->model, "GGUF file, HF folder or tokenizer.json")->required();
  cmd->add_option("file", o->file, "text file (default: a generated mixed corpus)");
  cmd->add_option("--bytes", o->bytes, "size of the generated corpus in bytes");
  cmd->add_option("--reps", o->reps, "timed runs (the median is reported)");
  cmd->add_flag("--json", *json, "print a JSON summary as the last line");
  cmd->callback([o, json] {
    auto j = bench::run_tokenizer_bench(*o);
    if (*json) fmt::print("{}\n", j.dump());
  });
}

struct ModelArgs {
  bench::ModelBenchOptions o;
  size_t bandwidth_mib = 2048;
  std::vector<size_t> batch;
  std::string isa;
  std::string kv_dtype = "auto";
  std::string cuda_attention = "auto";
  bool json = false;
};

void add_model_suite(CLI::App& bench) {
  auto args = std::make_shared<ModelArgs>();
  auto* cmd = bench.add_subcommand("model", "Whole-model prefill / decode / batch-decode tokens/s");
  cmd->add_option("-m,--model", args->o.model_path, "GGUF file or Hugging Face folder")->required();
  cmd->add_option("-p,--n-prompt", args->o.n_prompt, "prompt tokens of the prefill test (0: skip)")
      ->capture_default_str();
  cmd->add_option("-n,--n-gen", args->o.n_gen, "tokens of the decode test (0: skip)")
      ->capture_default_str();
  cmd->add_option("-d,--depth", args->o.depth,
                  "tokens of context every test starts after (llama-bench's -d)")
      ->capture_default_str();
  cmd->add_option("-t,--threads", args->o.threads, "threads (including the caller)")
      ->capture_default_str();
  add_device_option(*cmd, args->o.device);
  add_kv_dtype_option(*cmd, args->kv_dtype);
  cmd->add_option("--batch", args->batch, "batch sizes for aggregate decode, e.g. 1,8,32")
      ->delimiter(',');
  cmd->add_flag("--profile", args->o.profile,
                "also print where a forward's time goes, per op: a decode step and a 512-token "
                "prefill chunk at batch 1 and 32 (CPU: timestamps between ops; CUDA: events "
                "between eager launches, no graphs)");
  cmd->add_option("--profile-context", args->o.profile_context,
                  "tokens already in every sequence's KV for --profile");
  cmd->add_option("--profile-cases", args->o.profile_cases,
                  "the --profile cases to run (decode_b1, decode_b32, prefill512_b1, "
                  "prefill512_b32; default: all), e.g. to bring one under ncu")
      ->delimiter(',');
  cmd->add_flag("!--no-weight-panels", args->o.cpu_weight_panels,
                "CPU: multiply Q8_0 / Q4_K / BF16 weights from their mapped rows instead "
                "of panels repacked at load (the kernels before the panels, for A/B runs)");
  cmd->add_option("--cuda-graphs", args->o.cuda_graphs,
                  "CUDA: replay decode steps as CUDA graphs (false: launch every kernel, the A/B "
                  "baseline)")
      ->capture_default_str();
  cmd->add_option("--cuda-gemv", args->o.cuda_gemv,
                  "CUDA: let decode-sized products run the own GEMV (and the gate/up projection "
                  "its fused activation) where each measured faster (false: cuBLASLt always, "
                  "the A/B baseline)")
      ->capture_default_str();
  add_cuda_attention_option(*cmd, args->cuda_attention);
  cmd->add_option("--batch-steps", args->o.batch_steps, "decode steps per batch run")
      ->capture_default_str();
  cmd->add_option("-r,--reps", args->o.reps, "timed runs per test (the median is reported)")
      ->capture_default_str();
  cmd->add_option("--bandwidth-mib", args->bandwidth_mib,
                  "buffer streamed by the read-bandwidth test")
      ->capture_default_str();
  cmd->add_option("--llama-bench", args->o.llama_bench,
                  "path of llama.cpp's llama-bench, run on the same file in the same run");
  cmd->add_option("--transformers", args->o.transformers,
                  "a Python with torch and transformers: the same tests through transformers' "
                  "generate on the same device in the same run (a Python user's baseline)");
  cmd->add_option("--transformers-model", args->o.transformers_model,
                  "the Hugging Face folder --transformers loads (default: -m, when a folder)");
  cmd->add_option("--isa", args->isa,
                  "CPU: cap the kernel level (scalar, avx2, avx512), e.g. to measure the AVX2 "
                  "path on an AVX-512 host");
  cmd->add_flag("--json", args->json, "print a JSON summary as the last line");
  cmd->callback([args] {
    if (!args->isa.empty()) set_isa_cap(parse_isa(args->isa));
    args->o.kv_dtype = parse_kv_dtype(args->kv_dtype);
    args->o.cuda_attention = parse_cuda_attention(args->cuda_attention);
    if (args->o.threads == 0) fail("--threads must be at least 1");
    if (args->o.reps < 1) fail("--reps must be at least 1");
    if (args->o.batch_steps == 0 && !args->batch.empty()) fail("--batch-steps must be at least 1");
    args->o.batch_sizes = args->batch;
    if (args->bandwidth_mib < 16) fail("--bandwidth-mib must be at least 16");
    args->o.bandwidth_bytes = args->bandwidth_mib << 20;
    auto j = bench::run_model_bench(args->o);
    j["kernel_isa"] = isa_name(best_isa());
    if (args->json) fmt::print("{}\n", j.dump());
  });
}

void add_runtime_suites(CLI::App& bench) {  // pith bench launch|calls (bench/bench_runtime.h)
  auto o = std::make_shared<bench::RuntimeBenchOptions>();
  auto json = std::make_shared<bool>(false);
  auto* launch = bench.add_subcommand("launch", "inferlet launch latency: warm, cold, concurrent");
  auto* calls = bench.add_subcommand("calls", "cost of a non-model host call from guest code");
  for (auto* cmd : {launch, calls}) {
    cmd->add_option("--inferlets", o->inferlet_dir, "folder with echo/big/calls.wasm");
    cmd->add_option("--cache-dir", o->cache_dir, "native code cache for warm runs");
    cmd->add_option("--reps", o->reps, "timed runs (medians are reported)");
    cmd->add_option("--threads", o->threads, "scheduler threads");
    cmd->add_flag("--json", *json, "print a JSON summary as the last line");
  }
  launch->add_option("--launches", o->launches, "sequential warm launches per run");
  launch->add_option("--instances", o->instances, "concurrent idle instances");
  launch->add_option("--cold-reps", o->cold_reps, "cold launches (each compiles from scratch)");
  calls->add_option("--calls", o->calls, "host calls per run");
  launch->callback([o, json] {
    auto j = bench::run_launch_bench(*o);
    if (*json) fmt::print("{}\n", j.dump());
  });
  calls->callback([o, json] {
    auto j = bench::run_calls_bench(*o);
    if (*json) fmt::print("{}\n", j.dump());
  });
}

}  // namespace

void add_batching_suite(CLI::App& bench) {  // pith bench batching (bench/bench_batching.h)
  auto o = std::make_shared<bench::BatchingBenchOptions>();
  auto policy = std::make_shared<std::string>("adaptive");
  auto json = std::make_shared<bool>(false);
  auto* cmd = bench.add_subcommand(
      "batching", "dispatch policies with N concurrent text-completion inferlets (paper Table 5)");
  cmd->add_option("-m,--model", o->model, "model file (GGUF or HF folder)")->required();
  cmd->add_option("--policy", *policy, "adaptive | eager | k[:K] | t[:MS] | all");
  cmd->add_option("--instances", o->instances, "concurrent inferlets");
  cmd->add_option("--prompt-tokens", o->prompt_tokens, "prompt length per inferlet");
  cmd->add_option("--max-tokens", o->max_tokens, "tokens generated per inferlet");
  cmd->add_option("--runs", o->runs, "runs per policy (the median is reported)");
  cmd->add_option("-t,--threads", o->threads, "engine threads");
  add_device_option(*cmd, o->device);
  cmd->add_option("--inferlets", o->inferlet_dir, "folder holding greedy_abi.wasm");
  cmd->add_option("--cache-dir", o->cache_dir, "native code cache");
  cmd->add_flag("--json", *json, "print a JSON summary as the last line");
  cmd->callback([o, policy, json] {
    if (*policy == "all")
      o->policies = {"adaptive", "k", "t"};
    else
      o->policies = {*policy};
    auto result = bench::run_batching_bench(*o);
    if (*json) fmt::print("{}\n", result.dump());
  });
}

void add_overhead_suite(CLI::App& bench) {  // pith bench overhead (bench/bench_overhead.h)
  auto o = std::make_shared<bench::OverheadBenchOptions>();
  auto json = std::make_shared<bool>(false);
  auto* cmd = bench.add_subcommand(
      "overhead", "cost of programmability: control/forward call overhead, inferlet vs fused TPOT");
  cmd->add_option("-m,--model", o->model, "model file (GGUF or HF folder)")->required();
  cmd->add_option("--instances", o->instances,
                  "concurrent inferlets for the forward-call overhead");
  cmd->add_option("--decode-tokens", o->decode_tokens, "tokens per TPOT measurement");
  cmd->add_option("--runs", o->runs, "runs (the median is reported)");
  cmd->add_option("-t,--threads", o->threads, "engine threads");
  add_device_option(*cmd, o->device);
  cmd->add_option("--inferlets", o->inferlet_dir,
                  "folder holding greedy_abi.wasm and overhead.wasm");
  cmd->add_option("--cache-dir", o->cache_dir, "native code cache");
  cmd->add_flag("--json", *json, "print a JSON summary as the last line");
  cmd->callback([o, json] {
    auto result = bench::run_overhead_bench(*o);
    if (*json) fmt::print("{}\n", result.dump());
  });
}

void add_techniques_suite(CLI::App& bench) {  // pith bench techniques (bench/bench_techniques.h)
  auto o = std::make_shared<bench::TechniquesBenchOptions>();
  auto json = std::make_shared<bool>(false);
  auto* cmd = bench.add_subcommand(
      "techniques", "the eleven technique workloads, N concurrent instances each (paper Fig. 8)");
  cmd->add_option("-m,--model", o->model, "model file (GGUF or HF folder)")->required();
  cmd->add_option("--workloads", o->workloads,
                  fmt::format("workloads to run (default all: {})",
                              fmt::join(bench::technique_workload_names(), ", ")))
      ->delimiter(',');
  cmd->add_option("--instances", o->instances, "concurrent instances per workload");
  cmd->add_option("--max-tokens", o->max_tokens, "tokens each instance generates (per branch)");
  cmd->add_option("--runs", o->runs, "runs per workload (the median is reported)");
  cmd->add_option("-t,--threads", o->threads, "engine threads");
  add_device_option(*cmd, o->device);
  cmd->add_option("--against-device", o->against_device,
                  "also run every workload on this backend, interleaved (e.g. cpu beside cuda)");
  cmd->add_option("--inferlets", o->inferlet_dir, "folder holding the technique inferlets");
  cmd->add_option("--cache-dir", o->cache_dir, "native code cache");
  cmd->add_flag("--json", *json, "print a JSON summary as the last line");
  cmd->callback([o, json] {
    auto result = bench::run_techniques_bench(*o);
    if (*json) fmt::print("{}\n", result.dump());
  });
}

void add_agents_suite(CLI::App& bench) {  // pith bench agents (bench/bench_agents.h)
  auto o = std::make_shared<bench::AgentsBenchOptions>();
  auto json = std::make_shared<bool>(false);
  auto* cmd = bench.add_subcommand("agents",
                                   "ReAct, CodeAct and Swarm agents: the loop in inferlets vs "
                                   "driven over the OpenAI API (Fig. 6)");
  cmd->add_option("-m,--model", o->model, "model file (GGUF or HF folder)")->required();
  cmd->add_option("--workloads", o->workloads,
                  "workloads to run (default all: react, codeact, swarm)")
      ->delimiter(',');
  cmd->add_option("--agents", o->agents, "concurrent tasks per workload (swarms for swarm)");
  cmd->add_option("--calls", o->calls, "ReAct tool calls / CodeAct turns per agent");
  cmd->add_option("--swarm-size", o->swarm_size, "workers in each swarm's pipeline");
  cmd->add_option("--step-tokens", o->step_tokens,
                  "tokens generated per step (before each call, per thought, per worker)");
  cmd->add_option("--tool-ms", o->tool_ms, "the ReAct tool's own latency");
  cmd->add_option("--runs", o->runs, "alternated runs (the median is reported)");
  cmd->add_option("-t,--threads", o->threads, "engine threads");
  add_device_option(*cmd, o->device);
  cmd->add_option("--inferlets", o->inferlet_dir, "folder holding the agent_*.wasm inferlets");
  cmd->add_option("--cache-dir", o->cache_dir, "native code cache");
  cmd->add_flag("--json", *json, "print a JSON summary as the last line");
  cmd->callback([o, json] {
    auto result = bench::run_agents_bench(*o);
    if (*json) fmt::print("{}\n", result.dump());
  });
}

void add_prediction_suite(CLI::App& bench) {  // pith bench prediction (bench/bench_prediction.h)
  auto o = std::make_shared<bench::PredictionBenchOptions>();
  auto json = std::make_shared<bool>(false);
  auto* cmd = bench.add_subcommand(
      "prediction",
      "OpenAI predicted outputs: greedy completions with and without a prediction, alternated");
  cmd->add_option("-m,--model", o->model, "model file (GGUF or HF folder)")->required();
  cmd->add_option("--prompts", o->prompts, "distinct prompts (each one's greedy text predicted)");
  cmd->add_option("--max-tokens", o->max_tokens, "tokens generated per request");
  cmd->add_option("--runs", o->runs, "alternated runs (the median is reported)");
  cmd->add_flag("--ascii-only", o->ascii_only,
                "logit_bias -100 on tokens 0 and 128-255 (a byte vocabulary's NUL and non-ASCII "
                "bytes)");
  cmd->add_option("-t,--threads", o->threads, "engine threads");
  add_device_option(*cmd, o->device);
  cmd->add_flag("--json", *json, "print a JSON summary as the last line");
  cmd->callback([o, json] {
    auto result = bench::run_prediction_bench(*o);
    if (*json) fmt::print("{}\n", result.dump());
  });
}

void add_embedding_suite(CLI::App& bench) {  // pith bench embeddings (bench/bench_embeddings.h)
  auto o = std::make_shared<bench::EmbeddingBenchOptions>();
  auto json = std::make_shared<bool>(false);
  auto* cmd = bench.add_subcommand(
      "embeddings",
      "/v1/embeddings: batched requests from concurrent clients vs one input per request, and "
      "with --against URL vs another server on the same inputs (throughput, vectors' cosine)");
  auto* url = cmd->add_option("--url", o->url, "the pith server to measure (instead of -m)");
  cmd->add_option("-m,--model", o->model, "start `pith serve` on this model and measure it")
      ->excludes(url);
  cmd->add_option("--against", o->against,
                  "another OpenAI-compatible server's URL (llama-server --embeddings, vLLM)");
  cmd->add_option("--api-key", o->api_key, "bearer key sent to both");
  cmd->add_option("--inputs", o->inputs, "inputs per run")->capture_default_str();
  cmd->add_option("--batch", o->batch, "inputs per request")->capture_default_str();
  cmd->add_option("--concurrency", o->concurrency, "requests at once")->capture_default_str();
  cmd->add_option("--words", o->words, "distinct words per input")->capture_default_str();
  cmd->add_option("--rounds", o->rounds, "runs of each kind, alternated; medians")
      ->capture_default_str();
  cmd->add_option("--seed", o->seed, "input words");
  cmd->add_option("-t,--threads", o->threads, "-m: engine threads (0: one per core)");
  cmd->add_option("--kv-memory", o->kv_memory, "-m: the KV pool");
  cmd->add_option("--pooling", o->pooling, "-m: pith serve --pooling (last, mean, cls)");
  add_device_option(*cmd, o->device);
  cmd->add_flag("--json", *json, "print a JSON summary as the last line");
  cmd->callback([o, json] {
    auto result = bench::run_embedding_bench(*o);
    if (*json) fmt::print("{}\n", result.dump());
  });
}

void add_paper_suite(CLI::App& bench) {  // pith bench paper (bench/bench_paper.h)
  auto o = std::make_shared<bench::PaperBenchOptions>();
  auto json = std::make_shared<bool>(false);
  auto* cmd = bench.add_subcommand(
      "paper", "the paper's Tables 4 and 5 and Fig. 8 in one run: JSON and SVG charts in --out");
  cmd->add_option("-m,--model", o->model, "model file (GGUF or HF folder)")->required();
  cmd->add_option("--out", o->out_dir, "folder for paper.json and the charts");
  cmd->add_option("--concurrency", o->concurrency,
                  "concurrent requests (0: 128 on a GPU, 16 on the CPU)");
  cmd->add_option("--tokens", o->tokens, "tokens generated per request");
  cmd->add_option("--runs", o->runs, "runs per measurement (the median is reported)");
  cmd->add_option("-t,--threads", o->threads, "engine threads");
  add_device_option(*cmd, o->device);
  cmd->add_option("--against-device", o->against_device,
                  "Fig. 8 also on this backend, interleaved (e.g. cpu beside cuda)");
  cmd->add_option("--inferlets", o->inferlet_dir, "folder holding the inferlets");
  cmd->add_option("--cache-dir", o->cache_dir, "native code cache");
  cmd->add_flag("--json", *json, "print a JSON summary as the last line");
  cmd->callback([o, json] {
    auto result = bench::run_paper_bench(*o);
    if (*json) fmt::print("{}\n", result.dump());
  });
}

void add_serving_suites(CLI::App& bench) {  // pith bench prefix-cache|chunked-prefill
  auto pc = std::make_shared<bench::PrefixCacheBenchOptions>();
  auto pc_json = std::make_shared<bool>(false);
  auto* p =
      bench.add_subcommand("prefix-cache", "radix prefix cache on vs off: shared system prompt");
  p->add_option("-m,--model", pc->model, "model file (GGUF or HF folder)")->required();
  p->add_option("--requests", pc->requests, "requests");
  p->add_option("--system-tokens", pc->system_tokens, "shared system prompt length");
  p->add_option("--question-tokens", pc->question_tokens, "distinct question length");
  p->add_option("--max-tokens", pc->max_tokens, "tokens generated per request");
  p->add_option("--concurrency", pc->concurrency, "requests in flight at a time");
  p->add_option("-t,--threads", pc->threads, "engine threads");
  add_device_option(*p, pc->device);
  p->add_flag("--json", *pc_json, "print a JSON summary as the last line");
  p->callback([pc, pc_json] {
    auto r = bench::run_prefix_cache_bench(*pc);
    if (*pc_json) fmt::print("{}\n", r.dump());
  });

  auto cp = std::make_shared<bench::ChunkedPrefillBenchOptions>();
  auto cp_json = std::make_shared<bool>(false);
  auto* c = bench.add_subcommand("chunked-prefill",
                                 "chunked prefill on vs off: a long prompt among short ones");
  c->add_option("-m,--model", cp->model, "model file (GGUF or HF folder)")->required();
  c->add_option("--long-tokens", cp->long_tokens, "long prompt length");
  c->add_option("--short-requests", cp->short_requests, "short requests arriving with it");
  c->add_option("--short-tokens", cp->short_tokens, "short prompt length");
  c->add_option("--decoders", cp->decoders, "requests already generating");
  c->add_option("--decode-tokens", cp->decode_tokens, "tokens each decoder generates");
  c->add_option("--max-batch-tokens", cp->budget, "token budget of the chunked configuration");
  c->add_option("-t,--threads", cp->threads, "engine threads");
  add_device_option(*c, cp->device);
  c->add_flag("--json", *cp_json, "print a JSON summary as the last line");
  c->callback([cp, cp_json] {
    auto r = bench::run_chunked_prefill_bench(*cp);
    if (*cp_json) fmt::print("{}\n", r.dump());
  });
}

void add_contention_suite(CLI::App& bench) {  // pith bench contention (bench/bench_contention.h)
  auto o = std::make_shared<bench::ContentionBenchOptions>();
  auto json = std::make_shared<bool>(false);
  auto* c = bench.add_subcommand(
      "contention",
      "KV-memory oversubscription: suspend (swap, recompute) vs kill vs an unpressured pool");
  c->add_option("-m,--model", o->model, "model file (GGUF or HF folder)")->required();
  c->add_option("--requests", o->requests, "completions started at once");
  c->add_option("--prompt-tokens", o->prompt_tokens, "prompt length");
  c->add_option("--gen-tokens", o->gen_tokens, "tokens generated per request");
  c->add_option("--factors", o->factors, "oversubscription factors (pages needed / pool)")
      ->delimiter(',');
  c->add_option("-t,--threads", o->threads, "engine threads");
  add_device_option(*c, o->device);
  c->add_flag("--json", *json, "print a JSON summary as the last line");
  c->callback([o, json] {
    auto r = bench::run_contention_bench(*o);
    if (*json) fmt::print("{}\n", r.dump());
  });
}

void add_lora_suite(CLI::App& bench) {  // pith bench lora (bench/bench_lora.h)
  auto o = std::make_shared<bench::LoraBenchOptions>();
  auto json = std::make_shared<bool>(false);
  auto* c = bench.add_subcommand(
      "lora", "multi-LoRA decode: adapters mixed in a batch vs the base model alone (ABAB)");
  c->add_option("-m,--model", o->model, "base model file (GGUF or HF folder)")->required();
  c->add_option("--batch", o->batch, "sequences decoding together");
  c->add_option("--adapters", o->adapters, "adapters mixed through the batch");
  c->add_option("--rank", o->rank, "LoRA rank (every linear projection)");
  c->add_option("--adapter-dtype", o->adapter_dtype, "f32, f16 or bf16");
  c->add_option("--context", o->context, "prompt tokens per sequence before decoding");
  c->add_option("--steps", o->steps, "decode steps per round and mode");
  c->add_option("--rounds", o->rounds, "ABAB rounds (medians are reported)");
  c->add_option("-t,--threads", o->threads, "engine threads");
  add_device_option(*c, o->device);
  c->add_flag("--json", *json, "print a JSON summary as the last line");
  c->callback([o, json] {
    auto r = bench::run_lora_bench(*o);
    if (*json) fmt::print("{}\n", r.dump());
  });
}

void add_soak_suite(CLI::App& bench) {  // pith bench soak (bench/bench_soak.h)
  auto o = std::make_shared<bench::SoakBenchOptions>();
  auto json = std::make_shared<bool>(false);
  auto* c = bench.add_subcommand(
      "soak", "mixed inferlets for minutes: RSS, threads and KV pages over time, leaks at the end");
  c->add_option("-m,--model", o->model, "model file (GGUF or HF folder)")->required();
  c->add_option("--instances", o->instances, "instances running at once");
  c->add_option("--seconds", o->seconds, "how long to keep relaunching");
  c->add_option("--kv-memory", o->kv_memory, "KV pool (small: suspension takes part)");
  c->add_option("-t,--threads", o->threads, "engine threads");
  c->add_option("--runtime-threads", o->runtime_threads, "threads running inferlets");
  c->add_option("--inferlets", o->inferlet_dir, "folder of the .wasm inferlets");
  c->add_option("--cache-dir", o->cache_dir, "native code cache");
  auto* server = c->add_flag(
      "--server", o->server,
      "run the mix through a `pith serve` child process over HTTP, with OpenAI streams");
  c->add_option("--openai-share", o->openai_share,
                "--server: streamed chat completions in every 20 launches (0-12)")
      ->check(CLI::Range(0, 12))
      ->needs(server);
  add_device_option(*c, o->device);
  c->add_flag("--json", *json, "print a JSON summary as the last line");
  c->callback([o, json] {
    auto r = bench::run_soak_bench(*o);
    if (*json) fmt::print("{}\n", r.dump());
  });
}

void add_http_load_suite(CLI::App& bench) {  // pith bench serving (bench/bench_http_load.h)
  auto o = std::make_shared<bench::HttpLoadOptions>();
  auto json = std::make_shared<bool>(false);
  auto* c = bench.add_subcommand(
      "serving",
      "closed-loop streaming OpenAI load on pith and, with --against URL, on another server "
      "(llama-server, vLLM), interleaved: generated tok/s, TTFT, ITL and the ratios");
  auto* url = c->add_option("--url", o->url, "the pith server to measure (instead of -m)");
  c->add_option("-m,--model", o->model, "start `pith serve` on this model and measure it")
      ->excludes(url);
  c->add_option("--against", o->against, "the other OpenAI-compatible server's URL");
  c->add_option("--api-key", o->api_key, "bearer key sent to both");
  c->add_option("--concurrency", o->concurrency, "clients at once (comma-separated: one run each)")
      ->delimiter(',');
  c->add_option("--requests", o->requests, "requests per run (0: 2 x concurrency)");
  c->add_option("--prompt-words", o->prompt_words, "distinct words per prompt");
  c->add_option("--shared-prefix-words", o->shared_prefix_words,
                "words of a system prompt every request starts with");
  c->add_option("--max-tokens", o->max_tokens, "tokens generated per request (ignore_eos)");
  c->add_option("--rounds", o->rounds, "runs per server, alternating the order; medians");
  c->add_option("--seed", o->seed, "prompt words");
  c->add_flag("--chat", o->chat, "send /v1/chat/completions (the prompt as one user message)");
  c->add_option("--response-format", o->response_format,
                "json_object, or a JSON Schema file sent as json_schema (implies --chat)");
  c->add_option("--temperature", o->temperature, "0: greedy; else sampled, request i seed i");
  c->add_option("--presence-penalty", o->presence_penalty, "OpenAI presence_penalty (0: not sent)");
  c->add_option("--frequency-penalty", o->frequency_penalty,
                "OpenAI frequency_penalty (0: not sent)");
  c->add_option("--repetition-penalty", o->repetition_penalty,
                "vLLM repetition_penalty (1: not sent)");
  c->add_option("-t,--threads", o->threads, "-m: engine threads (0: one per core)");
  c->add_option("--kv-memory", o->kv_memory, "-m: the KV pool");
  add_kv_dtype_option(*c, o->kv_dtype);
  add_device_option(*c, o->device);
  c->add_flag("--json", *json, "print a JSON summary as the last line");
  c->callback([o, json] {
    auto r = bench::run_http_load_bench(*o);
    if (*json) fmt::print("{}\n", r.dump());
    if (r.value("failed_requests", false)) throw CLI::RuntimeError(1);
  });
}

void add_grammar_suite(CLI::App& bench) {  // pith bench grammar (bench/bench_grammar.h)
  auto o = std::make_shared<bench::GrammarBenchOptions>();
  auto json = std::make_shared<bool>(false);
  auto* cmd = bench.add_subcommand(
      "grammar", "constrained decoding: grammar mask over the whole vocabulary, us per token");
  cmd->add_option("-m,--model", o->model, "GGUF file, HF folder or tokenizer.json (the vocabulary)")
      ->required();
  cmd->add_option("--grammar", o->grammar_file, "GBNF file (default: the built-in JSON grammar)");
  cmd->add_option("--schema", o->schema_file,
                  "JSON Schema file, converted as for response_format (instead of --grammar)");
  cmd->add_option("--replay-out", o->replay_file,
                  "write vocabulary, grammar and timed walk as JSON (bench/xgrammar_replay.py)");
  cmd->add_option("--tokens", o->tokens, "generated tokens per pass")->capture_default_str();
  cmd->add_option("--naive-steps", o->naive_steps, "steps of the naive baseline")
      ->capture_default_str();
  cmd->add_option("--context-frames", o->context_frames, "stack nodes per cached context")
      ->capture_default_str();
  cmd->add_option("--seed", o->seed, "random walk seed")->capture_default_str();
  cmd->add_flag("--json", *json, "print a JSON summary as the last line");
  cmd->callback([o, json] {
    auto j = bench::run_grammar_bench(*o);
    if (*json) fmt::print("{}\n", j.dump());
  });
}

void add_bench_commands(CLI::App& app) {
  auto* bench = app.add_subcommand("bench", "Performance benchmarks");
  bench->require_subcommand(1);
  add_matmul_suite(*bench);
  add_delta_rule_suite(*bench);
  add_model_suite(*bench);
  add_tokenizer_suite(*bench);
  add_runtime_suites(*bench);
  add_batching_suite(*bench);
  add_overhead_suite(*bench);
  add_techniques_suite(*bench);
  add_agents_suite(*bench);
  add_prediction_suite(*bench);
  add_embedding_suite(*bench);
  add_paper_suite(*bench);
  add_serving_suites(*bench);
  add_contention_suite(*bench);
  add_lora_suite(*bench);
  add_soak_suite(*bench);
  add_http_load_suite(*bench);
  add_grammar_suite(*bench);
}

}  // namespace pith::cli
