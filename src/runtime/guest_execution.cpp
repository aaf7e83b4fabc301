// Per-thread current guest, trap delivery and the fault / CPU-tick signal handlers. See
// guest_execution.h for the rules on which faults become guest traps.
#include "runtime/guest_execution.h"

#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <pthread.h>

#include <csignal>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <mutex>

#include "common/error.h"

namespace pith::runtime {

namespace {

// initial-exec: the handlers read these, so they must never need lazy TLS allocation.
__attribute__((tls_model("initial-exec"))) thread_local GuestExecution* t_current = nullptr;
__attribute__((tls_model("initial-exec"))) thread_local uint64_t t_tick_ns = 0;

// Linear-memory reservation: 4 GiB of addressable memory + 4 GiB for the largest static offset,
// so every wasm32 load/store either hits mapped pages or this PROT_NONE region.
constexpr uint64_t kReservation = 8ull << 30;

struct sigaction g_old_segv, g_old_bus;  // previous handlers, for chaining

void chain(int sig, siginfo_t* info, void* uctx) {
  struct sigaction* old = sig == SIGSEGV ? &g_old_segv : &g_old_bus;
  if ((old->sa_flags & SA_SIGINFO) && old->sa_sigaction) {
    old->sa_sigaction(sig, info, uctx);
    return;
  }
  if (old->sa_handler == SIG_IGN) return;
  if (old->sa_handler != SIG_DFL && old->sa_handler) {
    old->sa_handler(sig);
    return;
  }
  // Default action: restore it and return; the faulting instruction re-executes and the
  // process dies with the real signal (core dump), as it would without pith.
  signal(sig, SIG_DFL);
}

void on_fault(int sig, siginfo_t* info, void* uctx) {
  GuestExecution* exec = t_current;
  if (exec && !exec->in_host && !exec->interpreted) {
    auto addr = reinterpret_cast<uintptr_t>(info->si_addr);
    if (exec->memory && exec->memory->data) {
      auto base = reinterpret_cast<uintptr_t>(exec->memory->data);
      if (addr >= base && addr - base < kReservation) raise_trap(*exec, TrapCode::OutOfBounds);
    }
    if (addr >= exec->guard_lo && addr < exec->stack_lo)
      raise_trap(*exec, TrapCode::StackExhausted);
  }
  chain(sig, info, uctx);
}

void on_tick(int, siginfo_t*, void*) {
  GuestExecution* exec = t_current;
  if (!exec) return;
  exec->cpu_used_ns = exec->cpu_used_ns + t_tick_ns;
  if (exec->cpu_limit_ns && exec->cpu_used_ns >= exec->cpu_limit_ns && !exec->kill_pending)
    exec->kill_pending = static_cast<int>(TrapCode::CpuLimit);
  exec->slice_ns = exec->slice_ns + t_tick_ns;
  if (exec->interpreted) return;  // the interpreter loop polls kill_pending and slice_ns
  if (exec->kill_pending && !exec->in_host)
    raise_trap(*exec, static_cast<TrapCode>(exec->kill_pending));
  if (exec->slice_limit_ns && exec->slice_ns >= exec->slice_limit_ns && !exec->in_host &&
      exec->preempt) {
    exec->slice_ns = 0;
    // Unblock the tick for whatever runs next on this thread; sigreturn restores the mask when
    // this instance resumes and the handler returns into its guest code.
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGVTALRM);
    pthread_sigmask(SIG_UNBLOCK, &set, nullptr);
    exec->in_host = 1;  // while parked and while the scheduler switches, it is not in guest code
    exec->preempt(exec->owner);
    exec->in_host = 0;  // resumed: back into the interrupted guest code
  }
}

}  // namespace

const char* trap_text(TrapCode code) {
  switch (code) {
    case TrapCode::None:
      return "no trap";
    case TrapCode::OutOfBounds:
      return "out of bounds memory access";
    case TrapCode::IntOverflow:
      return "integer overflow";
    case TrapCode::DivByZero:
      return "integer divide by zero";
    case TrapCode::InvalidConversion:
      return "invalid conversion to integer";
    case TrapCode::Unreachable:
      return "unreachable executed";
    case TrapCode::CallIndirect:
      return "indirect call to a null or mistyped function";
    case TrapCode::UncaughtException:
      return "uncaught exception";
    case TrapCode::StackExhausted:
      return "call stack exhausted";
    case TrapCode::CpuLimit:
      return "cpu time limit";
    case TrapCode::Exit:
      return "exit";
    case TrapCode::Killed:
      return "killed by the host";
    case TrapCode::MemoryLimit:
      return "memory limit";
    case TrapCode::HostError:
      return "host error";
  }
  return "unknown trap";
}

GuestExecution* current_execution() {
  return t_current;
}
void set_current_execution(GuestExecution* exec) {
  t_current = exec;
}

void raise_trap(GuestExecution& exec, TrapCode code) {
  exec.in_host = 1;  // leaving guest code for good: a tick during the jump must not re-raise
  siglongjmp(exec.trap_jmp, static_cast<int>(code));
}

void install_signal_handlers() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction sa {};
    sa.sa_sigaction = on_fault;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    sigaddset(&sa.sa_mask, SIGVTALRM);
    PITH_CHECK(sigaction(SIGSEGV, &sa, &g_old_segv) == 0);
    PITH_CHECK(sigaction(SIGBUS, &sa, &g_old_bus) == 0);
    struct sigaction tick {};
    tick.sa_sigaction = on_tick;
    tick.sa_flags = SA_SIGINFO | SA_RESTART;  // on the fiber's stack: it may switch fibers
    sigemptyset(&tick.sa_mask);
    PITH_CHECK(sigaction(SIGVTALRM, &tick, nullptr) == 0);
  });
}

namespace {
constexpr size_t kAltStackSize = 64 * 1024;
}

AltSignalStack::AltSignalStack() {
  stack_t old{};
  if (sigaltstack(nullptr, &old) == 0 && !(old.ss_flags & SS_DISABLE) &&
      old.ss_size >= kAltStackSize)
    return;  // the thread has one already (e.g. from a sanitizer): keep it
  mem_ = mmap(nullptr, kAltStackSize, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  PITH_CHECK(mem_ != MAP_FAILED);
  stack_t ss{};
  ss.ss_sp = mem_;
  ss.ss_size = kAltStackSize;
  PITH_CHECK(sigaltstack(&ss, nullptr) == 0);
}

AltSignalStack::~AltSignalStack() {
  if (!mem_) return;
  stack_t ss{};
  ss.ss_flags = SS_DISABLE;
  sigaltstack(&ss, nullptr);
  munmap(mem_, kAltStackSize);
}

CpuTicker::CpuTicker(uint64_t tick_ns) {
  install_signal_handlers();
  t_tick_ns = tick_ns;
  sigevent sev{};
  sev.sigev_notify = SIGEV_THREAD_ID;
  sev.sigev_signo = SIGVTALRM;
  sev._sigev_un._tid = static_cast<pid_t>(syscall(SYS_gettid));
  timer_t t{};
  if (timer_create(CLOCK_THREAD_CPUTIME_ID, &sev, &t) != 0)
    fail("cannot create the CPU-time timer: {}", std::strerror(errno));
  timer_ = t;
  itimerspec its{};
  its.it_value.tv_sec = static_cast<time_t>(tick_ns / 1000000000ull);
  its.it_value.tv_nsec = static_cast<long>(tick_ns % 1000000000ull);
  its.it_interval = its.it_value;
  PITH_CHECK(timer_settime(t, 0, &its, nullptr) == 0);
  armed_ = true;
}

CpuTicker::~CpuTicker() {
  if (armed_) timer_delete(static_cast<timer_t>(timer_));
}

uint64_t cpu_tick_ns() {
  return t_tick_ns;
}

}  // namespace pith::runtime
