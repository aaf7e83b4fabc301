// Host side of abi.h "futures": poll never blocks; wait / wait_any park the instance's fiber
// (Instance::wait_any) so the scheduler thread runs other instances meanwhile.
#include "runtime/api/host_call.h"

using namespace pith::runtime;
using namespace pith::runtime::api;

namespace {
constexpr uint32_t kMaxWaitAny = 4096;
}

extern "C" {

u32 Z_pithZ_future_poll(Z_pith_instance_t* c, u32 f, u32 ready_out) {
  return host_call(c, [&](Instance& inst) -> pith_status_t {
    GuestMemory mem(inst);
    mem.bytes(ready_out, 4);
    bool ready = false;
    pith_status_t st = inst.poll_future(f, &ready);
    if (st == PITH_OK) mem.store<uint32_t>(ready_out, ready ? 1 : 0);
    return st;
  });
}

u32 Z_pithZ_future_wait(Z_pith_instance_t* c, u32 f) {
  return host_call(c, [&](Instance& inst) -> pith_status_t {
    uint32_t index = 0;
    return inst.wait_any({f}, &index);
  });
}

u32 Z_pithZ_future_wait_any(Z_pith_instance_t* c, u32 fs, u32 n, u32 index_out) {
  return host_call(c, [&](Instance& inst) -> pith_status_t {
    if (n == 0 || n > kMaxWaitAny) return static_cast<pith_status_t>(PITH_ERR_BAD_ARGUMENT);
    GuestMemory mem(inst);
    mem.bytes(index_out, 4);
    std::vector<uint32_t> ids = mem.u32s(fs, n);
    uint32_t index = 0;
    pith_status_t st = inst.wait_any(ids, &index);
    if (st != PITH_ERR_BAD_HANDLE && st != PITH_ERR_CANCELLED)
      mem.store<uint32_t>(index_out, index);
    return st;
  });
}

u32 Z_pithZ_future_result(Z_pith_instance_t* c, u32 f, u32 buf, u32 cap, u32 len) {
  return host_call(c, [&](Instance& inst) -> pith_status_t {
    const std::string* result = nullptr;
    pith_status_t op_status = PITH_OK;
    pith_status_t st = inst.future_result(f, &result, &op_status);
    if (st != PITH_OK) return st;
    return GuestMemory(inst).output(buf, cap, len, *result);
  });
}

u32 Z_pithZ_future_drop(Z_pith_instance_t* c, u32 f) {
  return host_call(c, [&](Instance& inst) -> pith_status_t { return inst.drop_future(f); });
}

}  // extern "C"
