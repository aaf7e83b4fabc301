// overhead: measures the cost of control-layer calls as an inferlet sees them (guest clock,
// issue to completion): N pairs of kvpage_alloc(1) + kvpage_dealloc(1) on one queue.
// Sends "control_ns <mean ns per call>". Used by `pith bench overhead`.
#include <pith/abi.h>
#include <stdlib.h>

#include <pith/pith.hpp>

int main() {
  std::vector<std::string> args = pith::args();
  long n = args.size() > 1 ? atol(args[1].c_str()) : 100000;
  pith_model_t model;
  pith_queue_t queue;
  if (pith_model_open("", 0, &model) != PITH_OK || pith_queue_create(model, &queue) != PITH_OK) {
    (void)pith::send("error: no model");  // failing already: nothing to add
    return 1;
  }
  uint64_t t0 = pith::now_ns();
  for (long i = 0; i < n; ++i) {
    pith_kvpage_t page;
    if (pith_kvpage_alloc(queue, 1, &page) != PITH_OK ||
        pith_kvpage_dealloc(queue, &page, 1) != PITH_OK) {
      (void)pith::send("error: alloc failed");
      return 1;
    }
  }
  uint64_t dt = pith::now_ns() - t0;
  return pith::send("control_ns " + std::to_string(double(dt) / double(2 * n))) ? 0 : 1;
}
