// Host side of abi.h "broadcast / subscribe": topics live in the runtime's PubSub registry;
// subscriptions are per-instance handles.
#include "runtime/pubsub.h"
#include "runtime/api/host_call.h"

using namespace pith::runtime;
using namespace pith::runtime::api;

namespace {
constexpr uint32_t kMaxTopic = 1024;
}

extern "C" {

u32 Z_pithZ_topic_broadcast(Z_pith_instance_t* c, u32 topic, u32 topic_len, u32 data, u32 len) {
  return host_call(c, [&](Instance& inst) -> pith_status_t {
    if (topic_len > kMaxTopic || len > inst.limits().max_message_bytes ||
        !inst.take_message_credit())
      return static_cast<pith_status_t>(PITH_ERR_LIMIT);
    GuestMemory mem(inst);
    std::string_view t = mem.string(topic, topic_len);
    std::string msg(mem.string(data, len));
    inst.services().pubsub->broadcast(t, msg);
    return static_cast<pith_status_t>(PITH_OK);
  });
}

u32 Z_pithZ_topic_subscribe(Z_pith_instance_t* c, u32 topic, u32 topic_len, u32 sub_out) {
  return host_call(c, [&](Instance& inst) -> pith_status_t {
    if (topic_len > kMaxTopic) return static_cast<pith_status_t>(PITH_ERR_LIMIT);
    GuestMemory mem(inst);
    mem.bytes(sub_out, 4);
    uint32_t sub = 0;
    pith_status_t st = inst.subscribe(std::string(mem.string(topic, topic_len)), &sub);
    if (st == PITH_OK) mem.store<uint32_t>(sub_out, sub);
    return st;
  });
}

u32 Z_pithZ_topic_next(Z_pith_instance_t* c, u32 sub, u32 future_out) {
  return host_call(c, [&](Instance& inst) -> pith_status_t {
    GuestMemory mem(inst);
    mem.bytes(future_out, 4);
    uint32_t f = 0;
    pith_status_t st = inst.next_topic_message(sub, &f);
    if (st == PITH_OK) mem.store<uint32_t>(future_out, f);
    return st;
  });
}

u32 Z_pithZ_topic_unsubscribe(Z_pith_instance_t* c, u32 sub) {
  return host_call(c, [&](Instance& inst) -> pith_status_t { return inst.unsubscribe(sub); });
}

}  // extern "C"
