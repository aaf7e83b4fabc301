// The host side of every import: host_call() is the boundary every Z_pithZ_* / WASI function
// goes through, and GuestMemory checks every guest pointer.
//
// host_call(ctx, body):
//  1. at entry, raises a pending kill (CPU limit, kill request) and refuses to run host code with
//     less than 64 KiB of fiber stack left ("call stack exhausted"): no C++ object is alive yet,
//     so the trap's siglongjmp is safe (interpreter tier: see end_guest);
//  2. marks the instance "in host" (faults and CPU ticks then never longjmp out of host code);
//  3. runs body; a GuestError becomes its status code, a StoreFailure its status with the message
//     logged to the instance, any other exception PITH_ERR_INTERNAL with the message logged;
//  4. at exit, raises a kill that arrived meanwhile (e.g. while parked in future_wait).
#pragma once

#include <pith/abi.h>
#include <wasm-rt.h>

#include <cstdint>
#include <cstring>
#include <exception>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/api/host_imports.h"
#include "runtime/guest_execution.h"
#include "runtime/instance.h"
#include "runtime/kv_store.h"

namespace pith::runtime::api {

// Thrown by host code to return a status to the guest.
struct GuestError {
  pith_status_t status;
};

inline Instance& instance_of(void* ctx) {
  return *static_cast<Instance*>(ctx);
}

template <typename Body>
__attribute__((noinline)) uint32_t run_host_body(Instance& inst, Body& body) {
  try {
    return static_cast<uint32_t>(body(inst));
  } catch (const GuestError& e) {
    return static_cast<uint32_t>(e.status);
  } catch (const StoreFailure& e) {  // the shared state store is down or refused
    inst.emit({InstanceEvent::Kind::Log, PITH_LOG_WARN, e.what()});
    return static_cast<uint32_t>(e.status);
  } catch (const std::exception& e) {
    inst.emit({InstanceEvent::Kind::Log, PITH_LOG_ERROR, std::string("host error: ") + e.what()});
    return static_cast<uint32_t>(PITH_ERR_INTERNAL);
  }
}

// Ends the guest with `code`: a jump to the trap boundary in the native tier; in the interpreter
// tier the code is left in kill_pending and the interpreter adapter turns it into a trap when
// the host function returns (its return value is then never seen by the guest).
inline void end_guest(GuestExecution& ex, TrapCode code) {
  if (!ex.kill_pending) ex.kill_pending = static_cast<int>(code);
  if (!ex.interpreted) raise_trap(ex, static_cast<TrapCode>(ex.kill_pending));
}

template <typename Body>
inline uint32_t host_call(void* ctx, Body body) {
  Instance& inst = instance_of(ctx);
  GuestExecution& ex = inst.exec();
  if (ex.kill_pending) {
    end_guest(ex, static_cast<TrapCode>(ex.kill_pending));
    return PITH_ERR_CANCELLED;
  }
  auto sp = reinterpret_cast<uintptr_t>(__builtin_frame_address(0));
  if (sp - ex.stack_lo < 64 * 1024) {
    end_guest(ex, TrapCode::StackExhausted);
    return PITH_ERR_CANCELLED;
  }
  sig_atomic_t was_in_host = ex.in_host;  // the interpreter tier runs "in host" throughout
  ex.in_host = 1;
  uint32_t r = run_host_body(inst, body);
  ex.in_host = was_in_host;
  if (ex.kill_pending) end_guest(ex, static_cast<TrapCode>(ex.kill_pending));
  return r;
}

// Bounds-checked access to an instance's linear memory. Every pointer/length pair from the guest
// goes through here; a range outside memory throws GuestError{PITH_ERR_BAD_POINTER}.
class GuestMemory {
 public:
  explicit GuestMemory(Instance& inst) : mem_(inst.exec().memory) {
    if (!mem_) throw GuestError{PITH_ERR_INTERNAL};
  }

  uint8_t* bytes(uint32_t ptr, uint64_t len) const {
    uint64_t size = mem_->pages == 65536 ? (4ull << 30) : mem_->size;
    if (static_cast<uint64_t>(ptr) + len > size) throw GuestError{PITH_ERR_BAD_POINTER};
    return mem_->data + ptr;
  }
  std::string_view string(uint32_t ptr, uint32_t len) const {
    return {reinterpret_cast<const char*>(bytes(ptr, len)), len};
  }
  template <typename T>
  T load(uint32_t ptr) const {
    T v;
    std::memcpy(&v, bytes(ptr, sizeof(T)), sizeof(T));
    return v;
  }
  template <typename T>
  void store(uint32_t ptr, T v) const {
    std::memcpy(bytes(ptr, sizeof(T)), &v, sizeof(T));
  }
  std::vector<uint32_t> u32s(uint32_t ptr, uint32_t n) const {
    std::vector<uint32_t> v;
    u32s(ptr, n, v);
    return v;
  }
  // The same into `out`, keeping its capacity (per-step calls reuse one vector).
  void u32s(uint32_t ptr, uint32_t n, std::vector<uint32_t>& out) const {
    const uint8_t* p = bytes(ptr, uint64_t{n} * 4);  // validate before allocating
    out.resize(n);
    if (n) std::memcpy(out.data(), p, uint64_t{n} * 4);
  }
  void store_u32s(uint32_t ptr, std::span<const uint32_t> v) const {
    if (!v.empty()) std::memcpy(bytes(ptr, v.size() * 4ull), v.data(), v.size() * 4ull);
  }
  // The (buf, cap, *len) output convention of abi.h.
  pith_status_t output(uint32_t buf, uint32_t cap, uint32_t len_ptr, std::string_view data) const {
    uint8_t* lenp = bytes(len_ptr, 4);
    uint32_t n = static_cast<uint32_t>(data.size());
    uint32_t w = n < cap ? n : cap;
    if (w) std::memcpy(bytes(buf, w), data.data(), w);
    std::memcpy(lenp, &n, 4);
    return n > cap ? PITH_ERR_BUFFER_TOO_SMALL : PITH_OK;
  }

 private:
  wasm_rt_memory_t* mem_;
};

}  // namespace pith::runtime::api
