// deep: unbounded recursion through a function pointer (no tail call the compilers could turn
// into a loop): the native stack's guard page turns it into "call stack exhausted".
#include <pith/pith.hpp>

typedef unsigned (*fn_t)(unsigned);
extern fn_t volatile next_fn;
static unsigned descend(unsigned n) {
  return next_fn(n + 1) * 3 + n;
}
fn_t volatile next_fn = descend;

int main() {
  if (!pith::send("descending")) return 1;
  return static_cast<int>(next_fn(0));
}
