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
#include <stdlib.h>

#include <pith/inferlet.hpp>
#include <pith/json.hpp>

namespace {

struct Step {
  uint32_t agent = 0;
  std::string instance;
  std::vector<uint32_t> tokens;
};

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
      if (c > p)
        s.tokens.push_back(
            static_cast<uint32_t>(strtoul(line.substr(p, c - p).c_str(), nullptr, 10)));
      p = c + 1;
    }
    steps.push_back(s);
  }
  return steps;
}

std::string line(uint32_t agent, const std::vector<uint32_t>& tokens) {
  return std::to_string(agent) + "\t" + std::to_string(pith::instance_id()) + "\t" +
         pith::join(tokens, ",") + "\n";
}

std::string steps_json(const std::vector<Step>& steps) {
  std::string out = "[";
  for (size_t i = 0; i < steps.size(); ++i) {
    pith::Json j;
    j.num("agent", steps[i].agent)
        .str("instance", steps[i].instance)
        .raw("tokens", pith::Json::array(steps[i].tokens));
    out += (i ? "," : "") + j.dump();
  }
  return out + "]";
}

pith::Status coordinator(const std::string& swarm, uint32_t workers, const std::string& task) {
  pith::Subscription ready = PITH_TRY(pith::Subscription::open(swarm + "/ready"));
  pith::Subscription done = PITH_TRY(pith::Subscription::open(swarm + "/done"));
  pith::Model model = PITH_TRY(pith::Model::open(""));
  std::vector<uint32_t> task_ids = PITH_TRY(model.tokenize(task));
  PITH_TRY(pith::send("listening"));
  std::vector<bool> seen(workers + 1, false);
  for (uint32_t n = 0; n < workers;) {
    pith::Result<std::string> m = ready.next();
    if (!m) return m.error().context("ready");
    uint32_t i = static_cast<uint32_t>(strtoul(m->c_str(), nullptr, 10));
    if (i >= 1 && i <= workers && !seen[i]) seen[i] = true, ++n;
  }
  PITH_TRY(pith::broadcast(swarm + "/stage/1", line(0, task_ids)));
  pith::Result<std::string> doc = done.next();
  if (!doc) return doc.error().context("done");
  std::vector<Step> steps = parse(*doc);
  std::string text;
  for (const Step& s : steps)
    if (s.agent > 0) text += PITH_TRY(model.detokenize(s.tokens)) + "\n";
  pith::Json j;
  j.num("workers", workers)
      .num("steps", double(steps.size()))
      .str("text", text)
      .raw("pipeline", steps_json(steps));
  return pith::send(j.dump());
}

pith::Status worker(const std::string& swarm, uint32_t index, uint32_t workers, uint32_t n_tokens,
                    uint64_t seed) {
  pith::Subscription in =
      PITH_TRY(pith::Subscription::open(swarm + "/stage/" + std::to_string(index)));
  PITH_TRY(pith::broadcast(swarm + "/ready", std::to_string(index)));
  pith::Result<std::string> doc = in.next();
  if (!doc) return doc.error().context("stage input");
  std::vector<Step> steps = parse(*doc);
  if (steps.empty()) return pith::Error(PITH_ERR_BAD_ARGUMENT, "empty document");

  pith::Model model = PITH_TRY(pith::Model::open(""));
  pith::Context ctx = PITH_TRY(pith::Context::create(model));
  if (ctx.info().add_bos) ctx.fill_tokens({ctx.info().bos_token});
  PITH_TRY(ctx.fill("You are agent " + std::to_string(index) + ". Task:"));
  for (const Step& s : steps) {
    if (s.agent > 0) PITH_TRY(ctx.fill("\nAgent " + std::to_string(s.agent) + ":"));
    ctx.fill_tokens(s.tokens);
  }
  PITH_TRY(ctx.fill("\nAgent " + std::to_string(index) + ":"));
  size_t read = ctx.tokens().size();
  pith::Generation g = ctx.generate(pith::Sampler::temperature(0.8f, seed + index),
                                    pith::Stop{.max_tokens = n_tokens, .stop_at_eos = false});
  if (g.tokens.size() != n_tokens)
    return pith::Error(PITH_ERR_INTERNAL, "generate: " + g.finish_reason);

  std::string next =
      index == workers ? swarm + "/done" : swarm + "/stage/" + std::to_string(index + 1);
  PITH_TRY(pith::broadcast(next, *doc + line(index, g.tokens)));
  pith::Json j;
  j.num("agent", index)
      .num("read_tokens", double(read))
      .num("context_tokens", double(ctx.tokens().size()))
      .str("next", next)
      .raw("tokens", pith::Json::array(g.tokens));
  return pith::send(j.dump());
}

}  // namespace

pith::Status agent_swarm(pith::Flags& flags) {
  std::string role = flags.str("--role", "", "coordinator or worker");
  std::string swarm = flags.str("--swarm", "swarm", "the swarm's topic prefix");
  uint32_t workers = flags.u32("--workers", 3, "agents in the pipeline");
  uint32_t index = flags.u32("--index", 0, "this worker's place in the pipeline, 1..--workers");
  uint32_t n_tokens = flags.u32("--tokens", 6, "tokens each worker adds");
  std::string task = flags.str("--task", "Write a haiku about the sea, one line per agent.",
                               "the task (coordinator)");
  uint64_t seed = flags.u64("--seed", 7, "sampling seed (worker i uses seed + i)");
  PITH_TRY(flags.done());
  if (role == "coordinator") return coordinator(swarm, workers, task);
  if (role == "worker" && index >= 1 && index <= workers)
    return worker(swarm, index, workers, n_tokens, seed);
  return pith::Error(PITH_ERR_BAD_ARGUMENT,
                     "--role coordinator|worker (workers need 1 <= --index <= --workers)", 2);
}
PITH_INFERLET(agent_swarm)
