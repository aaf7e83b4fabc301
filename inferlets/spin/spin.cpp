// spin: never ends and never calls the host; only the CPU-time limit (or a kill) stops it.
#include <pith/pith.hpp>

static volatile unsigned long counter = 0;

int main() {
  if (!pith::send("spinning")) return 1;
  for (;;) counter = counter + 1;
}
