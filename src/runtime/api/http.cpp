// Host side of abi.h "HTTP": checks the URL against the server's policy (HttpClient::check, a
// refusal is logged to the instance with the host it named), creates the future and hands the
// request to the HttpClient's worker thread, which completes the future; the guest's fiber parks
// on it meanwhile. The request stays wanted only while its future is pending, so dropping the
// future or ending the instance aborts it.
#include <memory>

#include "runtime/api/host_call.h"
#include "runtime/http_client.h"

using namespace pith::runtime;
using namespace pith::runtime::api;

namespace {

pith_status_t start_request(Instance& inst, std::string method, std::string_view url,
                            std::string_view body, uint32_t future_out) {
  GuestMemory mem(inst);
  mem.bytes(future_out, 4);
  HttpClient* http = inst.services().http;
  std::string why;
  pith_status_t st = PITH_ERR_NOT_ENABLED;
  if (http)
    st = http->check(url, &why);
  else
    why =
        "http: not enabled in this server (allow hosts with --inferlet-http-allow HOST[,HOST...])";
  if (st != PITH_OK) {
    inst.emit({InstanceEvent::Kind::Log, PITH_LOG_WARN, std::move(why)});
    return st;
  }
  if (body.size() > inst.limits().max_message_bytes) return PITH_ERR_LIMIT;
  uint32_t id = 0;
  st = inst.new_future(&id);
  if (st != PITH_OK) return st;
  std::weak_ptr<Instance> weak = inst.weak_from_this();
  auto wanted = [weak, id] {
    auto i = weak.lock();
    return i && i->future_pending(id);
  };
  auto done = [weak, id](pith_status_t status, std::string result) {
    auto i = weak.lock();
    if (!i) return;
    // Refused when connecting (a listed name resolved to a non-public address): say why.
    if (status == PITH_ERR_NOT_ENABLED) i->emit({InstanceEvent::Kind::Log, PITH_LOG_WARN, result});
    i->complete_future(id, status, std::move(result));
  };
  http->start({std::move(method), std::string(url), std::string(body)}, std::move(wanted),
              std::move(done));
  mem.store<uint32_t>(future_out, id);
  return PITH_OK;
}

}  // namespace

extern "C" {

u32 Z_pithZ_http_get(Z_pith_instance_t* c, u32 url, u32 url_len, u32 future_out) {
  return host_call(c, [&](Instance& inst) -> pith_status_t {
    return start_request(inst, "GET", GuestMemory(inst).string(url, url_len), {}, future_out);
  });
}

u32 Z_pithZ_http_post(Z_pith_instance_t* c, u32 url, u32 url_len, u32 body, u32 body_len,
                      u32 future_out) {
  return host_call(c, [&](Instance& inst) -> pith_status_t {
    GuestMemory mem(inst);
    return start_request(inst, "POST", mem.string(url, url_len), mem.string(body, body_len),
                         future_out);
  });
}

}  // extern "C"
