// Host side of abi.h "recurrent states of hybrid models": handle arrays and names are copied out
// of guest memory (bounds-checked) and routed to the instance's ModelSession.
#include "runtime/api/model_call.h"

using namespace pith::runtime;
using namespace pith::runtime::api;

extern "C" {

u32 Z_pithZ_state_alloc(Z_pith_instance_t* c, u32 queue, u32 n, u32 out) {
  return host_call(c, [&](Instance& inst) -> pith_status_t {
    check_count(n);
    GuestMemory mem(inst);
    mem.bytes(out, uint64_t{n} * 4);
    std::vector<uint32_t> handles;
    pith_status_t st = session_of(inst).alloc_states(queue, n, &handles);
    if (st != PITH_OK) return st;
    if (handles.size() != n) return PITH_ERR_INTERNAL;
    mem.store_u32s(out, handles);
    return PITH_OK;
  });
}

u32 Z_pithZ_state_dealloc(Z_pith_instance_t* c, u32 queue, u32 states, u32 n) {
  return host_call(c, [&](Instance& inst) -> pith_status_t {
    check_count(n);
    std::vector<uint32_t> handles;
    GuestMemory(inst).u32s(states, n, handles);
    return session_of(inst).dealloc_states(queue, handles);
  });
}

u32 Z_pithZ_state_copy(Z_pith_instance_t* c, u32 queue, u32 src, u32 dst) {
  return host_call(c, [&](Instance& inst) -> pith_status_t {
    return session_of(inst).copy_state(queue, src, dst);
  });
}

u32 Z_pithZ_queue_set_state(Z_pith_instance_t* c, u32 queue, u32 state) {
  return host_call(c, [&](Instance& inst) -> pith_status_t {
    return session_of(inst).set_queue_state(queue, state);
  });
}

u32 Z_pithZ_state_export(Z_pith_instance_t* c, u32 queue, u32 state, u32 name, u32 name_len) {
  return host_call(c, [&](Instance& inst) -> pith_status_t {
    return session_of(inst).export_state(queue, state, GuestMemory(inst).string(name, name_len));
  });
}

u32 Z_pithZ_state_unexport(Z_pith_instance_t* c, u32 queue, u32 name, u32 name_len) {
  return host_call(c, [&](Instance& inst) -> pith_status_t {
    return session_of(inst).unexport_state(queue, GuestMemory(inst).string(name, name_len));
  });
}

u32 Z_pithZ_state_import(Z_pith_instance_t* c, u32 queue, u32 name, u32 name_len, u32 out) {
  return host_call(c, [&](Instance& inst) -> pith_status_t {
    GuestMemory mem(inst);
    mem.bytes(out, 4);
    uint32_t state = 0;
    pith_status_t st = session_of(inst).import_state(queue, mem.string(name, name_len), &state);
    if (st == PITH_OK) mem.store<uint32_t>(out, state);
    return st;
  });
}

u32 Z_pithZ_prefix_match_state(Z_pith_instance_t* c, u32 queue, u32 tokens, u32 n, u32 pages,
                               u32 cap, u32 n_pages_out, u32 matched_out, u32 state_out,
                               u32 shared_out) {
  return host_call(c, [&](Instance& inst) -> pith_status_t {
    check_count(n);
    GuestMemory mem(inst);
    mem.bytes(n_pages_out, 4);
    mem.bytes(matched_out, 4);
    mem.bytes(state_out, 4);
    mem.bytes(shared_out, 4);
    mem.bytes(pages, uint64_t{cap} * 4);
    std::vector<uint32_t> handles;
    uint32_t matched = 0, state = 0, shared = 0;
    ModelSession& s = session_of(inst);
    pith_status_t st =
        s.prefix_match_state(queue, mem.u32s(tokens, n), &handles, &matched, &state, &shared);
    if (st != PITH_OK) return st;
    uint32_t k = static_cast<uint32_t>(handles.size());
    if (k > cap) {  // nothing half-imported: give the match back and say how much room it needs
      s.dealloc_kvpages(queue, handles);
      if (state) s.dealloc_states(queue, std::span<const uint32_t>(&state, 1));
      mem.store<uint32_t>(n_pages_out, k);
      return PITH_ERR_BUFFER_TOO_SMALL;
    }
    mem.store_u32s(pages, handles);
    mem.store<uint32_t>(n_pages_out, k);
    mem.store<uint32_t>(matched_out, matched);
    mem.store<uint32_t>(state_out, state);
    mem.store<uint32_t>(shared_out, shared);
    return PITH_OK;
  });
}

u32 Z_pithZ_prefix_insert_state(Z_pith_instance_t* c, u32 queue, u32 tokens, u32 n, u32 pages,
                                u32 n_pages, u32 state) {
  return host_call(c, [&](Instance& inst) -> pith_status_t {
    check_count(n);
    check_count(n_pages);
    GuestMemory mem(inst);
    return session_of(inst).prefix_insert_state(queue, mem.u32s(tokens, n),
                                                mem.u32s(pages, n_pages), state);
  });
}

}  // extern "C"
