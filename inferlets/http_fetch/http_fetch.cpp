// http_fetch: the HTTP part of the SDK for the runtime's HTTP tests (tests/unit/runtime_http_test.cpp).
//
//   http_fetch get URL          -> "status CODE" and "body BYTES", or "error STATUS-NAME"
//   http_fetch post URL BODY    -> the same for a POST
//   http_fetch all URL...       -> GETs every URL at once, waits with when_all, then one line per
//                                  URL in order: "I: status CODE BYTES" or "I: error NAME"
#include <pith/pith.hpp>

namespace {

void report(const std::string& prefix, const pith::Result<pith::HttpResponse>& r) {
  if (!r) {
    pith::send(prefix + "error " + pith::status_name(r.status()));
    return;
  }
  pith::send(prefix + "status " + std::to_string(r->status));
  pith::send(prefix + "body " + r->body);
}

}  // namespace

int main() {
  std::vector<std::string> args = pith::args();
  if (args.size() >= 3 && args[1] == "get") {
    report("", pith::http_get(args[2]));
  } else if (args.size() >= 4 && args[1] == "post") {
    report("", pith::http_post(args[2], args[3]));
  } else if (args.size() >= 3 && args[1] == "all") {
    std::vector<pith::Future> fs;
    for (size_t i = 2; i < args.size(); ++i) fs.push_back(pith::http_get_async(args[i]));
    std::vector<pith_status_t> st = pith::when_all(fs);
    for (size_t i = 0; i < fs.size(); ++i) {
      std::string p = std::to_string(i) + ": ";
      if (st[i] != PITH_OK) {
        pith::send(p + "error " + pith::status_name(st[i]));
        continue;
      }
      pith::Result<pith::HttpResponse> r = pith::http_response(fs[i]);  // ready: no wait
      pith::send(p + "status " + std::to_string(r->status) + " " + std::to_string(r->body.size()));
    }
  } else {
    pith::send("usage: http_fetch get URL | post URL BODY | all URL...");
    return 2;
  }
  return 0;
}
