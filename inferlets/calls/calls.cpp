// calls: measures the cost of a non-model host call from inside the guest. argv[1] = iterations.
// Sends one message "host_call_ns=<x> guest_call_ns=<y>": pith_future_poll on a bad handle (a
// full host round trip: boundary checks, lock, table lookup) against an indirect call to a guest
// function (the baseline of the same loop without leaving the guest).
#include <stdio.h>
#include <stdlib.h>

#include <pith/pith.hpp>

typedef unsigned (*fn_t)(unsigned);
static unsigned guest_fn(unsigned x) {
  return x + 1;
}
fn_t volatile fn = guest_fn;

int main(int argc, char** argv) {
  unsigned n = argc > 1 ? static_cast<unsigned>(atoi(argv[1])) : 1000000;
  uint32_t ready = 0;
  unsigned sink = 0;
  uint64_t t0 = pith::now_ns();
  for (unsigned i = 0; i < n; ++i) sink += static_cast<unsigned>(pith_future_poll(12345, &ready));
  uint64_t t1 = pith::now_ns();
  for (unsigned i = 0; i < n; ++i) sink += fn(i);
  uint64_t t2 = pith::now_ns();
  char buf[128];
  snprintf(buf, sizeof buf, "host_call_ns=%.2f guest_call_ns=%.2f sink=%u", double(t1 - t0) / n,
           double(t2 - t1) / n, sink);
  return pith::send(buf) ? 0 : 1;
}
