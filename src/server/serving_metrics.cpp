#include "server/serving_metrics.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "stack/serving_stack.h"

namespace pith::server {

void register_serving_metrics(Metrics& metrics, ServingStack& stack) {
  Controller& ctl = stack.controller();
  auto g = [&ctl] { return ctl.gauges(); };
  metrics.gauge(
      "pith_kv_pages", "KV cache pages by state", [g] { return double(g().pages_free); },
      "state=\"free\"");
  metrics.gauge(
      "pith_kv_pages", "KV cache pages by state",
      [g] {
        auto x = g();
        return double(x.pages_total - x.pages_free - x.pages_cached);
      },
      "state=\"used\"");
  metrics.gauge(
      "pith_kv_pages", "KV cache pages by state", [g] { return double(g().pages_cached); },
      "state=\"cached\"");
  metrics.gauge("pith_kv_pages_total", "KV cache pool size in pages",
                [g] { return double(g().pages_total); });
  if (ctl.recurrent()) {  // hybrid models: recurrent states, like pages
    for (const char* state : {"free", "used", "cached"})
      metrics.gauge(
          "pith_recurrent_states", "Recurrent states of sequences (hybrid models) by state",
          [g, s = std::string(state)] {
            auto x = g();
            if (s == "free") return double(x.states_free);
            if (s == "cached") return double(x.states_cached);
            return double(x.states_total - x.states_free - x.states_cached);
          },
          fmt::format("state=\"{}\"", state));
    metrics.gauge("pith_recurrent_states_total", "Recurrent-state pool size (hybrid models)",
                  [g] { return double(g().states_total); });
    metrics.gauge("pith_recurrent_state_waiting_instances",
                  "Instances whose recurrent-state allocation waits for the pool",
                  [g] { return double(g().states_waiting); });
    metrics.counter_fn("pith_recurrent_state_wait_seconds_total",
                       "Time recurrent-state allocations spent waiting, summed",
                       [g] { return double(g().state_wait_ns) * 1e-9; });
  }
  runtime::Runtime* rt = &stack.runtime();
  metrics.gauge("pith_running_instances", "Inferlet instances running in the runtime",
                [rt] { return double(rt->live_instances()); });
  metrics.gauge("pith_queued_calls", "Model calls waiting in command queues",
                [g] { return double(g().queue_depth); });
  if (runtime::SharedState* shared = rt->shared_state()) {  // --state-store
    metrics.gauge("pith_state_store_subscribed",
                  "1 while this replica receives the shared broadcasts (Redis pub/sub)",
                  [shared] { return shared->subscribed() ? 1.0 : 0.0; });
    metrics.counter_fn("pith_state_store_failures_total",
                       "Shared state store calls that failed (Redis unreachable or refusing)",
                       [shared] { return double(shared->failures()); });
  }
  metrics.counter_fn("pith_prefix_cache_hit_tokens_total",
                     "Prompt tokens served by the radix prefix cache",
                     [g] { return double(g().prefix_hit_tokens); });
  metrics.counter_fn("pith_prefix_cache_miss_tokens_total",
                     "Prompt tokens looked up and not found in the prefix cache",
                     [g] { return double(g().prefix_miss_tokens); });
  metrics.counter_fn("pith_prompt_tokens_computed_total",
                     "Forward input tokens of prefill sequences (computed, not cached)",
                     [g] { return double(g().prefill_tokens); });
  metrics.counter_fn(
      "pith_forward_tokens_total", "Forward input tokens by kind",
      [g] { return double(g().prefill_tokens); }, "kind=\"prefill\"");
  metrics.counter_fn(
      "pith_forward_tokens_total", "Forward input tokens by kind",
      [g] { return double(g().decode_tokens); }, "kind=\"decode\"");
  metrics.counter_fn("pith_batches_total", "Batches executed by the inference layer",
                     [g] { return double(g().batches); });
  metrics.counter_fn("pith_instances_killed_for_memory_total",
                     "Instances ended by the KV contention policy",
                     [g] { return double(g().instances_killed_for_memory); });
  metrics.gauge("pith_kv_waiting_instances",
                "Instances whose KV allocation waits for pages (the admission queue)",
                [g] { return double(g().kv_waiting); });
  metrics.gauge("pith_suspended_instances", "Instances whose KV pages are swapped to host memory",
                [g] { return double(g().instances_suspended); });
  metrics.gauge("pith_kv_swap_bytes",
                "Host memory holding suspended instances' KV pages and recurrent states",
                [g] { return double(g().swap_bytes); });
  metrics.counter_fn("pith_kv_suspensions_total",
                     "Instances suspended to host memory under KV pressure",
                     [g] { return double(g().suspensions); });
  metrics.counter_fn("pith_kv_resumes_total", "Suspended instances brought back",
                     [g] { return double(g().resumes); });
  metrics.counter_fn(
      "pith_kv_swapped_pages_total", "KV pages moved between the pool and host memory",
      [g] { return double(g().pages_swapped_out); }, "direction=\"out\"");
  metrics.counter_fn(
      "pith_kv_swapped_pages_total", "KV pages moved between the pool and host memory",
      [g] { return double(g().pages_swapped_in); }, "direction=\"in\"");
  metrics.counter_fn(
      "pith_recurrent_states_swapped_total",
      "Recurrent states (hybrid models) moved between the pool and host memory",
      [g] { return double(g().states_swapped_out); }, "direction=\"out\"");
  metrics.counter_fn(
      "pith_recurrent_states_swapped_total",
      "Recurrent states (hybrid models) moved between the pool and host memory",
      [g] { return double(g().states_swapped_in); }, "direction=\"in\"");
  metrics.counter_fn("pith_kv_swap_seconds_total", "Time spent saving and restoring KV pages",
                     [g] { return double(g().swap_ns) / 1e9; });
  metrics.gauge("pith_kv_restoring_instances",
                "Resumed instances whose dropped KV pages are being recomputed",
                [g] { return double(g().instances_restoring); });
  metrics.counter_fn("pith_kv_dropped_pages_total",
                     "KV pages dropped at suspension, to be recomputed from their tokens",
                     [g] { return double(g().pages_dropped); });
  metrics.counter_fn("pith_kv_recomputed_tokens_total",
                     "Tokens recomputed to rebuild dropped KV pages",
                     [g] { return double(g().tokens_recomputed); });
  metrics.counter_fn("pith_kv_recompute_seconds_total",
                     "Time from each resume to the end of its recompute, summed",
                     [g] { return double(g().recompute_ns) / 1e9; });
  metrics.counter_fn("pith_kv_wait_seconds_total", "Time KV allocations spent waiting, summed",
                     [g] { return double(g().kv_wait_ns) / 1e9; });
  metrics.counter_fn("pith_kv_refused_total",
                     "KV allocations refused: more than the pool can give the instance",
                     [g] { return double(g().kv_refused); });
  auto& batch_size = metrics.histogram("pith_batch_size", "Sequences per forward batch",
                                       exponential_buckets(1, 2, 10));
  auto& batch_tokens = metrics.histogram("pith_batch_tokens", "Tokens per forward batch",
                                         exponential_buckets(1, 2, 14));
  ctl.set_batch_observer([&batch_size, &batch_tokens](const BatchStats& s) {
    if (s.type != CallType::Forward) return;
    batch_size.observe(s.seqs);
    batch_tokens.observe(s.tokens);
  });
}

CompileTimes::CompileTimes(Metrics& metrics)
    : histogram_(metrics.histogram("pith_program_compile_seconds",
                                   "Native compile time of uploaded programs",
                                   exponential_buckets(0.05, 2, 10))) {}

void CompileTimes::observe(const std::vector<ProgramInfo>& programs) {
  for (const auto& p : programs)
    if (p.native_ready && observed_.insert(p.hash).second && p.compile_seconds > 0)
      histogram_.observe(p.compile_seconds);
}

std::string stats_line(const ControllerGauges& last, const ControllerGauges& now, double dt_s,
                       size_t running_inferlets) {
  const uint64_t hit = now.prefix_hit_tokens - last.prefix_hit_tokens;
  const uint64_t miss = now.prefix_miss_tokens - last.prefix_miss_tokens;
  return fmt::format(
      "prompt {:.1f} tok/s, generation {:.1f} tok/s, running {} inferlets, queued {} calls, KV "
      "usage {:.1f}%, "
      "prefix-cache hit {:.1f}%{}",
      double(now.prefill_tokens - last.prefill_tokens) / dt_s,
      double(now.decode_tokens - last.decode_tokens) / dt_s, running_inferlets, now.queue_depth,
      now.pages_total ? 100.0 * (now.pages_total - now.pages_free) / now.pages_total : 0.0,
      hit + miss ? 100.0 * double(hit) / double(hit + miss) : 0.0,
      now.kv_waiting || now.instances_suspended || now.suspensions != last.suspensions
          ? fmt::format(", KV pressure: {} waiting, {} suspended ({} suspensions, {} resumes "
                        "since the last line)",
                        now.kv_waiting, now.instances_suspended, now.suspensions - last.suspensions,
                        now.resumes - last.resumes)
          : std::string());
}

void StatsLog::tick(const ControllerGauges& now, size_t running_inferlets, bool any_running) {
  if (interval_s_ <= 0) return;
  const double dt = std::chrono::duration<double>(Clock::now() - last_at_).count();
  if (dt < interval_s_) return;
  if (have_last_ && (now.tokens != last_.tokens || any_running))
    spdlog::info("{}", stats_line(last_, now, dt, running_inferlets));
  last_ = now;
  have_last_ = true;
  last_at_ = Clock::now();
}

}  // namespace pith::server
