// hog: allocates and touches 1 MiB blocks without bound; when malloc fails (the instance's
// memory cap refused memory.grow) it reports how far it got and aborts.
#include <stdlib.h>
#include <string.h>

#include <pith/pith.hpp>

void* volatile head = nullptr;  // keeps every block reachable: the compiler cannot elide them

int main() {
  size_t mib = 0;
  for (;;) {
    void* p = malloc(1 << 20);
    if (!p) break;
    memset(p, 1, 1 << 20);
    *static_cast<void**>(p) = head;
    head = p;
    ++mib;
  }
  if (!pith::send("allocated " + std::to_string(mib) + " MiB")) return 1;
  abort();
}
