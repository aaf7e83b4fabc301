// Host side of abi.h "HTTP": not enabled yet. The server issue adds libcurl-backed requests that
// complete a future; until then every call validates its arguments and returns
// PITH_ERR_NOT_ENABLED, so guests can branch on it.
#include "runtime/api/host_call.h"

using namespace pith::runtime;
using namespace pith::runtime::api;

extern "C" {

u32 Z_pithZ_http_get(Z_pith_instance_t* c, u32 url, u32 url_len, u32 future_out) {
  return host_call(c, [&](Instance& inst) -> pith_status_t {
    GuestMemory mem(inst);
    mem.string(url, url_len);
    mem.bytes(future_out, 4);
    return static_cast<pith_status_t>(PITH_ERR_NOT_ENABLED);
  });
}

u32 Z_pithZ_http_post(Z_pith_instance_t* c, u32 url, u32 url_len, u32 body, u32 body_len,
                      u32 future_out) {
  return host_call(c, [&](Instance& inst) -> pith_status_t {
    GuestMemory mem(inst);
    mem.string(url, url_len);
    mem.string(body, body_len);
    mem.bytes(future_out, 4);
    return static_cast<pith_status_t>(PITH_ERR_NOT_ENABLED);
  });
}

}  // extern "C"
