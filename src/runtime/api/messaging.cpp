// Host side of abi.h "client messaging": msg_send emits a message event to the launching client;
// msg_receive returns a future completed by the next client message (Instance::push_message).
#include "runtime/api/host_call.h"

using namespace pith::runtime;
using namespace pith::runtime::api;

extern "C" {

u32 Z_pithZ_msg_send(Z_pith_instance_t* c, u32 data, u32 len) {
  return host_call(c, [&](Instance& inst) -> pith_status_t {
    if (len > inst.limits().max_message_bytes || !inst.take_message_credit())
      return static_cast<pith_status_t>(PITH_ERR_LIMIT);
    std::string msg(GuestMemory(inst).string(data, len));
    inst.emit({InstanceEvent::Kind::Message, 0, std::move(msg)});
    return static_cast<pith_status_t>(PITH_OK);
  });
}

u32 Z_pithZ_msg_receive(Z_pith_instance_t* c, u32 future_out) {
  return host_call(c, [&](Instance& inst) -> pith_status_t {
    GuestMemory mem(inst);
    mem.bytes(future_out, 4);  // validate before creating the future
    uint32_t f = 0;
    pith_status_t st = inst.receive(&f);
    if (st == PITH_OK) mem.store<uint32_t>(future_out, f);
    return st;
  });
}

}  // extern "C"
