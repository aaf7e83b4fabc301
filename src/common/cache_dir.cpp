#include "common/cache_dir.h"

#include <unistd.h>

#include <cstdlib>

namespace pith {

std::string default_cache_root() {
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return std::string(x) + "/pith";
  if (const char* h = std::getenv("HOME"); h && *h) return std::string(h) + "/.cache/pith";
  return "/tmp/pith-cache-" + std::to_string(getuid());
}

}  // namespace pith
