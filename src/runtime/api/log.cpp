// Host side of abi.h "logging": pith_log becomes an instance log event.
#include "runtime/api/host_call.h"

using namespace pith::runtime;
using namespace pith::runtime::api;

extern "C" u32 Z_pithZ_log(Z_pith_instance_t* c, u32 level, u32 msg, u32 len) {
  return host_call(c, [&](Instance& inst) -> pith_status_t {
    if (level > PITH_LOG_ERROR) return static_cast<pith_status_t>(PITH_ERR_BAD_ARGUMENT);
    if (len > inst.limits().max_message_bytes || !inst.take_message_credit())
      return static_cast<pith_status_t>(PITH_ERR_LIMIT);
    inst.emit({InstanceEvent::Kind::Log, static_cast<int>(level),
               std::string(GuestMemory(inst).string(msg, len))});
    return static_cast<pith_status_t>(PITH_OK);
  });
}
