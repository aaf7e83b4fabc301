// HttpServer: HTTP/1.1 on Boost.Beast with C++20 coroutines. One I/O thread serves every
// connection: each is a coroutine, so thousands of idle keep-alive connections and event
// streams cost a frame and a socket each, never a thread. Request bodies are bounded (per
// target, so uploads can be larger than JSON requests); oversized or malformed requests are
// answered with a JSON error and never reach a handler.
#pragma once

#include <utility>  // before asio: Boost 1.74's awaitable.hpp uses std::exchange

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http.hpp>
#include <nlohmann/json.hpp>

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>

namespace pith::server {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

// One request and the means to answer it: a whole response, or a chunked stream.
class HttpExchange {
 public:
  HttpExchange(beast::tcp_stream& stream, http::request<http::string_body>& req);

  http::request<http::string_body>& req;
  std::string path;                          // target without the query, percent-decoded
  std::map<std::string, std::string> query;  // decoded query parameters
  bool keep_alive = true;

  std::string header(std::string_view name) const;

  asio::awaitable<void> respond(
      http::status status, std::string body, std::string_view content_type = "application/json",
      std::initializer_list<std::pair<std::string_view, std::string>> headers = {});
  asio::awaitable<void> respond_json(http::status status, const nlohmann::json& body);
  // {"error": {"message", "type", "code"}} (docs/server-api.md).
  // The OpenAI error shape {"error": {"message", "type", "param", "code"}}; `param` names the
  // request field at fault (null when none).
  asio::awaitable<void> error(http::status status, std::string_view type, std::string_view message,
                              std::string_view param = {});

  // Chunked streaming (Server-Sent Events). write_chunk returns false once the client is gone.
  asio::awaitable<bool> begin_stream(std::string_view content_type);
  asio::awaitable<bool> write_chunk(std::string_view data);
  asio::awaitable<void> end_stream();

  bool responded() const { return responded_; }
  bool client_gone() const { return gone_ || (hangup_ && *hangup_); }
  // For streams the client never writes to: notices the client closing its side without
  // waiting for a write to fail (client_gone() turns true).
  void watch_hangup();

 private:
  beast::tcp_stream& stream_;
  bool responded_ = false;
  bool gone_ = false;
  std::shared_ptr<bool> hangup_;  // set by the watch_hangup handler (I/O thread)
};

using HttpHandler = std::function<asio::awaitable<void>(HttpExchange&)>;

struct HttpLimits {
  size_t max_body_bytes = 4 << 20;
  size_t max_upload_bytes = 64 << 20;  // for targets where is_upload() is true
  std::function<bool(std::string_view target)> is_upload;
  std::chrono::seconds idle_timeout{120};
};

class HttpServer {
 public:
  HttpServer(asio::io_context& io, HttpLimits limits, HttpHandler handler);
  ~HttpServer();

  // Binds and starts accepting. Throws pith::Error naming the address if it cannot bind.
  void listen(const std::string& host, uint16_t port);
  uint16_t port() const { return port_; }
  void stop_accepting();
  size_t connections() const { return connections_->load(); }

 private:
  asio::awaitable<void> accept_loop();
  asio::awaitable<void> session(tcp::socket socket);

  asio::io_context& io_;
  HttpLimits limits_;
  HttpHandler handler_;
  std::unique_ptr<tcp::acceptor> acceptor_;
  uint16_t port_ = 0;
  // Shared with each session: an idle keep-alive session still suspended when the server stops
  // is destroyed with the io_context, after this object (a proxy's pooled connections).
  std::shared_ptr<std::atomic<size_t>> connections_ = std::make_shared<std::atomic<size_t>>(0);
};

std::string url_decode(std::string_view s);

}  // namespace pith::server
