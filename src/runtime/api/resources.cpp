// Host side of abi.h "resources: KV pages and embeddings": handle arrays are copied out of guest
// memory (bounds-checked) and routed to the instance's ModelSession, whose handles are private
// to the instance.
#include "runtime/api/model_call.h"

#include <fmt/format.h>

#include "runtime/shared_state.h"

using namespace pith::runtime;
using namespace pith::runtime::api;

namespace {

template <typename Alloc>
pith_status_t alloc_into(Instance& inst, u32 n, u32 out, Alloc alloc) {
  check_count(n);
  GuestMemory mem(inst);
  mem.bytes(out, uint64_t{n} * 4);
  // Per call, not per thread: the call may park the instance (KV pressure) while another
  // instance on this thread makes the same call.
  std::vector<uint32_t> handles;
  pith_status_t st = alloc(session_of(inst), &handles);
  if (st != PITH_OK) return st;
  if (handles.size() != n) return PITH_ERR_INTERNAL;
  mem.store_u32s(out, handles);
  return PITH_OK;
}

// With a shared state store, exports are recorded under this replica's name, so an import on
// another replica can say where the pages are. Best effort: the export itself is local and done.
void record_export(Instance& inst, std::string_view name, bool exported) {
  SharedState* shared = inst.services().shared;
  if (!shared) return;
  try {
    if (exported)
      shared->note_export(name);
    else
      shared->forget_export(name);
  } catch (const StoreFailure& e) {
    inst.emit({InstanceEvent::Kind::Log, PITH_LOG_WARN,
               fmt::format("export '{}' is not recorded in the shared state: {}", name, e.what())});
  }
}

void explain_remote_export(Instance& inst, std::string_view name) {
  SharedState* shared = inst.services().shared;
  if (!shared) return;
  std::optional<std::string> owner;
  try {
    owner = shared->export_owner(name);
  } catch (const StoreFailure&) {
    return;  // the import's own answer (NOT_FOUND) stands
  }
  if (owner && *owner != shared->replica())
    inst.emit({InstanceEvent::Kind::Log, PITH_LOG_WARN,
               fmt::format("import '{}': that export is held by replica '{}'; KV pages stay on the "
                           "replica that computed them (this is replica '{}')",
                           name, *owner, shared->replica())});
}

}  // namespace

extern "C" {

u32 Z_pithZ_kvpage_policy(Z_pith_instance_t* c, u32 model, u32 policy) {
  return host_call(c, [&](Instance& inst) -> pith_status_t {
    return session_of(inst).kv_policy(model, policy);
  });
}

u32 Z_pithZ_kvpage_alloc(Z_pith_instance_t* c, u32 queue, u32 n, u32 out) {
  return host_call(c, [&](Instance& inst) -> pith_status_t {
    return alloc_into(inst, n, out, [&](ModelSession& s, std::vector<uint32_t>* h) {
      return s.alloc_kvpages(queue, n, h);
    });
  });
}

u32 Z_pithZ_kvpage_dealloc(Z_pith_instance_t* c, u32 queue, u32 pages, u32 n) {
  return host_call(c, [&](Instance& inst) -> pith_status_t {
    check_count(n);
    std::vector<uint32_t> handles;  // per call: see alloc_into
    GuestMemory(inst).u32s(pages, n, handles);
    return session_of(inst).dealloc_kvpages(queue, handles);
  });
}

u32 Z_pithZ_emb_alloc(Z_pith_instance_t* c, u32 queue, u32 n, u32 out) {
  return host_call(c, [&](Instance& inst) -> pith_status_t {
    return alloc_into(inst, n, out, [&](ModelSession& s, std::vector<uint32_t>* h) {
      return s.alloc_embs(queue, n, h);
    });
  });
}

u32 Z_pithZ_emb_dealloc(Z_pith_instance_t* c, u32 queue, u32 embs, u32 n) {
  return host_call(c, [&](Instance& inst) -> pith_status_t {
    check_count(n);
    std::vector<uint32_t> handles;  // per call: see alloc_into
    GuestMemory(inst).u32s(embs, n, handles);
    return session_of(inst).dealloc_embs(queue, handles);
  });
}

u32 Z_pithZ_kvpage_copy(Z_pith_instance_t* c, u32 queue, u32 src, u32 dst, u32 src_offset,
                        u32 dst_offset, u32 count) {
  return host_call(c, [&](Instance& inst) -> pith_status_t {
    return session_of(inst).copy_kvpage(queue, src, dst, src_offset, dst_offset, count);
  });
}

u32 Z_pithZ_kvpage_mask(Z_pith_instance_t* c, u32 queue, u32 page, u32 mask, u32 len) {
  return host_call(c, [&](Instance& inst) -> pith_status_t {
    check_count(len);
    const uint8_t* m = GuestMemory(inst).bytes(mask, len);
    return session_of(inst).mask_kvpage(queue, page, std::span<const uint8_t>(m, len));
  });
}

u32 Z_pithZ_kvpage_export(Z_pith_instance_t* c, u32 queue, u32 pages, u32 n, u32 name,
                          u32 name_len) {
  return host_call(c, [&](Instance& inst) -> pith_status_t {
    check_count(n);
    GuestMemory mem(inst);
    std::string_view export_name = mem.string(name, name_len);
    pith_status_t st = session_of(inst).export_kvpages(queue, mem.u32s(pages, n), export_name);
    if (st == PITH_OK) record_export(inst, export_name, true);
    return st;
  });
}

u32 Z_pithZ_kvpage_unexport(Z_pith_instance_t* c, u32 queue, u32 name, u32 name_len) {
  return host_call(c, [&](Instance& inst) -> pith_status_t {
    std::string_view export_name = GuestMemory(inst).string(name, name_len);
    pith_status_t st = session_of(inst).unexport_kvpages(queue, export_name);
    if (st == PITH_OK) record_export(inst, export_name, false);
    return st;
  });
}

u32 Z_pithZ_kvpage_import(Z_pith_instance_t* c, u32 queue, u32 name, u32 name_len, u32 pages,
                          u32 cap, u32 n_out) {
  return host_call(c, [&](Instance& inst) -> pith_status_t {
    GuestMemory mem(inst);
    mem.bytes(n_out, 4);
    mem.bytes(pages, uint64_t{cap} * 4);
    std::vector<uint32_t> handles;
    std::string_view import_name = mem.string(name, name_len);
    pith_status_t st = session_of(inst).import_kvpages(queue, import_name, &handles);
    if (st == PITH_ERR_NOT_FOUND) explain_remote_export(inst, import_name);
    if (st != PITH_OK) return st;
    uint32_t n = static_cast<uint32_t>(handles.size());
    mem.store_u32s(pages, std::span<const uint32_t>(handles.data(), n < cap ? n : cap));
    mem.store<uint32_t>(n_out, n);
    return n > cap ? PITH_ERR_BUFFER_TOO_SMALL : PITH_OK;
  });
}

u32 Z_pithZ_prefix_match(Z_pith_instance_t* c, u32 queue, u32 tokens, u32 n, u32 pages, u32 cap,
                         u32 n_pages_out, u32 matched_out) {
  return host_call(c, [&](Instance& inst) -> pith_status_t {
    check_count(n);
    GuestMemory mem(inst);
    mem.bytes(n_pages_out, 4);
    mem.bytes(matched_out, 4);
    mem.bytes(pages, uint64_t{cap} * 4);
    std::vector<uint32_t> handles;
    uint32_t matched = 0;
    pith_status_t st =
        session_of(inst).prefix_match(queue, mem.u32s(tokens, n), &handles, &matched);
    if (st != PITH_OK) return st;
    uint32_t k = static_cast<uint32_t>(handles.size());
    mem.store_u32s(pages, std::span<const uint32_t>(handles.data(), k < cap ? k : cap));
    mem.store<uint32_t>(n_pages_out, k);
    mem.store<uint32_t>(matched_out, matched);
    return k > cap ? PITH_ERR_BUFFER_TOO_SMALL : PITH_OK;
  });
}

u32 Z_pithZ_prefix_insert(Z_pith_instance_t* c, u32 queue, u32 tokens, u32 n, u32 pages,
                          u32 n_pages) {
  return host_call(c, [&](Instance& inst) -> pith_status_t {
    check_count(n);
    check_count(n_pages);
    GuestMemory mem(inst);
    return session_of(inst).prefix_insert(queue, mem.u32s(tokens, n), mem.u32s(pages, n_pages));
  });
}

}  // extern "C"
