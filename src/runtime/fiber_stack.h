// GuardedStack: the stack allocator for instance fibers (boost::context StackAllocator concept).
// Each stack is its own mmap: `size` usable bytes above a PROT_NONE guard of `guard` bytes, so a
// runaway recursion faults on the guard (a "call stack exhausted" trap, see guest_execution.h)
// instead of overwriting a neighbour. Pages are only resident once touched, so a 1 MiB stack of
// an idle instance costs a few KiB. The allocator reports the ranges to the instance through
// `bounds` so the fault handler can tell a guard hit from any other fault.
#pragma once

#include <boost/context/stack_context.hpp>

#include <cstddef>
#include <cstdint>

namespace pith::runtime {

struct StackBounds {
  uintptr_t guard_lo = 0, stack_lo = 0, stack_hi = 0;
};

class GuardedStack {
 public:
  GuardedStack(size_t size, size_t guard, StackBounds* bounds)
      : size_(size), guard_(guard), bounds_(bounds) {}
  boost::context::stack_context allocate();
  void deallocate(boost::context::stack_context& sc) noexcept;

 private:
  size_t size_, guard_;
  StackBounds* bounds_;
};

}  // namespace pith::runtime
