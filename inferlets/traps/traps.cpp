// traps: performs the fault named by argv[1], so tests can check each trap reason:
// oob, div, unreachable, indirect, conversion, exit3, badptr (a host call with a wild pointer).
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <pith/pith.hpp>

typedef int (*fn_t)(int);
static volatile int zero = 0;
static volatile uint32_t far_away = 0xfffffff0u;
static volatile float nan_value = __builtin_nanf("");
static fn_t volatile table_fn = nullptr;

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  const char* what = argv[1];
  if (!pith::send(std::string("doing ") + what)) return 1;
  if (!strcmp(what, "oob")) {
    volatile char* p = reinterpret_cast<volatile char*>(static_cast<uintptr_t>(far_away));
    return *p;
  }
  if (!strcmp(what, "div")) return 7 / zero;
  if (!strcmp(what, "unreachable")) __builtin_trap();  // the wasm unreachable instruction
  if (!strcmp(what, "abort")) abort();
  if (!strcmp(what, "indirect")) return table_fn(1);
  if (!strcmp(what, "conversion"))
    return static_cast<int>(__builtin_trunc(nan_value)) + __builtin_wasm_trunc_s_i32_f32(nan_value);
  if (!strcmp(what, "exit3")) exit(3);
  if (!strcmp(what, "badptr")) {
    pith_status_t s =
        pith_msg_send(reinterpret_cast<const void*>(static_cast<uintptr_t>(far_away)), 64);
    return pith::send(std::string("status ") + pith::status_name(s)) ? 0 : 1;
  }
  return 1;
}
