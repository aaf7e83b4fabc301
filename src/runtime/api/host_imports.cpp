// host_import_table(): the address of every host import and wasm-rt symbol. The runtime calls it
// once (Runtime's constructor), which makes the static linker keep every api/*.cpp object and
// wasm_rt.cpp in any executable that uses the runtime; the symbols are then exported for
// dlopen'ed modules by -Wl,--export-dynamic-symbol (src/runtime/CMakeLists.txt).
#include "runtime/api/host_imports.h"

#include <wasm-rt.h>

#include <cstddef>

namespace pith::runtime::api {

size_t host_import_table(const void* const** table) {
  static const void* const kTable[] = {
#define PITH_ADDR_HOST(name, ret, params) reinterpret_cast<const void*>(&Z_pithZ_##name),
#define PITH_ADDR_WASI(name, ret, params) \
  reinterpret_cast<const void*>(&Z_wasi_snapshot_preview1Z_##name),
      PITH_HOST_IMPORTS(PITH_ADDR_HOST) PITH_WASI_IMPORTS(PITH_ADDR_WASI)
#undef PITH_ADDR_HOST
#undef PITH_ADDR_WASI
          reinterpret_cast<const void*>(&wasm_rt_trap),
      reinterpret_cast<const void*>(&wasm_rt_register_func_type),
      reinterpret_cast<const void*>(&wasm_rt_allocate_memory),
      reinterpret_cast<const void*>(&wasm_rt_grow_memory),
      reinterpret_cast<const void*>(&wasm_rt_free_memory),
      reinterpret_cast<const void*>(&wasm_rt_allocate_funcref_table),
      reinterpret_cast<const void*>(&wasm_rt_free_funcref_table),
      reinterpret_cast<const void*>(&wasm_rt_allocate_externref_table),
      reinterpret_cast<const void*>(&wasm_rt_free_externref_table),
      reinterpret_cast<const void*>(&wasm_rt_is_initialized),
  };
  *table = kTable;
  return sizeof(kTable) / sizeof(kTable[0]);
}

}  // namespace pith::runtime::api
