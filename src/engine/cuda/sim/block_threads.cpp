// CUDA host simulation: a block's threads as fibers (block_threads.h).
//
// On x86-64 a fiber switch saves the callee-saved registers on the stack and swaps stack
// pointers (a dozen instructions, no system call: a top-K block exchanges values within its
// warps for every logit it counts); elsewhere it is ucontext's swapcontext. The scheduler runs
// one warp at a time up to the block's next barrier, its lanes switching straight to each other
// at exchanges. Under AddressSanitizer every switch is announced
// (__sanitizer_start/finish_switch_fiber), so ASan follows the stacks.
#include "engine/cuda/sim/block_threads.h"

#include "engine/cuda/sim/launch.h"  // blockIdx, blockDim

#include <pthread.h>
#include <sys/mman.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#if defined(__SANITIZE_ADDRESS__)
#define PITH_SIM_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define PITH_SIM_ASAN 1
#endif
#endif
#if PITH_SIM_ASAN
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif

// The hand-written switch on x86-64; ucontext elsewhere (and with PITH_SIM_UCONTEXT, to test it).
#if defined(__x86_64__) && !defined(PITH_SIM_UCONTEXT)
#define PITH_SIM_ASM_SWITCH 1
#else
#include <ucontext.h>
#endif

constinit thread_local dim3 threadIdx;

#if PITH_SIM_ASM_SWITCH
// pith_sim_switch(&save_sp, next_sp): pushes the callee-saved registers, saves the stack
// pointer, loads `next_sp` and pops the same frame from there. The MXCSR and x87 control words
// are not switched: nothing in a kernel changes them.
// pith_sim_fiber_entry is where a new fiber's first switch returns to: it calls the function in
// r13 with the argument in r12 (both placed in the initial frame) and never returns.
extern "C" void pith_sim_switch(void** save_sp, void* next_sp);
extern "C" void pith_sim_fiber_entry();
asm(R"(
  .text
  .globl pith_sim_switch
  .type pith_sim_switch, @function
pith_sim_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size pith_sim_switch, .-pith_sim_switch
  .globl pith_sim_fiber_entry
  .type pith_sim_fiber_entry, @function
pith_sim_fiber_entry:
  movq %r12, %rdi
  callq *%r13
  ud2
  .size pith_sim_fiber_entry, .-pith_sim_fiber_entry
  .section .note.GNU-stack,"",@progbits
  .text
)");
#endif

namespace pith::cuda::sim {
namespace {

constexpr size_t kStackBytes = size_t{256} << 10;       // ASan's frames are several times larger
constexpr size_t kGuardBytes = size_t{4} << 10;         // an overflow faults instead of corrupting
constexpr size_t kEntryFramesBytes = size_t{16} << 10;  // fiber_main down to the last switch

enum class Wait { ready, barrier, warp, done };

// A GPU thread: its stack and where it waits.
struct Fiber {
  char* stack = nullptr;  // kGuardBytes of guard, then kStackBytes of stack
#if PITH_SIM_ASM_SWITCH
  void* sp = nullptr;
#else
  ucontext_t context;
#endif
  void* fake_stack = nullptr;  // ASan's fake frames while switched out
  Wait wait = Wait::ready;
  uint32_t index = 0;
  dim3 thread_idx;        // its threadIdx in the current block
  Fiber* next = nullptr;  // the lane after it in its warp's turn order (a ring)

  Fiber() = default;
  Fiber(const Fiber&) = delete;
  Fiber& operator=(const Fiber&) = delete;
  ~Fiber() {
    if (stack) munmap(stack, kGuardBytes + kStackBytes);
  }
  char* bottom() const {
    return stack + kGuardBytes;
  }
};

// The block being simulated on this host thread, and its fibers (kept for the next block).
struct Scheduler {
  std::vector<std::unique_ptr<Fiber>> fibers;
  uint32_t n = 0;
  bool descending = false;
  Fiber* running = nullptr;
  const std::function<void()>* main = nullptr;
#if PITH_SIM_ASM_SWITCH
  void* sp = nullptr;
#else
  ucontext_t context;
#endif
  void* fake_stack = nullptr;
  void* stack_bottom = nullptr;  // the host thread's stack, for ASan
  size_t stack_size = 0;
  uint32_t at_barrier = 0, done = 0;
  uint64_t block_serial = 0;  // blocks run on this host thread, this one included
  // Per warp: lanes waiting at its exchange, their offered values, and the values of the last
  // completed exchange (read by each lane after it resumes, before its next exchange).
  std::vector<uint32_t> arrived;
  std::vector<uint64_t> offered, completed;
};

// This host thread's scheduler (a plain pointer: no thread_local initialisation check on the
// paths every exchange takes).
constinit thread_local Scheduler* sched = nullptr;

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "CUDA simulation: kernel bug in block (%u,%u,%u) of a %u-thread block: %s\n",
               blockIdx.x, blockIdx.y, blockIdx.z, blockDim.x * blockDim.y * blockDim.z,
               what.c_str());
  std::abort();
}

// Leaves the running context (`from`, or the scheduler when null) for `to` (the scheduler when
// null); returns when something switches back. `finished`: `from` never runs again.
void switch_to(Fiber* from, Fiber* to, bool finished = false) {
  sched->running = to;
  if (to) threadIdx = to->thread_idx;
#if PITH_SIM_ASAN
  void** fake = finished ? nullptr : (from ? &from->fake_stack : &sched->fake_stack);
  __sanitizer_start_switch_fiber(fake, to ? to->bottom() : sched->stack_bottom,
                                 to ? kStackBytes : sched->stack_size);
#else
  (void)finished;
#endif
#if PITH_SIM_ASM_SWITCH
  pith_sim_switch(from ? &from->sp : &sched->sp, to ? to->sp : sched->sp);
#else
  swapcontext(from ? &from->context : &sched->context, to ? &to->context : &sched->context);
#endif
#if PITH_SIM_ASAN
  __sanitizer_finish_switch_fiber(from ? from->fake_stack : sched->fake_stack, nullptr, nullptr);
#endif
}

// The lane of f's warp to run after f: the next ready one in the block's order, or null.
Fiber* next_lane(const Fiber& f) {
  for (Fiber* next = f.next; next != &f; next = next->next)
    if (next->wait == Wait::ready) return next;
  return nullptr;
}

// f stops (waits or has returned): the next ready lane of its warp runs, else the scheduler.
void yield(Fiber& f, bool finished = false) {
  switch_to(&f, next_lane(f), finished);
}

void fiber_main(Fiber* f) {
#if PITH_SIM_ASAN
  __sanitizer_finish_switch_fiber(nullptr, nullptr, nullptr);
#endif
  (*sched->main)();
  f->wait = Wait::done;
  ++sched->done;
  yield(*f, true);
}

#if !PITH_SIM_ASM_SWITCH
void fiber_main_ucontext(unsigned hi, unsigned lo) {
  fiber_main(reinterpret_cast<Fiber*>(uintptr_t{hi} << 32 | lo));
}
#endif

// Prepares `f` to start fiber_main at its next resume.
void start(Fiber& f) {
  if (!f.stack) {
    void* p = mmap(nullptr, kGuardBytes + kStackBytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) fail("no memory for a thread's stack");
    f.stack = static_cast<char*>(p);
    if (mprotect(f.stack, kGuardBytes, PROT_NONE) != 0) fail("cannot protect a stack's guard page");
  }
#if PITH_SIM_ASAN
  // The previous thread's last frames (fiber_main's and the final switch's, at the top of the
  // stack) never returned: clear their poison. Everything the kernel called below them did.
  __asan_unpoison_memory_region(f.bottom() + kStackBytes - kEntryFramesBytes, kEntryFramesBytes);
#endif
  f.wait = Wait::ready;
#if PITH_SIM_ASM_SWITCH
  // The frame pith_sim_switch pops, below the return address: r15, r14, r13 (fiber_main), r12
  // (its argument), rbx, rbp. `ret` leaves the stack pointer at `top`, so it is 16-byte
  // aligned at pith_sim_fiber_entry's call, as the ABI requires.
  auto* top = reinterpret_cast<uint64_t*>(f.bottom() + kStackBytes);
  uint64_t* frame = top - 7;
  frame[0] = 0;                                        // r15
  frame[1] = 0;                                        // r14
  frame[2] = reinterpret_cast<uint64_t>(&fiber_main);  // r13
  frame[3] = reinterpret_cast<uint64_t>(&f);           // r12
  frame[4] = 0;                                        // rbx
  frame[5] = 0;                                        // rbp
  frame[6] = reinterpret_cast<uint64_t>(&pith_sim_fiber_entry);
  f.sp = frame;
#else
  getcontext(&f.context);
  f.context.uc_stack.ss_sp = f.bottom();
  f.context.uc_stack.ss_size = kStackBytes;
  f.context.uc_link = nullptr;
  const auto bits = reinterpret_cast<uintptr_t>(&f);
  makecontext(&f.context, reinterpret_cast<void (*)()>(&fiber_main_ucontext), 2,
              static_cast<unsigned>(bits >> 32), static_cast<unsigned>(bits));
#endif
}

const char* describe(Wait w) {
  switch (w) {
    case Wait::ready:
      return "running";
    case Wait::barrier:
      return "waits at __syncthreads";
    case Wait::warp:
      return "waits at a warp shuffle";
    case Wait::done:
      return "has returned";
  }
  return "?";
}

// Nobody can go on: name the first thread of each kind of wait.
[[noreturn]] void deadlock() {
  std::string what = "threads wait where others never arrive:";
  for (Wait w : {Wait::barrier, Wait::warp, Wait::done}) {
    uint32_t count = 0, first = 0;
    for (uint32_t i = 0; i < sched->n; ++i)
      if (sched->fibers[i]->wait == w && count++ == 0) first = i;
    if (count)
      what += " " + std::to_string(count) + " (thread " + std::to_string(first) + " first) " +
              describe(w) + ";";
  }
  fail(what);
}

Fiber& running() {
  if (!sched || !sched->running) {
    std::fprintf(stderr, "CUDA simulation: a device-side call outside a kernel\n");
    std::abort();
  }
  return *sched->running;
}

}  // namespace

void run_block_threads(const std::function<void()>& thread_main, bool descending) {
  const uint32_t n = blockDim.x * blockDim.y * blockDim.z;
  static thread_local Scheduler mine;
  sched = &mine;
  if (sched->running) fail("a kernel launched from a kernel");
#if PITH_SIM_ASAN
  if (!sched->stack_bottom) {
    pthread_attr_t attr;
    pthread_getattr_np(pthread_self(), &attr);
    pthread_attr_getstack(&attr, &sched->stack_bottom, &sched->stack_size);
    pthread_attr_destroy(&attr);
  }
#endif
  while (sched->fibers.size() < n) {
    sched->fibers.push_back(std::make_unique<Fiber>());
    sched->fibers.back()->index = static_cast<uint32_t>(sched->fibers.size() - 1);
  }
  const size_t slots = (sched->fibers.size() + kWarpLanes - 1) / kWarpLanes * kWarpLanes;
  sched->offered.resize(slots);
  sched->completed.resize(slots);
  sched->arrived.assign(slots / kWarpLanes, 0);
  sched->n = n;
  sched->descending = descending;
  sched->main = &thread_main;
  sched->at_barrier = sched->done = 0;
  ++sched->block_serial;
  for (uint32_t i = 0; i < n; ++i) {
    Fiber& f = *sched->fibers[i];
    start(f);
    f.thread_idx = dim3(i % blockDim.x, i / blockDim.x % blockDim.y, i / (blockDim.x * blockDim.y));
    const uint32_t first = i / kWarpLanes * kWarpLanes;
    const uint32_t lanes = std::min(n - first, kWarpLanes), lane = i - first;
    f.next = sched->fibers[first + (descending ? lane + lanes - 1 : lane + 1) % lanes].get();
  }
  // A warp's lanes pass control among themselves (yield) until none can go on; then the next
  // warp runs. Once all wait, they have all returned or all reached the barrier.
  const uint32_t warps = (n + kWarpLanes - 1) / kWarpLanes;
  for (;;) {
    for (uint32_t k = 0; k < warps; ++k) {
      const uint32_t w = descending ? warps - 1 - k : k;
      const uint32_t first = w * kWarpLanes, last = std::min(n, first + kWarpLanes) - 1;
      Fiber& lead = *sched->fibers[descending ? last : first];
      Fiber* go = lead.wait == Wait::ready ? &lead : next_lane(lead);
      if (go) switch_to(nullptr, go);
    }
    if (sched->done == n) break;
    if (sched->at_barrier != n) deadlock();
    sched->at_barrier = 0;
    for (uint32_t i = 0; i < n; ++i) sched->fibers[i]->wait = Wait::ready;
  }
  sched->main = nullptr;
}

void sync_block() {
  Fiber& f = running();
  f.wait = Wait::barrier;
  ++sched->at_barrier;
  yield(f);
}

void poison_shared(void* variable, size_t bytes, uint64_t& poisoned_in) {
  running();  // only a kernel's thread declares shared memory
  if (poisoned_in == sched->block_serial) return;
  std::memset(variable, 0xff, bytes);
  poisoned_in = sched->block_serial;
}

void misaligned_vector(const void* p, size_t bytes) {
  char what[160];
  std::snprintf(what, sizeof what,
                "thread (%u,%u,%u): a %zu-byte vector access at %p, not %zu-byte aligned (a "
                "misaligned address fault on the GPU)",
                threadIdx.x, threadIdx.y, threadIdx.z, bytes, p, bytes);
  fail(what);
}

const uint64_t* exchange_in_warp(uint32_t mask, uint64_t mine) {
  Fiber& f = running();
  if (mask != 0xffffffffu) fail("a warp shuffle with a partial mask");
  const uint32_t first = f.index / kWarpLanes * kWarpLanes, w = f.index / kWarpLanes;
  if (first + kWarpLanes > sched->n) fail("a warp shuffle in the block's partial last warp");
  sched->offered[f.index] = mine;
  if (++sched->arrived[w] < kWarpLanes) {
    f.wait = Wait::warp;
    yield(f);
  } else {  // the last lane completes the exchange and goes on
    sched->arrived[w] = 0;
    std::memcpy(&sched->completed[first], &sched->offered[first], kWarpLanes * sizeof(uint64_t));
    for (uint32_t l = first; l < first + kWarpLanes; ++l) sched->fibers[l]->wait = Wait::ready;
  }
  return &sched->completed[first];
}

}  // namespace pith::cuda::sim
