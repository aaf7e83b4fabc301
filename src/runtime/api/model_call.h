// Helpers shared by the model-facing host files (model.cpp, queue.cpp, resources.cpp,
// compute.cpp): find the instance's ModelSession (PITH_ERR_NO_MODEL without a model) and turn a
// session Completion into a guest future.
#pragma once

#include <memory>

#include "runtime/api/host_call.h"
#include "runtime/model_api.h"

namespace pith::runtime::api {

// Array arguments larger than this are rejected before any allocation.
constexpr uint32_t kMaxArray = 1u << 20;

inline ModelSession& session_of(Instance& inst) {
  ModelSession* s = inst.model_session();
  if (!s) throw GuestError{PITH_ERR_NO_MODEL};
  return *s;
}

inline void check_count(uint32_t n) {
  if (n > kMaxArray) throw GuestError{PITH_ERR_BAD_ARGUMENT};
}

// Creates a future and a Completion that completes it (from any thread, at most once, and not
// at all if the instance is gone). Call `start(completion)`; on a synchronous error the future
// is dropped again and the error returned.
template <typename Start>
pith_status_t start_future(Instance& inst, uint32_t future_out, Start start) {
  GuestMemory mem(inst);
  mem.bytes(future_out, 4);
  uint32_t id = 0;
  pith_status_t st = inst.new_future(&id);
  if (st != PITH_OK) return st;
  std::weak_ptr<Instance> weak = inst.weak_from_this();
  Completion done = [weak, id](pith_status_t status, std::string result) {
    if (auto i = weak.lock()) i->complete_future(id, status, std::move(result));
  };
  st = start(std::move(done));
  if (st != PITH_OK) {
    inst.drop_future(id);
    return st;
  }
  mem.store<uint32_t>(future_out, id);
  return PITH_OK;
}

}  // namespace pith::runtime::api
