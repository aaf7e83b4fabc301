// InterpModule: the cold tier. A program is parsed and validated by wabt's interpreter
// (libwabt.a, Debian package wabt) in milliseconds, so the first launches of a new program start
// at once while the native tier builds in the background (see program.h and docs/runtime.md).
//
// Every launch gets its own interp::Store (module instance, memory, tables), freed at the end:
// nothing is shared between instances but the parsed, immutable ModuleDesc. Host imports are the
// same extern "C" functions as in the native tier, called through typed adapters generated from
// api/host_imports.h; a shadow wasm_rt_memory_t describes the interpreter's memory to them.
//
// Limits: linear memory is capped by rewriting the module's memory maximum; the guest runs in
// batches of instructions, and between batches the loop honours kill requests, the CPU limit
// (charged by the same per-thread ticker) and time-slice preemption (yield to the scheduler).
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "runtime/guest_module.h"

namespace pith::runtime {

class InterpModule final : public GuestModule {
 public:
  // Parses and validates the module; throws pith::Error naming the problem (unknown import,
  // wrong import signature, no _start, invalid binary).
  static std::shared_ptr<InterpModule> load(std::string_view wasm);
  ~InterpModule() override;

  const char* tier() const override { return "interpreter"; }
  TrapCode run(Instance& instance) const override;

 private:
  InterpModule();
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace pith::runtime
