// Host side of abi.h "args and identity": launch arguments, instance id, time, yield.
#include <ctime>

#include "runtime/api/host_call.h"

using namespace pith::runtime;
using namespace pith::runtime::api;

extern "C" {

u32 Z_pithZ_arg_count(Z_pith_instance_t* c, u32 out) {
  return host_call(c, [&](Instance& inst) -> pith_status_t {
    GuestMemory(inst).store<uint32_t>(out, static_cast<uint32_t>(inst.args().size()));
    return PITH_OK;
  });
}

u32 Z_pithZ_arg_get(Z_pith_instance_t* c, u32 index, u32 buf, u32 cap, u32 len) {
  return host_call(c, [&](Instance& inst) -> pith_status_t {
    if (index >= inst.args().size()) return static_cast<pith_status_t>(PITH_ERR_NOT_FOUND);
    return GuestMemory(inst).output(buf, cap, len, inst.args()[index]);
  });
}

u32 Z_pithZ_instance_id(Z_pith_instance_t* c, u32 out) {
  return host_call(c, [&](Instance& inst) -> pith_status_t {
    GuestMemory(inst).store<uint64_t>(out, inst.id());
    return PITH_OK;
  });
}

u32 Z_pithZ_time_now(Z_pith_instance_t* c, u32 out) {
  return host_call(c, [&](Instance& inst) -> pith_status_t {
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    GuestMemory(inst).store<uint64_t>(out, uint64_t(ts.tv_sec) * 1000000000ull + ts.tv_nsec);
    return PITH_OK;
  });
}

u32 Z_pithZ_yield(Z_pith_instance_t* c) {
  return host_call(c, [&](Instance& inst) -> pith_status_t {
    inst.yield_now();
    return PITH_OK;
  });
}

}  // extern "C"
