// pubsub: "sub TOPIC N" subscribes, announces "ready", then forwards N topic messages to its
// client; "pub TOPIC MSG" broadcasts MSG once; "any TOPIC N" waits N times on whichever comes
// first, a client message or a topic message (pith_future_wait_any), and reports which.
#include <stdlib.h>

#include <pith/pith.hpp>

int main() {
  std::vector<std::string> a = pith::args();
  if (a.size() < 3) return 2;
  if (a[1] == "pub") return pith::broadcast(a[2], a.size() > 3 ? a[3] : "") ? 0 : 1;
  pith::Result<pith::Subscription> sub = pith::Subscription::open(a[2]);
  if (!sub || !pith::send("ready")) return 1;
  int n = a.size() > 3 ? atoi(a[3].c_str()) : 1;
  if (a[1] == "any") {
    pith::Future client = pith::receive_async(), topic = sub->next_async();
    for (int i = 0; i < n; ++i) {
      int which = pith::wait_any({&client, &topic});
      if (which < 0) return 1;
      pith::Future& done = which == 0 ? client : topic;
      auto m = done.get();
      if (!m) return 1;
      if (!pith::send(std::string(which == 0 ? "client: " : "topic: ") + *m)) return 1;
      done = which == 0 ? pith::receive_async() : sub->next_async();
    }
    return 0;
  }
  for (int i = 0; i < n; ++i) {
    auto m = sub->next();
    if (!m || !pith::send("got: " + *m)) return 1;
  }
  return 0;
}
