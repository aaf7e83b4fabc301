// Host side of abi.h "persistent key-value store": the runtime-wide KvStore.
#include "runtime/api/host_call.h"
#include "runtime/kv_store.h"

using namespace pith::runtime;
using namespace pith::runtime::api;

extern "C" {

u32 Z_pithZ_store_get(Z_pith_instance_t* c, u32 key, u32 key_len, u32 buf, u32 cap, u32 len) {
  return host_call(c, [&](Instance& inst) -> pith_status_t {
    GuestMemory mem(inst);
    auto v = inst.services().store->get(mem.string(key, key_len));
    if (!v) return static_cast<pith_status_t>(PITH_ERR_NOT_FOUND);
    return mem.output(buf, cap, len, *v);
  });
}

u32 Z_pithZ_store_set(Z_pith_instance_t* c, u32 key, u32 key_len, u32 value, u32 value_len) {
  return host_call(c, [&](Instance& inst) -> pith_status_t {
    GuestMemory mem(inst);
    return inst.services().store->set(mem.string(key, key_len), mem.string(value, value_len));
  });
}

u32 Z_pithZ_store_delete(Z_pith_instance_t* c, u32 key, u32 key_len) {
  return host_call(c, [&](Instance& inst) -> pith_status_t {
    bool existed = inst.services().store->erase(GuestMemory(inst).string(key, key_len));
    return static_cast<pith_status_t>(existed ? PITH_OK : PITH_ERR_NOT_FOUND);
  });
}

u32 Z_pithZ_store_exists(Z_pith_instance_t* c, u32 key, u32 key_len, u32 out) {
  return host_call(c, [&](Instance& inst) -> pith_status_t {
    GuestMemory mem(inst);
    mem.bytes(out, 4);
    bool e = inst.services().store->contains(mem.string(key, key_len));
    mem.store<uint32_t>(out, e ? 1 : 0);
    return static_cast<pith_status_t>(PITH_OK);
  });
}

}  // extern "C"
