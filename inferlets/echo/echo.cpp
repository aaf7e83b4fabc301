// echo: the smallest useful inferlet. Sends each launch argument back, logs through stdout,
// counts launches in the key-value store, then echoes client messages until "quit" or until
// the client closes its side. Used by the runtime tests and `pith run-local`.
#include <stdio.h>

#include <pith/pith.hpp>

int main() {
  std::vector<std::string> args = pith::args();
  for (size_t i = 0; i < args.size(); ++i)
    if (!pith::send("arg " + std::to_string(i) + ": " + args[i])) return 1;
  printf("hello from instance %llu\n", static_cast<unsigned long long>(pith::instance_id()));
  fflush(stdout);

  auto count = pith::store_get("echo.launches");
  int n = count ? atoi(count->c_str()) : 0;
  if (!pith::store_set("echo.launches", std::to_string(n + 1))) return 1;

  if (args.size() > 1 && args[1] == "--no-wait") return 0;
  for (;;) {
    pith::Result<std::string> m = pith::receive();
    if (!m) {
      pith::log(std::string("receive ended: ") + pith::status_name(m.status()));
      break;
    }
    if (*m == "quit") break;
    if (!pith::send("echo: " + *m)) return 1;
  }
  return 0;
}
