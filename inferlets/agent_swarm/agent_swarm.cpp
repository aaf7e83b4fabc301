// agent_swarm: several inferlets cooperating through broadcast/subscribe (GPTSwarm-style, Zhuge et
// al. 2024): a coordinator and --workers agents form a pipeline. Each agent is its own instance
// with its own KV context; agent i reads the task and every earlier agent's contribution (as
// tokens, straight into its context), adds its own, and hands the document on.
//
//   agent_swarm --role coordinator --swarm NAME --workers N [--task TEXT]
//   agent_swarm --role worker --swarm NAME --workers N --index I [--tokens 6] [--seed S]
//
// Topics: NAME/ready (workers announce themselves once subscribed), NAME/stage/I (the document
// for agent I), NAME/done (the finished document, to the coordinator). The coordinator sends
// "listening" once subscribed (launch the workers after that), starts the pipeline when all N
// are ready, and sends the final report as JSON. The document is one line per step:
// "AGENT<TAB>INSTANCE<TAB>TOKEN,TOKEN,...", agent 0 being the coordinator's task.
#include <pith/context.hpp>
#include <pith/flags.hpp>
#include <pith/json.hpp>

#include <stdlib.h>

namespace {

struct Step {
  uint32_t agent = 0;
  std::string instance;
  std::vector<uint32_t> tokens;
};

std::string ids_text(const std::vector<uint32_t>& ids) {
  std::string out;
  for (size_t i = 0; i < ids.size(); ++i) out += (i ? "," : "") + std::to_string(ids[i]);
  return out;
}

std::vector<Step> parse(const std::string& doc) {
  std::vector<Step> steps;
  size_t at = 0;
  while (at < doc.size()) {
    size_t nl = doc.find('\n', at);
    if (nl == std::string::npos) nl = doc.size();
    std::string line = doc.substr(at, nl - at);
    at = nl + 1;
    size_t t1 = line.find('\t'), t2 = line.find('\t', t1 + 1);
    if (t1 == std::string::npos || t2 == std::string::npos) continue;
    Step s;
    s.agent = static_cast<uint32_t>(strtoul(line.c_str(), nullptr, 10));
    s.instance = line.substr(t1 + 1, t2 - t1 - 1);
    for (size_t p = t2 + 1; p < line.size();) {
      size_t c = line.find(',', p);
      if (c == std::string::npos) c = line.size();
      if (c > p) s.tokens.push_back(static_cast<uint32_t>(strtoul(line.substr(p, c - p).c_str(), nullptr, 10)));
      p = c + 1;
    }
    steps.push_back(s);
  }
  return steps;
}

std::string line(uint32_t agent, const std::vector<uint32_t>& tokens) {
  return std::to_string(agent) + "\t" + std::to_string(pith::instance_id()) + "\t" + ids_text(tokens) + "\n";
}

std::string steps_json(const std::vector<Step>& steps) {
  std::string out = "[";
  for (size_t i = 0; i < steps.size(); ++i) {
    pith::Json j;
    j.num("agent", steps[i].agent).str("instance", steps[i].instance).raw("tokens", pith::Json::array(steps[i].tokens));
    out += (i ? "," : "") + j.dump();
  }
  return out + "]";
}

int coordinator(const std::string& swarm, uint32_t workers, const std::string& task) {
  pith::Subscription ready(swarm + "/ready"), done(swarm + "/done");
  if (!ready.valid() || !done.valid()) return pith::send("error: subscribe"), 1;
  auto model = pith::Model::open("");
  if (!model) return pith::send("error: no model"), 1;
  auto task_ids = model->tokenize(task);
  if (!task_ids) return pith::send("error: tokenize"), 1;
  pith::send("listening");
  std::vector<bool> seen(workers + 1, false);
  for (uint32_t n = 0; n < workers;) {
    auto m = ready.next();
    if (!m) return pith::send("error: ready: " + std::string(pith::status_name(m.status()))), 1;
    uint32_t i = static_cast<uint32_t>(strtoul(m->c_str(), nullptr, 10));
    if (i >= 1 && i <= workers && !seen[i]) seen[i] = true, ++n;
  }
  pith::broadcast(swarm + "/stage/1", line(0, *task_ids));
  auto doc = done.next();
  if (!doc) return pith::send("error: done: " + std::string(pith::status_name(doc.status()))), 1;
  std::vector<Step> steps = parse(*doc);
  std::string text;
  for (const Step& s : steps)
    if (s.agent > 0) text += model->detokenize(s.tokens).value_or("") + "\n";
  pith::Json j;
  j.num("workers", workers).num("steps", double(steps.size())).str("text", text).raw("pipeline", steps_json(steps));
  pith::send(j.dump());
  return 0;
}

int worker(const std::string& swarm, uint32_t index, uint32_t workers, uint32_t n_tokens, uint64_t seed) {
  pith::Subscription in(swarm + "/stage/" + std::to_string(index));
  if (!in.valid()) return pith::send("error: subscribe"), 1;
  pith::broadcast(swarm + "/ready", std::to_string(index));
  auto doc = in.next();
  if (!doc) return pith::send("error: stage input: " + std::string(pith::status_name(doc.status()))), 1;
  std::vector<Step> steps = parse(*doc);
  if (steps.empty()) return pith::send("error: empty document"), 1;

  auto model = pith::Model::open("");
  auto ctx = model ? pith::Context::create(*model) : pith::Result<pith::Context>::error(model.status());
  if (!ctx) return pith::send("error: context"), 1;
  if (ctx->info().add_bos) ctx->fill_tokens({ctx->info().bos_token});
  ctx->fill("You are agent " + std::to_string(index) + ". Task:");
  for (const Step& s : steps) {
    if (s.agent > 0) ctx->fill("\nAgent " + std::to_string(s.agent) + ":");
    ctx->fill_tokens(s.tokens);
  }
  ctx->fill("\nAgent " + std::to_string(index) + ":");
  size_t read = ctx->tokens().size();
  pith::Generation g = ctx->generate(pith::Sampler::temperature(0.8f, seed + index),
                                     pith::Stop{.max_tokens = n_tokens, .stop_at_eos = false});
  if (g.tokens.size() != n_tokens) return pith::send("error: generate: " + g.finish_reason), 1;

  std::string next = index == workers ? swarm + "/done" : swarm + "/stage/" + std::to_string(index + 1);
  pith::broadcast(next, *doc + line(index, g.tokens));
  pith::Json j;
  j.num("agent", index).num("read_tokens", double(read)).num("context_tokens", double(ctx->tokens().size()))
      .str("next", next).raw("tokens", pith::Json::array(g.tokens));
  pith::send(j.dump());
  return 0;
}

}  // namespace

int main() {
  pith::Flags f;
  std::string role = f.str("--role"), swarm = f.str("--swarm", "swarm");
  uint32_t workers = f.u32("--workers", 3), index = f.u32("--index", 0), n_tokens = f.u32("--tokens", 6);
  std::string task = f.str("--task", "Write a haiku about the sea, one line per agent.");
  uint64_t seed = f.u64("--seed", 7);
  if (!f.unknown().empty()) return pith::send("error: unknown argument " + f.unknown()), 2;
  if (role == "coordinator") return coordinator(swarm, workers, task);
  if (role == "worker" && index >= 1 && index <= workers) return worker(swarm, index, workers, n_tokens, seed);
  pith::send("error: --role coordinator|worker (workers need 1 <= --index <= --workers)");
  return 2;
}
