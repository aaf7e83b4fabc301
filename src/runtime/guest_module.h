// GuestModule: a program in one execution tier, able to run an instance of itself to the end on
// the calling fiber. Two tiers implement it:
//  - NativeModule (native_module.h): wasm2c + cc shared object, ~1.2-1.3x native speed; built in
//    the background at upload (seconds for a large module).
//  - InterpModule (interp_module.h): wabt's interpreter, ready in milliseconds, much slower; the
//    cold tier that serves launches while the native object is still being built.
// Program picks the tier per launch; Instance only sees this interface.
#pragma once

#include "runtime/guest_execution.h"

namespace pith::runtime {

class Instance;

class GuestModule {
 public:
  virtual ~GuestModule() = default;
  virtual const char* tier() const = 0;  // "native" or "interpreter"
  // Instantiates the module for `instance`, runs its _start export and frees the module
  // instance again. Returns how the guest ended (kNone: _start returned). Runs on the
  // instance's fiber with instance.exec() as the thread's current execution.
  virtual TrapCode run(Instance& instance) const = 0;
};

}  // namespace pith::runtime
