// HttpClient: the host side of inferlet HTTP (abi.h "HTTP", paper Table 1 http_get/http_post).
// One worker thread drives every transfer through libcurl's multi interface, so a request never
// blocks a scheduler thread: the guest's fiber parks on its future and the worker completes it.
//
// Policy lives here, checked before a request is queued: the URL must be http or https and name
// a host on the allow list ("host" = any port, "host:port" = that port only, the scheme's default
// port when the URL names none). Redirects are never followed (a 3xx is returned as is), so a
// listed host cannot bounce a guest to an unlisted one. A transfer fails with PITH_ERR_TIMEOUT
// after timeout_ms and with PITH_ERR_LIMIT when the body exceeds max_response_bytes (never
// truncated). libcurl honours the usual proxy environment variables (http_proxy, no_proxy).
//
// Addresses: an allow-listed *name* that resolves to a loopback, private, link-local, shared
// (100.64/10), unique-local, multicast or unspecified address is refused when the connection is
// opened (a public name re-pointed at the server's own network: DNS rebinding, SSRF), unless
// allow_private (--inferlet-http-allow-private). An allow-listed address literal (127.0.0.1:8080,
// [::1]) names exactly what the operator chose and is always reached. Behind a proxy the check
// applies to the proxy's address.
//
// Cancellation: each request carries a `wanted` predicate (the instance still exists and the
// future was not dropped), polled by the worker; an unwanted transfer is aborted and its
// completion never runs. Destroying the client aborts every transfer the same way.
#pragma once

#include <pith/abi.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace pith::runtime {

struct HttpConfig {
  std::vector<std::string> allow;       // "host" or "host:port"; empty = HTTP disabled
  uint32_t timeout_ms = 10'000;         // the whole request, connect included
  size_t max_response_bytes = 4 << 20;  // a larger body fails the request
  size_t max_in_flight = 256;           // transfers run at once; later ones wait their turn
  bool allow_private = false;           // names may resolve to non-public addresses
};

// Whether an address (sockaddr_in or sockaddr_in6) is not on the public internet: loopback,
// RFC 1918 / unique-local, link-local, CGNAT shared space, multicast, unspecified, or an
// IPv4-mapped one of those. `what` (if given) names the kind ("loopback", "private", ...).
bool is_non_public_address(const void* sockaddr, const char** what = nullptr);

// Completes the guest's future (status, result bytes); called on the worker thread.
using HttpDone = std::function<void(pith_status_t status, std::string result)>;

struct HttpRequest {
  std::string method;  // "GET" or "POST"
  std::string url;
  std::string body;  // POST only
};

class HttpClient {
 public:
  // Throws pith::Error naming a malformed allow-list entry.
  explicit HttpClient(HttpConfig config);
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  const HttpConfig& config() const { return config_; }

  // PITH_OK if the URL may be fetched. Otherwise PITH_ERR_BAD_ARGUMENT (not a URL) or
  // PITH_ERR_NOT_ENABLED (scheme or host refused), with a line for the instance log in *why.
  pith_status_t check(std::string_view url, std::string* why) const;

  // Queues a checked request. Result bytes on success: uint32 HTTP status (little endian), then
  // the body; on failure a one-line description. `wanted` may be called from the worker thread
  // until the request ends; once it returns false the transfer is aborted and `done` is dropped.
  void start(HttpRequest request, std::function<bool()> wanted, HttpDone done);

  // Transfers queued or running (tests).
  size_t in_flight() const;

 private:
  struct Worker;
  HttpConfig config_;
  struct AllowEntry {
    std::string host;   // lower case, no trailing dot; IPv6 literals keep their brackets
    uint32_t port = 0;  // 0 = any
  };
  std::vector<AllowEntry> allow_;
  std::unique_ptr<Worker> worker_;
};

}  // namespace pith::runtime
