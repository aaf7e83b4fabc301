// Host side of abi.h "command queues": routed to the instance's ModelSession.
#include "runtime/api/model_call.h"

using namespace pith::runtime;
using namespace pith::runtime::api;

extern "C" {

u32 Z_pithZ_queue_create(Z_pith_instance_t* c, u32 model, u32 queue_out) {
  return host_call(c, [&](Instance& inst) -> pith_status_t {
    GuestMemory mem(inst);
    mem.bytes(queue_out, 4);
    uint32_t q = 0;
    pith_status_t st = session_of(inst).create_queue(model, &q);
    if (st == PITH_OK) mem.store<uint32_t>(queue_out, q);
    return st;
  });
}

u32 Z_pithZ_queue_destroy(Z_pith_instance_t* c, u32 queue) {
  return host_call(
      c, [&](Instance& inst) -> pith_status_t { return session_of(inst).destroy_queue(queue); });
}

u32 Z_pithZ_queue_synchronize(Z_pith_instance_t* c, u32 queue, u32 future_out) {
  return host_call(c, [&](Instance& inst) -> pith_status_t {
    ModelSession& s = session_of(inst);
    return start_future(inst, future_out,
                        [&](Completion done) { return s.synchronize(queue, std::move(done)); });
  });
}

u32 Z_pithZ_queue_set_priority(Z_pith_instance_t* c, u32 queue, u32 priority) {
  return host_call(c, [&](Instance& inst) -> pith_status_t {
    if (priority > 7) return PITH_ERR_BAD_ARGUMENT;
    return session_of(inst).set_queue_priority(queue, priority);
  });
}

u32 Z_pithZ_queue_set_adapter(Z_pith_instance_t* c, u32 queue, u32 adapter) {
  return host_call(c, [&](Instance& inst) -> pith_status_t {
    return session_of(inst).set_queue_adapter(queue, adapter);
  });
}

}  // extern "C"
