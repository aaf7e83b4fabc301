#include "common/error.h"

#include <cstdio>
#include <cstdlib>

namespace pith {

void check_failed(const char* expr, const char* file, int line) {
  std::fprintf(stderr, "pith: internal check failed: %s (%s:%d)\n", expr, file, line);
  std::abort();
}

}  // namespace pith
