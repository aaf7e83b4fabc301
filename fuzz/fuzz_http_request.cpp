// libFuzzer target: the HTTP/1.1 server (server/http_server.h) on arbitrary bytes from a client,
// over a real loopback connection: request line and headers (Beast's parser with pith's header
// limit), body limits per target, Expect: 100-continue, pipelined keep-alive requests, target and
// query decoding, handler failures and chunked event streams. Every input must end with the
// server closing the connection (no hang), answering with an HTTP status line if it answers at
// all, and still accepting the next connection.
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cstdint>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>
#include <thread>

#include "server/http_server.h"

namespace {

namespace server = pith::server;
using server::http::status;

// What the echo route answers (built outside the coroutine, as the server's routes do: GCC 12
// miscompiles brace-init lists in coroutine frames, a double free under ASan).
nlohmann::json describe(const server::HttpExchange& ex) {
  return {{"method", std::string(ex.req.method_string())},
          {"path", ex.path},
          {"query", ex.query},
          {"content_type", ex.header("content-type")},
          {"body_bytes", ex.req.body().size()}};
}

// A handler that uses what routes use: decoded path and query, headers, the body, errors,
// streams, and an exception escaping mid-stream.
boost::asio::awaitable<void> handle(server::HttpExchange& ex) {
  if (ex.path == "/throw") throw std::runtime_error("handler failed");
  if (ex.path.rfind("/stream", 0) == 0) {
    ex.watch_hangup();
    if (!co_await ex.begin_stream("text/event-stream")) co_return;
    for (int i = 0; i < 3; ++i)
      if (!co_await ex.write_chunk("data: " + std::to_string(i) + "\n\n")) co_return;
    if (ex.query.count("fail")) throw std::runtime_error("failed mid-stream");
    co_await ex.end_stream();
    co_return;
  }
  if (ex.path == "/error") {
    const std::string message = ex.header("x-msg");
    const std::string param = ex.query.count("p") ? ex.query.at("p") : "";
    co_return co_await ex.error(status::bad_request, "invalid_request_error", message, param);
  }
  const nlohmann::json reply = describe(ex);
  co_await ex.respond_json(status::ok, reply);
}

struct Server {
  Server() {
    server::HttpLimits limits;
    limits.max_body_bytes = 4096;
    limits.max_upload_bytes = 65536;
    limits.is_upload = [](std::string_view target) { return target.rfind("/upload", 0) == 0; };
    limits.idle_timeout = std::chrono::seconds(2);
    http = std::make_unique<server::HttpServer>(io, limits, handle);
    http->listen("127.0.0.1", 0);
    thread = std::thread([this] { io.run(); });
  }
  boost::asio::io_context io;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> guard{
      io.get_executor()};
  std::unique_ptr<server::HttpServer> http;
  std::thread thread;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static Server* srv = new Server;  // lives for the whole run (the I/O thread never stops)
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(srv->http->port());
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  int fd = -1;
  // Hundreds of connections a second can run the loopback out of free ports (connections in
  // TIME_WAIT): that is the harness's limit, not the server's, so it waits and retries.
  for (int attempt = 0; fd < 0; ++attempt) {
    fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0 || connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
      const int err = errno;
      if (fd >= 0) close(fd);
      fd = -1;
      if (attempt == 200) {
        std::fprintf(stderr, "cannot connect to the server: %s\n", std::strerror(err));
        __builtin_trap();
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  // Closing with a reset leaves no TIME_WAIT behind on either end.
  linger reset{1, 0};
  setsockopt(fd, SOL_SOCKET, SO_LINGER, &reset, sizeof reset);
  timeval tv{10, 0};  // far above the server's 2 s idle timeout: hitting it is a hang
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  for (size_t at = 0; at < size;) {  // the server may answer and close before reading it all
    ssize_t n = send(fd, data + at, size - at, MSG_NOSIGNAL);
    if (n <= 0) break;
    at += static_cast<size_t>(n);
  }
  shutdown(fd, SHUT_WR);
  std::string reply;
  char buf[4096];
  for (;;) {
    ssize_t n = recv(fd, buf, sizeof buf, 0);
    if (n == 0) break;
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        std::fprintf(stderr, "the server neither answered nor closed within 10 s\n");
        __builtin_trap();
      }
      break;  // reset: the server closed with unread input, which is allowed
    }
    reply.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  if (!reply.empty() && reply.rfind("HTTP/1.", 0) != 0) {
    std::fprintf(stderr, "the server answered without a status line: %.200s\n", reply.c_str());
    __builtin_trap();
  }
  return 0;
}
