#include "server/http_server.h"

#include <spdlog/spdlog.h>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

#include <limits>

#include "common/error.h"

namespace pith::server {

using asio::use_awaitable;

std::string url_decode(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (c == '%' && i + 2 < s.size() && std::isxdigit(static_cast<unsigned char>(s[i + 1])) &&
        std::isxdigit(static_cast<unsigned char>(s[i + 2]))) {
      out += static_cast<char>(std::stoi(std::string(s.substr(i + 1, 2)), nullptr, 16));
      i += 2;
    } else {
      out += c == '+' ? ' ' : c;
    }
  }
  return out;
}

HttpExchange::HttpExchange(beast::tcp_stream& stream, http::request<http::string_body>& r)
    : req(r), stream_(stream) {
  std::string_view target(req.target().data(), req.target().size());
  size_t q = target.find('?');
  path = url_decode(target.substr(0, q));
  if (q != std::string_view::npos) {
    std::string_view rest = target.substr(q + 1);
    while (!rest.empty()) {
      size_t amp = rest.find('&');
      std::string_view kv = rest.substr(0, amp);
      size_t eq = kv.find('=');
      query[url_decode(kv.substr(0, eq))] =
          eq == std::string_view::npos ? "" : url_decode(kv.substr(eq + 1));
      if (amp == std::string_view::npos) break;
      rest = rest.substr(amp + 1);
    }
  }
  keep_alive = req.keep_alive();
}

std::string HttpExchange::header(std::string_view name) const {
  auto it = req.find(beast::string_view(name.data(), name.size()));
  return it == req.end() ? std::string() : std::string(it->value());
}

asio::awaitable<void> HttpExchange::respond(
    http::status status, std::string body, std::string_view content_type,
    std::initializer_list<std::pair<std::string_view, std::string>> headers) {
  http::response<http::string_body> res{status, req.version()};
  res.set(http::field::server, "pith");
  res.set(http::field::content_type, beast::string_view(content_type.data(), content_type.size()));
  for (const auto& [k, v] : headers) res.set(beast::string_view(k.data(), k.size()), v);
  res.keep_alive(keep_alive);
  if (req.method() != http::verb::head)
    res.body() = std::move(body);
  else
    res.content_length(body.size());
  if (req.method() != http::verb::head) res.prepare_payload();
  responded_ = true;
  beast::error_code ec;
  if (req.method() == http::verb::head) {
    http::response_serializer<http::string_body> sr{res};
    co_await http::async_write_header(stream_, sr, asio::redirect_error(use_awaitable, ec));
  } else {
    co_await http::async_write(stream_, res, asio::redirect_error(use_awaitable, ec));
  }
  if (ec) {
    gone_ = true;
    keep_alive = false;
  }
}

asio::awaitable<void> HttpExchange::respond_json(http::status status, const nlohmann::json& body) {
  co_await respond(status, body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
}

asio::awaitable<void> HttpExchange::error(http::status status, std::string_view type,
                                          std::string_view message, std::string_view param) {
  nlohmann::json j = {{"error",
                       {{"message", message},
                        {"type", type},
                        {"param", param.empty() ? nlohmann::json(nullptr) : nlohmann::json(param)},
                        {"code", static_cast<int>(status)}}}};
  co_await respond_json(status, j);
}

asio::awaitable<bool> HttpExchange::begin_stream(std::string_view content_type) {
  http::response<http::empty_body> res{http::status::ok, req.version()};
  res.set(http::field::server, "pith");
  res.set(http::field::content_type, beast::string_view(content_type.data(), content_type.size()));
  res.set(http::field::cache_control, "no-cache");
  res.set("X-Accel-Buffering", "no");
  res.keep_alive(keep_alive);
  res.chunked(true);
  responded_ = true;
  http::response_serializer<http::empty_body> sr{res};
  beast::error_code ec;
  stream_.expires_never();
  co_await http::async_write_header(stream_, sr, asio::redirect_error(use_awaitable, ec));
  if (ec) gone_ = true, keep_alive = false;
  co_return !gone_;
}

void HttpExchange::watch_hangup() {
  hangup_ = std::make_shared<bool>(false);
  // Readable on a connection whose client sends nothing means EOF or reset. The handler only
  // touches the flag, so it may run after this exchange is gone.
  stream_.socket().async_wait(tcp::socket::wait_read,
                              [flag = hangup_](const beast::error_code& ec) {
                                if (ec != asio::error::operation_aborted) *flag = true;
                              });
}

asio::awaitable<bool> HttpExchange::write_chunk(std::string_view data) {
  if (client_gone()) co_return false;
  if (data.empty()) co_return true;  // an empty chunk would end the stream
  beast::error_code ec;
  co_await asio::async_write(stream_, http::make_chunk(asio::buffer(data.data(), data.size())),
                             asio::redirect_error(use_awaitable, ec));
  if (ec) gone_ = true, keep_alive = false;
  co_return !gone_;
}

asio::awaitable<void> HttpExchange::end_stream() {
  if (gone_) co_return;
  beast::error_code ec;
  co_await asio::async_write(stream_, http::make_chunk_last(),
                             asio::redirect_error(use_awaitable, ec));
  if (ec) gone_ = true, keep_alive = false;
}

HttpServer::HttpServer(asio::io_context& io, HttpLimits limits, HttpHandler handler)
    : io_(io), limits_(std::move(limits)), handler_(std::move(handler)) {}

HttpServer::~HttpServer() = default;

void HttpServer::listen(const std::string& host, uint16_t port) {
  beast::error_code ec;
  auto addr = asio::ip::make_address(host, ec);
  if (ec) {
    // A name (e.g. localhost): resolve it.
    tcp::resolver resolver(io_);
    auto results = resolver.resolve(host, std::to_string(port), ec);
    if (ec || results.empty()) fail("cannot resolve listen address '{}': {}", host, ec.message());
    addr = results.begin()->endpoint().address();
  }
  tcp::endpoint ep(addr, port);
  acceptor_ = std::make_unique<tcp::acceptor>(io_);
  acceptor_->open(ep.protocol(), ec);
  if (!ec) acceptor_->set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) acceptor_->bind(ep, ec);
  if (!ec) acceptor_->listen(asio::socket_base::max_listen_connections, ec);
  if (ec) fail("cannot listen on {}:{}: {}", host, port, ec.message());
  port_ = acceptor_->local_endpoint().port();
  asio::co_spawn(io_, accept_loop(), asio::detached);
}

void HttpServer::stop_accepting() {
  if (acceptor_) {
    beast::error_code ec;
    acceptor_->close(ec);
  }
}

asio::awaitable<void> HttpServer::accept_loop() {
  for (;;) {
    beast::error_code ec;
    tcp::socket socket = co_await acceptor_->async_accept(asio::redirect_error(use_awaitable, ec));
    if (ec) {
      if (!acceptor_->is_open()) co_return;
      if (ec == asio::error::no_descriptors || ec == asio::error::no_buffer_space) {
        spdlog::warn("accept: {} (backing off)", ec.message());
        asio::steady_timer t(io_, std::chrono::milliseconds(50));
        co_await t.async_wait(asio::redirect_error(use_awaitable, ec));
      }
      continue;
    }
    socket.set_option(tcp::no_delay(true), ec);
    asio::co_spawn(io_, session(std::move(socket)), asio::detached);
  }
}

namespace {

asio::awaitable<void> write_error(beast::tcp_stream& stream, unsigned version, http::status status,
                                  std::string_view type, std::string_view message) {
  http::response<http::string_body> res{status, version};
  res.set(http::field::server, "pith");
  res.set(http::field::content_type, "application/json");
  res.keep_alive(false);
  res.body() =
      nlohmann::json{
          {"error", {{"message", message}, {"type", type}, {"code", static_cast<int>(status)}}}}
          .dump();
  res.prepare_payload();
  beast::error_code ec;
  co_await http::async_write(stream, res, asio::redirect_error(use_awaitable, ec));
}

}  // namespace

asio::awaitable<void> HttpServer::session(tcp::socket socket) {
  ++*connections_;
  struct Count {
    std::shared_ptr<std::atomic<size_t>> n;
    ~Count() { --*n; }
  } count{connections_};
  beast::tcp_stream stream(std::move(socket));
  beast::flat_buffer buffer;
  for (;;) {
    http::request_parser<http::string_body> parser;
    parser.header_limit(64 << 10);
    // The real limit is set once the target is known. (Not boost::none: Beast 1.74 compares
    // the length against an empty optional and rejects every body.)
    parser.body_limit(std::numeric_limits<std::uint64_t>::max());
    beast::error_code ec;
    stream.expires_after(limits_.idle_timeout);
    co_await http::async_read_header(stream, buffer, parser,
                                     asio::redirect_error(use_awaitable, ec));
    if (ec) {
      if (ec != http::error::end_of_stream && ec != beast::error::timeout &&
          ec != asio::error::eof && ec != asio::error::connection_reset &&
          ec != asio::error::operation_aborted)
        co_await write_error(stream, 11, http::status::bad_request, "bad_request",
                             "malformed HTTP request: " + ec.message());
      break;
    }
    auto& header = parser.get();
    std::string_view target(header.target().data(), header.target().size());
    const size_t limit = limits_.is_upload && limits_.is_upload(target) ? limits_.max_upload_bytes
                                                                        : limits_.max_body_bytes;
    if (parser.content_length() && *parser.content_length() > limit) {
      co_await write_error(stream, header.version(), http::status::payload_too_large,
                           "payload_too_large",
                           fmt::format("request body of {} bytes exceeds the limit of {} bytes",
                                       *parser.content_length(), limit));
      break;
    }
    parser.body_limit(limit);
    if (beast::iequals(header[http::field::expect], "100-continue")) {
      http::response<http::empty_body> cont{http::status::continue_, header.version()};
      co_await http::async_write(stream, cont, asio::redirect_error(use_awaitable, ec));
      if (ec) break;
    }
    co_await http::async_read(stream, buffer, parser, asio::redirect_error(use_awaitable, ec));
    if (ec == http::error::body_limit) {
      co_await write_error(stream, header.version(), http::status::payload_too_large,
                           "payload_too_large",
                           fmt::format("request body exceeds the limit of {} bytes", limit));
      break;
    }
    if (ec) {
      if (ec != beast::error::timeout && ec != http::error::end_of_stream &&
          ec != asio::error::eof && ec != asio::error::connection_reset)
        co_await write_error(stream, header.version(), http::status::bad_request, "bad_request",
                             "malformed HTTP request: " + ec.message());
      break;
    }
    http::request<http::string_body> req = parser.release();
    HttpExchange ex(stream, req);
    stream.expires_never();  // handlers may take long (generation, event streams)
    std::string failure;     // co_await is not allowed inside a catch block
    try {
      co_await handler_(ex);
    } catch (const std::exception& e) {
      failure = e.what();
      spdlog::error("{} {}: {}", std::string(req.method_string()), std::string(req.target()),
                    failure);
    }
    if (!failure.empty() && ex.responded())
      break;  // mid-stream: the connection is in an unknown state
    if (!ex.responded()) {
      // A named string, not a ?: temporary in the co_await: GCC 12 freed that temporary's
      // storage wrongly (an invalid free whenever a handler threw; found by replaying
      // fuzz_http_request's seeds under the GCC sanitizer build).
      const std::string message = failure.empty() ? "no response" : failure;
      co_await ex.error(http::status::internal_server_error, "internal", message);
    }
    if (!ex.keep_alive || ex.client_gone()) break;
  }
  beast::error_code ec;
  stream.socket().shutdown(tcp::socket::shutdown_send, ec);
}

}  // namespace pith::server
