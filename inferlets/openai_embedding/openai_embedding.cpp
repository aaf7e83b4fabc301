// openai_embedding: the built-in inferlet behind pith serve's /v1/embeddings. The server
// tokenizes each input; this program computes every input in its own context, several at once so
// the server batches their forwards, pools the model's final hidden states (pith/hidden_state.hpp)
// into one vector per input and sends it (pith/embedding_protocol.hpp).
//
//   openai_embedding --tokens ID,ID,... [--tokens ...] [--pooling last|mean|cls]
//                    [--dimensions N] [--normalize 0|1] [--adapter NAME] [--parallel N]
//
// Last-token pooling reads one state and lets the prefix cache serve a shared start (an
// instruction before each query); mean and CLS pooling read every token's state, so they compute
// every token, 256 at a time. --dimensions keeps the leading N values (Matryoshka models), before
// normalising.
// --parallel bounds the inputs in flight (default 32); when KV memory runs short with others in
// flight, the next input waits for the oldest to finish rather than for memory this program holds.
#include <stdlib.h>

#include <deque>
#include <pith/context.hpp>
#include <pith/embedding_protocol.hpp>
#include <pith/hidden_state.hpp>
#include <pith/openai_protocol.hpp>

namespace {

namespace proto = pith::embedding_protocol;

struct Request {
  std::vector<std::vector<uint32_t>> inputs;
  pith::Pooling pooling = pith::Pooling::Last;
  uint32_t dimensions = 0;  // 0: the model's hidden size
  bool normalize = true;
  std::string adapter;
  uint32_t parallel = 32;
};

bool parse_tokens(const std::string& s, std::vector<uint32_t>& out) {
  const char* p = s.c_str();
  while (*p) {
    char* end = nullptr;
    unsigned long v = strtoul(p, &end, 10);
    if (end == p || (*end && *end != ',')) return false;
    out.push_back(static_cast<uint32_t>(v));
    p = *end == ',' ? end + 1 : end;
  }
  return !out.empty();
}

const char* parse_args(Request& r) {
  std::vector<std::string> a = pith::args();
  for (size_t i = 1; i < a.size(); ++i) {
    if (i + 1 >= a.size()) return "missing value after an argument";
    const std::string& k = a[i];
    const std::string& v = a[++i];
    if (k == "--tokens") {
      r.inputs.emplace_back();
      if (!parse_tokens(v, r.inputs.back())) return "--tokens needs ID,ID,...";
    } else if (k == "--pooling") {
      if (!pith::parse_pooling(v, &r.pooling)) return "--pooling is last, mean or cls";
    } else if (k == "--dimensions") {
      r.dimensions = static_cast<uint32_t>(strtoul(v.c_str(), nullptr, 10));
    } else if (k == "--normalize") {
      r.normalize = v != "0";
    } else if (k == "--adapter") {
      r.adapter = v;
    } else if (k == "--parallel") {
      r.parallel = static_cast<uint32_t>(strtoul(v.c_str(), nullptr, 10));
      if (r.parallel == 0) return "--parallel must be at least 1";
    } else {
      return "unknown argument";
    }
  }
  if (r.inputs.empty()) return "--tokens is required";
  return nullptr;
}

int fail(pith_status_t code, const std::string& what) {
  (void)pith::send(pith::openai_protocol::encode(pith::openai_protocol::ErrorMessage{code, what}));
  return 1;
}

// Every-token pooling computes an input this many tokens at a time, so the states of a long
// input never sit in guest memory at once (256 x 4096 floats: 4 MiB).
constexpr size_t kChunk = 256;

struct InFlight {
  uint32_t input = 0;
  pith::Context ctx;
  size_t filled = 0;  // tokens of the input handed to ctx so far
};

}  // namespace

int main() {
  Request req;
  if (const char* err = parse_args(req)) return fail(PITH_ERR_BAD_ARGUMENT, err);
  auto model = pith::Model::open("");
  if (!model) return fail(model.status(), model.error().what());
  pith_adapter_t adapter = 0;
  if (!req.adapter.empty()) {
    auto a = model->open_adapter(req.adapter);
    if (!a) return fail(a.status(), a.error().what());
    adapter = *a;
  }
  const bool every = pith::pools_every_token(req.pooling);

  // Queues input i's (first) forward; the context holds its pages until it is finished.
  auto start = [&](uint32_t i) -> pith::Result<InFlight> {
    InFlight f{i, PITH_TRY(pith::Context::create(*model)), 0};
    if (adapter != 0) PITH_TRY(f.ctx.set_adapter(adapter));
    f.ctx.set_prefix_cache(!every);
    const std::vector<uint32_t>& ids = req.inputs[i];
    f.filled = every ? std::min(ids.size(), kChunk) : ids.size();
    f.ctx.fill_tokens(std::vector<uint32_t>(ids.begin(), ids.begin() + f.filled));
    PITH_TRY(f.ctx.start_hidden(every));
    return f;
  };
  // Waits for the oldest input in flight (computing the rest of a long one), pools its states
  // and sends its embedding.
  std::deque<InFlight> flight;
  auto finish_oldest = [&]() -> pith::Status {
    InFlight f = std::move(flight.front());
    flight.pop_front();
    const std::vector<uint32_t>& ids = req.inputs[f.input];
    pith::Pooler pooler(req.pooling);
    for (;;) {
      pooler.add(PITH_TRY(f.ctx.finish_hidden()));
      if (f.filled == ids.size()) break;
      const size_t n = std::min(ids.size() - f.filled, kChunk);
      f.ctx.fill_tokens(std::vector<uint32_t>(ids.begin() + f.filled, ids.begin() + f.filled + n));
      f.filled += n;
      PITH_TRY(f.ctx.start_hidden(true));
    }
    const size_t want = every ? ids.size() : 1;
    if (pooler.count() != want)
      return pith::Error(PITH_ERR_INTERNAL, "input " + std::to_string(f.input) + ": " +
                                                std::to_string(pooler.count()) +
                                                " hidden states for " + std::to_string(want));
    std::vector<float> v = pooler.result();
    if (req.normalize)
      pith::truncate_and_normalize(v, req.dimensions);
    else if (req.dimensions > 0 && req.dimensions < v.size())
      v.resize(req.dimensions);
    const auto n = static_cast<uint32_t>(ids.size());
    if (!pith::send(proto::encode(proto::EmbeddingMessage{f.input, n, f.ctx.cached_tokens(), v})))
      return pith::Error(PITH_ERR_CLOSED, "the server stopped listening");
    return {};
  };

  const bool waits = !pith::Model::kv_fail_fast();
  for (uint32_t next = 0; next < req.inputs.size();) {
    // With inputs in flight, an allocation must not wait for memory they hold: it fails fast,
    // and the oldest finishes (its pages go back) before the next try.
    if (waits) (void)model->set_kv_fail_fast(!flight.empty());
    pith::Result<InFlight> f = start(next);
    if (!f) {
      const pith_status_t st = f.status();
      const bool short_of_memory = st == PITH_ERR_OUT_OF_KV_PAGES || st == PITH_ERR_OUT_OF_STATES;
      if (!short_of_memory || flight.empty())
        return fail(st, "input " + std::to_string(next) + ": " + f.error().what());
      if (pith::Status s = finish_oldest(); !s) return fail(s.status(), s.error().what());
      continue;
    }
    flight.push_back(std::move(*f));
    ++next;
    if (flight.size() >= req.parallel)
      if (pith::Status s = finish_oldest(); !s) return fail(s.status(), s.error().what());
  }
  if (waits) (void)model->set_kv_fail_fast(false);
  while (!flight.empty())
    if (pith::Status s = finish_oldest(); !s) return fail(s.status(), s.error().what());
  return 0;
}
