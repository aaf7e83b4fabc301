// pith's own implementation of the wasm2c runtime API (/usr/include/wasm-rt.h, wabt 1.0.32):
// the C symbols that wasm2c-generated modules call. Debian's libwasm-rt-impl.a is deliberately
// not linked: it leaks its 8 GiB reservation per freed memory and turns every SIGSEGV (host bugs
// included) into a Wasm trap.
//
// Linear memory: each memory reserves 8 GiB of address space PROT_NONE (4 GiB index range + 4 GiB
// of static offset), and makes only the current pages read-write, so the generated code needs no
// bounds checks (WASM_RT_MEMCHECK_SIGNAL_HANDLER=1); faults become traps in guest_execution.cpp.
// The reservation is returned in full by wasm_rt_free_memory. The per-instance cap comes from the
// current GuestExecution (instantiation runs on the instance's fiber).
//
// These symbols are exported from the pith executable (-Wl,--export-dynamic-symbol, see
// src/runtime/CMakeLists.txt) so dlopen'ed modules resolve them.
#include <sys/mman.h>
#include <wasm-rt.h>

#include <cstdarg>
#include <cstdlib>
#include <map>
#include <mutex>
#include <vector>

#include "runtime/guest_execution.h"

namespace {

constexpr uint64_t kPageSize = 65536;
constexpr uint64_t kReservation = 8ull << 30;

// Function-type registry: wasm_rt_register_func_type has no context parameter, so it is
// necessarily process-wide; it only maps signatures to stable small integers.
struct FuncTypeRegistry {
  std::mutex mu;
  std::map<std::vector<int>, uint32_t> ids;
};
FuncTypeRegistry& func_types() {
  static FuncTypeRegistry* r = new FuncTypeRegistry;  // never destroyed: modules may outlive
  return *r;                                          // static destruction order
}

// Marks runtime code called from guest code as host code for the signal handlers.
struct HostSection {
  pith::runtime::GuestExecution* exec;
  sig_atomic_t saved;
  HostSection() : exec(pith::runtime::current_execution()), saved(exec ? exec->in_host : 0) {
    if (exec) exec->in_host = 1;
  }
  ~HostSection() {
    if (exec) exec->in_host = saved;
  }
};

}  // namespace

extern "C" {

void wasm_rt_init(void) {
  pith::runtime::install_signal_handlers();
}
bool wasm_rt_is_initialized(void) {
  return true;
}
void wasm_rt_free(void) {}

void wasm_rt_trap(wasm_rt_trap_t code) {
  pith::runtime::GuestExecution* exec = pith::runtime::current_execution();
  if (!exec) abort();  // generated code running outside an instance: a host bug
  pith::runtime::raise_trap(*exec, static_cast<pith::runtime::TrapCode>(code));
}

const char* wasm_rt_strerror(wasm_rt_trap_t trap) {
  return pith::runtime::trap_text(static_cast<pith::runtime::TrapCode>(trap));
}

uint32_t wasm_rt_register_func_type(uint32_t params, uint32_t results, ...) {
  HostSection host;
  std::vector<int> sig;
  sig.reserve(params + results + 1);
  sig.push_back(static_cast<int>(params));
  va_list ap;
  va_start(ap, results);
  for (uint32_t i = 0; i < params + results; ++i) sig.push_back(va_arg(ap, int));
  va_end(ap);
  FuncTypeRegistry& r = func_types();
  std::lock_guard lock(r.mu);
  auto [it, inserted] = r.ids.try_emplace(std::move(sig), static_cast<uint32_t>(r.ids.size()));
  return it->second;
}

void wasm_rt_allocate_memory(wasm_rt_memory_t* mem, uint32_t initial_pages, uint32_t max_pages) {
  using pith::runtime::TrapCode;
  pith::runtime::GuestExecution* exec = pith::runtime::current_execution();
  if (!exec) abort();
  uint32_t cap = exec->memory_limit_pages ? exec->memory_limit_pages : 65536;
  if (max_pages > cap) max_pages = cap;
  mem->data = nullptr;
  mem->pages = mem->size = 0;
  mem->max_pages = max_pages;
  if (initial_pages > max_pages) pith::runtime::raise_trap(*exec, TrapCode::MemoryLimit);
  {
    HostSection host;
    void* base =
        mmap(nullptr, kReservation, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (base == MAP_FAILED) {
      exec->kill_pending = static_cast<int>(TrapCode::HostError);
    } else if (initial_pages &&
               mprotect(base, initial_pages * kPageSize, PROT_READ | PROT_WRITE) != 0) {
      munmap(base, kReservation);
      exec->kill_pending = static_cast<int>(TrapCode::HostError);
    } else {
      mem->data = static_cast<uint8_t*>(base);
      mem->pages = initial_pages;
      mem->size = static_cast<uint32_t>(initial_pages * kPageSize);
      exec->memory = mem;
    }
  }
  if (exec->kill_pending) {
    auto code = static_cast<TrapCode>(exec->kill_pending);
    pith::runtime::raise_trap(*exec, code);
  }
}

uint32_t wasm_rt_grow_memory(wasm_rt_memory_t* mem, uint32_t delta) {
  HostSection host;
  uint32_t old = mem->pages;
  if (delta == 0) return old;
  uint64_t wanted = static_cast<uint64_t>(old) + delta;
  if (wanted > mem->max_pages) {
    if (host.exec) host.exec->grow_refused = true;
    return UINT32_MAX;
  }
  if (mprotect(mem->data + old * kPageSize, delta * kPageSize, PROT_READ | PROT_WRITE) != 0)
    return UINT32_MAX;
  mem->pages = static_cast<uint32_t>(wanted);
  mem->size = static_cast<uint32_t>(wanted * kPageSize);  // 65536 pages wraps to 0 (4 GiB)
  return old;
}

void wasm_rt_free_memory(wasm_rt_memory_t* mem) {
  HostSection host;
  if (mem->data) munmap(mem->data, kReservation);
  if (host.exec && host.exec->memory == mem) host.exec->memory = nullptr;
  mem->data = nullptr;
  mem->pages = mem->size = 0;
}

void wasm_rt_allocate_funcref_table(wasm_rt_funcref_table_t* table, uint32_t elements,
                                    uint32_t max_elements) {
  HostSection host;
  table->size = elements;
  table->max_size = max_elements;
  table->data = elements
                    ? static_cast<wasm_rt_funcref_t*>(calloc(elements, sizeof(wasm_rt_funcref_t)))
                    : nullptr;
  if (elements && !table->data) {
    table->size = 0;
    if (host.exec) host.exec->kill_pending = static_cast<int>(pith::runtime::TrapCode::HostError);
  }
}

void wasm_rt_free_funcref_table(wasm_rt_funcref_table_t* table) {
  free(table->data);
  table->data = nullptr;
  table->size = 0;
}

void wasm_rt_allocate_externref_table(wasm_rt_externref_table_t* table, uint32_t elements,
                                      uint32_t max_elements) {
  HostSection host;
  table->size = elements;
  table->max_size = max_elements;
  table->data =
      elements ? static_cast<wasm_rt_externref_t*>(calloc(elements, sizeof(wasm_rt_externref_t)))
               : nullptr;
  if (elements && !table->data) table->size = 0;
}

void wasm_rt_free_externref_table(wasm_rt_externref_table_t* table) {
  free(table->data);
  table->data = nullptr;
  table->size = 0;
}

// Table growth is refused (clang-built inferlets never grow tables); the guest sees -1.
uint32_t wasm_rt_grow_funcref_table(wasm_rt_funcref_table_t*, uint32_t, wasm_rt_funcref_t) {
  return UINT32_MAX;
}
uint32_t wasm_rt_grow_externref_table(wasm_rt_externref_table_t*, uint32_t, wasm_rt_externref_t) {
  return UINT32_MAX;
}

}  // extern "C"
