// ServerClient: the `pith` CLI's HTTP client for a running `pith serve` (docs/server-api.md),
// on libcurl's easy interface: JSON requests, raw-body uploads, and Server-Sent Event streams
// read event by event. Every request sends `Authorization: Bearer KEY` when a key is set.
//
// Errors: a transport failure (connection refused, reset, DNS) throws pith::Error naming the
// server URL; an HTTP status >= 400 on the JSON helpers throws ServerError with the server's
// `{"error": {"message", "type"}}` body. One easy handle per request, so an object may be used
// from several threads at once (the `pith run` stdin forwarder posts while the main thread
// streams events).
#pragma once

#include <nlohmann/json.hpp>

#include <functional>
#include <string>
#include <vector>

#include "cli/sse_parser.h"
#include "common/error.h"

namespace pith::cli {

// The server answered with an error status.
class ServerError : public Error {
 public:
  ServerError(long status, std::string type, const std::string& message);
  long status() const { return status_; }
  const std::string& type() const { return type_; }

 private:
  long status_;
  std::string type_;
};

struct HttpRequest {
  std::string method = "GET";
  std::string path;  // "/v1/..." (with any query string)
  std::string body;
  std::string content_type;          // sent when non-empty
  std::vector<std::string> headers;  // extra "Name: value" lines
  long idle_timeout_s = 0;           // streams: give up when nothing arrives this long (0: never)
};

// Spelled out: designated initializers that skip members trip -Wmissing-field-initializers.
inline HttpRequest http_request(std::string method, std::string path, std::string body = {},
                                std::string content_type = {}) {
  HttpRequest r;
  r.method = std::move(method);
  r.path = std::move(path);
  r.body = std::move(body);
  r.content_type = std::move(content_type);
  return r;
}

struct HttpResponse {
  long status = 0;
  std::string body;
  std::string content_type;
};

class ServerClient {
 public:
  // `url` like http://127.0.0.1:8080 (a missing scheme means http://, a trailing / is dropped).
  ServerClient(std::string url, std::string api_key);

  const std::string& url() const { return url_; }

  // Any status comes back; only transport failures throw.
  HttpResponse perform(const HttpRequest& request) const;

  // JSON helpers: throw ServerError when the status is >= 400. An empty body (204) is null.
  nlohmann::json get(const std::string& path) const;
  nlohmann::json post(const std::string& path, const nlohmann::json& body) const;
  nlohmann::json post_bytes(const std::string& path, std::string bytes,
                            const std::string& content_type) const;
  nlohmann::json del(const std::string& path) const;
  // HEAD: true on 2xx, false on 404, ServerError otherwise.
  bool exists(const std::string& path) const;

  enum class StreamEnd {
    Closed,     // the server ended the stream
    Stopped,    // the handler returned false
    Cancelled,  // `cancelled` returned true
  };
  // Sends `request` and feeds its text/event-stream body to `on_event` as it arrives.
  // `cancelled` (may be empty) is polled about every 100 ms, also while nothing arrives.
  // Throws ServerError if the server answers >= 400 instead of a stream.
  StreamEnd stream(const HttpRequest& request, const SseHandler& on_event,
                   const std::function<bool()>& cancelled = {}) const;

  // The ServerError for a response with status >= 400 (parses the JSON error body).
  static ServerError error_of(const HttpResponse& response);

 private:
  std::string url_;
  std::string api_key_;
};

}  // namespace pith::cli
