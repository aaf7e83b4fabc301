// Guard-paged fiber stacks. See fiber_stack.h.
#include "runtime/fiber_stack.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstring>

#include "common/error.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#endif

namespace pith::runtime {

boost::context::stack_context GuardedStack::allocate() {
  size_t total = size_ + guard_;
  void* base = mmap(nullptr, total, PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
  if (base == MAP_FAILED)
    fail("cannot map a {} KiB fiber stack: {}", total / 1024, std::strerror(errno));
  if (mprotect(base, guard_, PROT_NONE) != 0) {
    munmap(base, total);
    fail("cannot protect a fiber stack guard: {}", std::strerror(errno));
  }
  boost::context::stack_context sc;
  sc.size = size_;
  sc.sp = static_cast<char*>(base) + total;
  if (bounds_) {
    bounds_->guard_lo = reinterpret_cast<uintptr_t>(base);
    bounds_->stack_lo = bounds_->guard_lo + guard_;
    bounds_->stack_hi = bounds_->guard_lo + total;
  }
  return sc;
}

void GuardedStack::deallocate(boost::context::stack_context& sc) noexcept {
  char* top = static_cast<char*>(sc.sp);
#if defined(__SANITIZE_ADDRESS__)
  // Frames abandoned by a trap's longjmp leave poisoned shadow behind; clear it before the
  // addresses can be reused by another mapping.
  ASAN_UNPOISON_MEMORY_REGION(top - sc.size, sc.size);
#endif
  munmap(top - sc.size - guard_, sc.size + guard_);
}

}  // namespace pith::runtime
