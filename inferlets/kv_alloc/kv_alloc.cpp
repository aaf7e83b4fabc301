// kv_alloc: holds KV pages on request, for contention and quota tests.
// Allocates argv[1] pages, sends "ok <n>", then for each message "alloc K" allocates K more
// and answers "ok <total>" or "error: <status>", "free K" gives back the last K ("ok <total>"),
// "failfast" makes allocations fail at once instead of waiting ("ok failfast"); "quit" ends it.
#include <stdlib.h>

#include <pith/pith.hpp>

int main() {
  std::vector<std::string> args = pith::args();
  auto model = pith::Model::open("");
  if (!model) return (void)pith::send("error: no model"), 1;  // failing already: nothing to add
  auto queue = pith::Queue::create(*model);
  if (!queue) return (void)pith::send("error: no queue"), 1;
  std::vector<pith_kvpage_t> held;
  auto alloc = [&](uint32_t n) {
    auto pages = queue->alloc_kvpages(n);
    if (!pages) return pith::send(std::string("error: ") + pith::status_name(pages.status()));
    held.insert(held.end(), pages->begin(), pages->end());
    return pith::send("ok " + std::to_string(held.size()));
  };
  if (!alloc(static_cast<uint32_t>(args.size() > 1 ? atoi(args[1].c_str()) : 1))) return 1;
  for (;;) {
    pith::Result<std::string> m = pith::receive();
    if (!m || *m == "quit") break;
    if (m->rfind("alloc ", 0) == 0 && !alloc(static_cast<uint32_t>(atoi(m->c_str() + 6)))) return 1;
    if (m->rfind("free ", 0) == 0) {
      size_t k = std::min(held.size(), static_cast<size_t>(atoi(m->c_str() + 5)));
      std::vector<pith_kvpage_t> last(held.end() - static_cast<long>(k), held.end());
      pith::Status s = queue->dealloc_kvpages(last);
      if (s) held.resize(held.size() - k);
      if (!pith::send(s ? "ok " + std::to_string(held.size())
                        : std::string("error: ") + pith::status_name(s.status())))
        return 1;
    }
    if (*m == "failfast" && !pith::send(model->set_kv_fail_fast(true) ? "ok failfast" : "error"))
      return 1;
  }
  return 0;
}
