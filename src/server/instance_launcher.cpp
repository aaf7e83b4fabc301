#include "server/instance_launcher.h"

#include <fmt/format.h>

#include "stack/serving_stack.h"

namespace pith::server {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

const char* level_name(int level) {
  static const char* names[] = {"debug", "info", "warn", "error"};
  return names[level & 3];
}

}  // namespace

const char* exit_kind_name(runtime::ExitStatus::Kind k) {
  switch (k) {
    case runtime::ExitStatus::Kind::Exited:
      return "exited";
    case runtime::ExitStatus::Kind::Trapped:
      return "trapped";
    case runtime::ExitStatus::Kind::Killed:
      return "killed";
  }
  return "exited";
}

Launched InstanceLauncher::launch(const std::string& hash, std::vector<std::string> args,
                                  const std::string& owner, bool detach) {
  const ServeConfig& cfg = ctx_.settings.config;
  Launched out;
  auto refuse = [&](http::status s, std::string type, std::string msg) {
    out.error = LaunchError{s, std::move(type), std::move(msg)};
    return out;
  };
  if (ctx_.registry.running() >= cfg.max_instances)
    return refuse(http::status::too_many_requests, "too_many_requests",
                  fmt::format("{} instances are running, the server's limit", cfg.max_instances));
  if (cfg.max_instances_per_key > 0 && !ctx_.settings.api_keys.empty() &&
      ctx_.registry.running_for(owner) >= cfg.max_instances_per_key)
    return refuse(http::status::too_many_requests, "too_many_requests",
                  fmt::format("this API key already runs {} instances, its limit",
                              cfg.max_instances_per_key));
  std::shared_ptr<runtime::Program> program;
  try {
    program = ctx_.programs.get(hash);
  } catch (const std::exception& e) {
    return refuse(http::status::internal_server_error, "internal", e.what());
  }
  if (!program)
    return refuse(http::status::not_found, "not_found",
                  fmt::format("program {} is not uploaded", hash));

  auto rec = std::make_shared<InstanceRecord>();
  rec->program = hash;
  if (auto p = ctx_.programs.find(hash)) rec->program_name = p->name;  // argv[0] when named
  rec->args = args;
  rec->owner = owner;
  rec->detach = detach;
  rec->events = std::make_shared<EventLog>(ctx_.io, cfg.event_buffer, cfg.event_buffer_bytes);
  Metrics* metrics = &ctx_.metrics;
  auto* io = &ctx_.io;
  runtime::EventSink sink = [rec, metrics, io](uint64_t, const runtime::InstanceEvent& e) {
    using K = runtime::InstanceEvent::Kind;
    if (e.kind == K::Message) {
      rec->events->append("message", json_text({{"text", e.text}}), e.text);
    } else if (e.kind == K::Log) {
      rec->events->append("log", json_text({{"level", level_name(e.level)}, {"text", e.text}}));
    } else {
      runtime::ExitStatus st{static_cast<runtime::ExitStatus::Kind>(e.level), e.code, e.text};
      {
        std::lock_guard lock(rec->mu);
        rec->exit = st;
        rec->finished_at = Clock::now();
      }
      rec->events->append(
          "terminated",
          json_text({{"kind", exit_kind_name(st.kind)}, {"code", st.code}, {"reason", st.reason}}));
      rec->events->close();
      metrics
          ->counter("pith_instances_finished_total", "Instances that ended, by how",
                    fmt::format("kind=\"{}\"", exit_kind_name(st.kind)))
          .inc();
      // Drop the Instance (and the sink holding this record) off the scheduler thread.
      asio::post(*io, [rec] {
        std::lock_guard lock(rec->mu);
        rec->instance.reset();
      });
    }
  };
  std::vector<std::string> argv = {rec->program_name.empty() ? hash.substr(0, 12)
                                                             : rec->program_name};
  argv.insert(argv.end(), args.begin(), args.end());
  std::shared_ptr<runtime::Instance> inst;
  try {
    inst = ctx_.stack.launch(program, std::move(argv), std::move(sink));
  } catch (const std::exception& e) {
    return refuse(http::status::internal_server_error, "internal",
                  fmt::format("launch failed: {}", e.what()));
  }
  rec->id = inst->id();
  {
    std::lock_guard lock(rec->mu);
    if (!rec->exit) rec->instance = inst;
  }
  ctx_.registry.add(rec);
  ctx_.metrics.counter("pith_instances_launched_total", "Instances launched").inc();
  out.record = rec;
  return out;
}

json InstanceLauncher::describe(const InstanceRecord& r) const {
  json exit = nullptr;
  std::shared_ptr<runtime::Instance> inst;
  Clock::time_point end = Clock::now();
  {
    std::lock_guard lock(r.mu);
    inst = r.instance;
    if (r.exit) {
      exit = {{"kind", exit_kind_name(r.exit->kind)},
              {"code", r.exit->code},
              {"reason", r.exit->reason}};
      end = r.finished_at;
    }
  }
  json j = {{"id", ctx_.registry.external_id(r.id)},
            {"program", r.program},
            {"args", r.args},
            {"state", exit.is_null() ? "running" : "finished"},
            {"age_s", std::chrono::duration<double>(end - r.started).count()},
            {"kv_pages", exit.is_null() ? ctx_.stack.controller().pages_held(r.id) : 0},
            {"detach", r.detach},
            {"exit", exit}};
  if (!r.program_name.empty()) j["program_name"] = r.program_name;
  return j;
}

}  // namespace pith::server
