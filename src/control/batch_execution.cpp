#include "control/batch_execution.h"

#include <spdlog/spdlog.h>

#include <new>

#include "common/error.h"

namespace pith {

namespace {

// The one place a backend exception becomes a code and a message.
Failure backend_failure(std::exception_ptr e) {
  try {
    std::rethrow_exception(e);
  } catch (const Error& err) {
    return {Status::BadArgument, err.what()};
  } catch (const std::bad_alloc& err) {
    return {Status::BackendFailure, fmt::format("backend out of memory ({})", err.what())};
  } catch (const std::exception& err) {
    return {Status::BackendFailure, fmt::format("backend failure: {}", err.what())};
  } catch (...) {
    return {Status::BackendFailure, "backend failure: unknown exception"};
  }
}

template <typename Fn>
void run_one(PendingCall& c, Fn&& fn) {
  try {
    fn();
  } catch (...) {
    c.outcome = backend_failure(std::current_exception());
  }
}

// A call whose earlier chunk failed already carries that Failure (controller.cpp); its
// remaining inputs still run, but the Failure is what it reports.
void run_forward(Backend& backend, std::vector<std::shared_ptr<PendingCall>>& calls) {
  std::vector<SequenceInput> batch;
  batch.reserve(calls.size());
  for (auto& c : calls) batch.push_back(std::move(c->forward().seq));
  try {
    auto results = backend.forward(batch);
    for (size_t i = 0; i < calls.size(); ++i)
      if (calls[i]->outcome.ok()) calls[i]->outcome->forward = std::move(results[i]);
  } catch (const std::exception& e) {
    // Validation should make this unreachable; if the backend still rejects the batch, run
    // the sequences one by one so only the offending call fails.
    spdlog::warn("forward batch of {} rejected ({}); retrying one by one", calls.size(), e.what());
    for (size_t i = 0; i < calls.size(); ++i)
      run_one(*calls[i], [&] {
        auto r = backend.forward({batch[i]});
        if (calls[i]->outcome.ok()) calls[i]->outcome->forward = std::move(r[0]);
      });
  }
}

}  // namespace

void execute_batch(Backend& backend, std::vector<std::shared_ptr<PendingCall>>& calls) {
  if (calls.empty()) return;
  switch (call_type(calls.front()->call)) {
    case CallType::Forward:
      run_forward(backend, calls);
      break;
    case CallType::EmbedTokens:
      for (auto& c : calls) {
        auto& e = std::get<EmbedTokensCall>(c->call);
        run_one(*c, [&] { backend.embed_tokens(e.tokens, e.positions, e.slots); });
      }
      break;
    case CallType::NextDist:
      for (auto& c : calls) {
        auto& d = std::get<NextDistCall>(c->call);
        run_one(*c, [&] { c->outcome->dist = backend.next_dist(d.embed_slot, d.top_k); });
      }
      break;
    case CallType::CopyKv:
      for (auto& c : calls) {
        auto& k = std::get<CopyKvCall>(c->call);
        run_one(*c, [&] { backend.copy_kv(k.src, k.dst, k.src_offset, k.dst_offset, k.n); });
      }
      break;
    case CallType::CopyState:
      for (auto& c : calls) {
        auto& k = std::get<CopyStateCall>(c->call);
        run_one(*c, [&] { backend.copy_state(k.src, k.dst); });
      }
      break;
  }
}

}  // namespace pith
