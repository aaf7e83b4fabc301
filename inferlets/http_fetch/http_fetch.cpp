// http_fetch: the HTTP part of the SDK for the runtime's HTTP tests
// (tests/unit/runtime_http_test.cpp).
//
//   http_fetch get URL          -> "status CODE" and "body BYTES", or "error STATUS-NAME"
//   http_fetch post URL BODY    -> the same for a POST
//   http_fetch all URL...       -> GETs every URL at once, waits with when_all, then one line per
//                                  URL in order: "I: status CODE BYTES" or "I: error NAME"
#include <pith/pith.hpp>

namespace {

bool report(const std::string& prefix, const pith::Result<pith::HttpResponse>& r) {
  if (!r) return static_cast<bool>(pith::send(prefix + "error " + pith::status_name(r.status())));
  return pith::send(prefix + "status " + std::to_string(r->status)) &&
         pith::send(prefix + "body " + r->body);
}

}  // namespace

int main() {
  std::vector<std::string> args = pith::args();
  if (args.size() >= 3 && args[1] == "get") {
    if (!report("", pith::http_get(args[2]))) return 1;
  } else if (args.size() >= 4 && args[1] == "post") {
    if (!report("", pith::http_post(args[2], args[3]))) return 1;
  } else if (args.size() >= 3 && args[1] == "all") {
    std::vector<pith::Future> fs;
    for (size_t i = 2; i < args.size(); ++i) fs.push_back(pith::http_get_async(args[i]));
    std::vector<pith::Status> st = pith::when_all(fs);
    for (size_t i = 0; i < fs.size(); ++i) {
      std::string p = std::to_string(i) + ": ";
      if (!st[i]) {
        if (!pith::send(p + "error " + pith::status_name(st[i].status()))) return 1;
        continue;
      }
      pith::Result<pith::HttpResponse> r = pith::http_response(fs[i]);  // ready: no wait
      if (!r) return 1;
      if (!pith::send(p + "status " + std::to_string(r->status) + " " +
                      std::to_string(r->body.size())))
        return 1;
    }
  } else {
    (void)pith::send("usage: http_fetch get URL | post URL BODY | all URL...");  // failing already
    return 2;
  }
  return 0;
}
