// GuestExecution: the per-instance state that compiled guest code and the signal handlers need
// while an instance runs on a thread: where a trap jumps to (a sigjmp_buf on the instance's own
// fiber stack), the linear-memory reservation and fiber-stack guard that faults may hit, the
// "inside a host call" flag, and the CPU budget.
//
// wasm2c-generated code calls wasm_rt_trap() without any context, so the runtime keeps one
// thread-local pointer to the GuestExecution of the instance running on this thread. The
// scheduler sets it before resuming an instance's fiber and clears it after the fiber switches
// back, so the trap jump buffer and all per-guest state are effectively per fiber. (The 1.0.32
// stack-depth counter is not used: stack overflow is caught by the fiber stack's guard pages.)
//
// Signal handling (installed once per process, the only process-wide state of the runtime):
//  - SIGSEGV/SIGBUS: a fault whose address lies inside the *current* instance's linear-memory
//    reservation, while that instance runs guest code, becomes "out of bounds memory access"; one
//    inside its fiber stack's guard region becomes "call stack exhausted". Every other fault
//    (host bugs, other instances' memory, no current instance) goes to the previous handler /
//    default action: host crashes are never disguised as guest traps.
//  - SIGVTALRM from a per-thread CPU-time timer (CpuTicker): each tick charges the running
//    instance; past its limit the instance is killed, immediately if it is in guest code, at the
//    next host-call boundary if it is inside a host call (host code is never longjmp'd out of).
//    A tick in guest code after a full time slice preempts the instance (a fiber switch from the
//    handler, which therefore runs on the fiber's own stack, not the alternate one), so a
//    spinning guest cannot starve the others on its thread.
#pragma once

#include <wasm-rt.h>

#include <csetjmp>
#include <csignal>
#include <cstdint>
#include <string>

namespace pith::runtime {

// Why a guest stopped. 1..8 mirror wasm_rt_trap_t; the rest are host decisions.
enum class TrapCode : int {
  None = 0,
  OutOfBounds = WASM_RT_TRAP_OOB,
  IntOverflow = WASM_RT_TRAP_INT_OVERFLOW,
  DivByZero = WASM_RT_TRAP_DIV_BY_ZERO,
  InvalidConversion = WASM_RT_TRAP_INVALID_CONVERSION,
  Unreachable = WASM_RT_TRAP_UNREACHABLE,
  CallIndirect = WASM_RT_TRAP_CALL_INDIRECT,
  UncaughtException = WASM_RT_TRAP_UNCAUGHT_EXCEPTION,
  StackExhausted = WASM_RT_TRAP_EXHAUSTION,
  CpuLimit = 100,     // killed: CPU budget used up
  Exit = 101,         // proc_exit: a normal end with an exit code
  Killed = 102,       // killed by the host (client request, shutdown)
  MemoryLimit = 103,  // initial memory larger than the instance cap
  HostError = 104,    // host failure that cannot be reported as a status code
};

// Human-readable trap text, e.g. "out of bounds memory access".
const char* trap_text(TrapCode code);

struct GuestExecution {
  sigjmp_buf trap_jmp;  // valid while the instance's fiber is inside run_guarded()

  // Linear memory, registered by wasm_rt_allocate_memory during instantiation.
  wasm_rt_memory_t* memory = nullptr;
  uint32_t memory_limit_pages = 0;  // cap applied to the module's declared maximum
  bool grow_refused = false;        // a memory.grow was refused by the cap

  // Fiber stack: [stack_lo, stack_hi) usable, [guard_lo, stack_lo) PROT_NONE guard.
  uintptr_t guard_lo = 0, stack_lo = 0, stack_hi = 0;

  // 0 only while guest code runs on the fiber. Starts at 1: the scheduler's code between
  // setting the current execution and switching to the fiber must never be a trap target.
  volatile sig_atomic_t in_host = 1;
  // Interpreter tier: the guest is wabt's interpreter, i.e. host C++ code. Faults are never
  // traps, ticks never jump or switch; kills and preemption happen between instruction batches
  // and at host-call boundaries (which then return instead of jumping).
  bool interpreted = false;
  volatile sig_atomic_t kill_pending = 0;  // a TrapCode to raise at the next safe point
  volatile uint64_t cpu_used_ns = 0;       // charged by CpuTicker ticks
  uint64_t cpu_limit_ns = 0;               // 0 = unlimited

  // Preemption: after slice_limit_ns of CPU in one run, a tick that lands in guest code calls
  // preempt(owner) from the signal handler, which parks the fiber at the back of the ready queue
  // (safe: guest code holds no host locks and never is inside malloc).
  volatile uint64_t slice_ns = 0;
  uint64_t slice_limit_ns = 0;  // 0 = never preempt
  void (*preempt)(void* owner) = nullptr;
  void* owner = nullptr;
  int exit_code = 0;  // for TrapCode::Exit
};

// The instance running on this thread (nullptr in scheduler / host-only code).
GuestExecution* current_execution();
void set_current_execution(GuestExecution* exec);

// Jumps to the current instance's trap_jmp with `code`. Only call where no C++ object with a
// destructor is alive between here and the sigsetjmp (generated code, host-call boundaries).
[[noreturn]] void raise_trap(GuestExecution& exec, TrapCode code);

// Installs the SIGSEGV/SIGBUS/SIGVTALRM handlers once per process (idempotent, thread-safe).
void install_signal_handlers();

// Gives the calling thread an alternate signal stack for its lifetime (needed to handle a fiber
// stack overflow) unless it has one; removes and frees it again on destruction.
class AltSignalStack {
 public:
  AltSignalStack();
  ~AltSignalStack();
  AltSignalStack(const AltSignalStack&) = delete;
  AltSignalStack& operator=(const AltSignalStack&) = delete;

 private:
  void* mem_ = nullptr;
};

// A per-thread CPU-time interval timer delivering SIGVTALRM to its own thread every `tick_ns`
// of that thread's CPU time. Create it on the thread that runs guests.
class CpuTicker {
 public:
  explicit CpuTicker(uint64_t tick_ns);
  ~CpuTicker();
  CpuTicker(const CpuTicker&) = delete;
  CpuTicker& operator=(const CpuTicker&) = delete;

 private:
  void* timer_ = nullptr;  // timer_t
  bool armed_ = false;
};

// The tick length CpuTicker charges per signal (set by the first ticker; default 10 ms).
uint64_t cpu_tick_ns();

}  // namespace pith::runtime
