// TinyHttpServer: a small blocking HTTP/1.1 server on 127.0.0.1 (ephemeral port) for tests that
// need a real peer: one accept thread, one thread per connection, one request per connection.
//
//   /hello          200 "hello"
//   /echo           201, body = "<content-type>|<request body>"
//   /status/N       status N, body "status N"
//   /slow/MS        waits MS ms, then 200 "slow"
//   /big/N          200 with N bytes 'x' and a Content-Length
//   /chunked/N      200 with N bytes 'y', chunked (no length known up front)
//   /redirect       302 to /hello
//   /hang           never answers; counts the connection in hang_closed() once the client closes it
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace pith::test {

class TinyHttpServer {
 public:
  TinyHttpServer() {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    ::setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = 0;
    if (::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(fd_, 64) != 0)
      std::abort();
    socklen_t len = sizeof a;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    accept_thread_ = std::thread([this] { accept_loop(); });
  }
  ~TinyHttpServer() {
    stop_ = true;
    ::shutdown(fd_, SHUT_RDWR);
    accept_thread_.join();
    ::close(fd_);
    std::lock_guard lock(mu_);
    for (auto& t : conns_) t.join();
  }

  int port() const { return port_; }
  std::string url(const std::string& path) const {
    return "http://127.0.0.1:" + std::to_string(port_) + path;
  }
  int requests() const { return requests_; }
  int hang_open() const { return hang_open_; }
  int hang_closed() const { return hang_closed_; }

 private:
  void accept_loop() {
    while (!stop_) {
      int c = ::accept(fd_, nullptr, nullptr);
      if (c < 0) {
        if (stop_) return;
        continue;
      }
      std::lock_guard lock(mu_);
      conns_.emplace_back([this, c] {
        serve(c);
        ::close(c);
      });
    }
  }

  // Reads until the predicate holds, the peer closes, or the server stops.
  bool read_more(int c, std::string& buf) {
    for (;;) {
      if (stop_) return false;
      pollfd p{c, POLLIN, 0};
      int r = ::poll(&p, 1, 50);
      if (r == 0) continue;
      char tmp[65536];
      ssize_t n = ::recv(c, tmp, sizeof tmp, 0);
      if (n <= 0) return false;
      buf.append(tmp, static_cast<size_t>(n));
      return true;
    }
  }

  static std::string header(const std::string& head, const std::string& name) {
    std::string lower_head;
    for (char ch : head)
      lower_head += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    size_t at = lower_head.find("\r\n" + name + ":");
    if (at == std::string::npos) return {};
    size_t start = at + 3 + name.size();
    size_t end = head.find("\r\n", start);
    std::string v = head.substr(start, end - start);
    while (!v.empty() && v.front() == ' ') v.erase(v.begin());
    return v;
  }

  void send_all(int c, const std::string& s) {
    size_t at = 0;
    while (at < s.size()) {
      ssize_t n = ::send(c, s.data() + at, s.size() - at, MSG_NOSIGNAL);
      if (n <= 0) return;
      at += static_cast<size_t>(n);
    }
  }
  void respond(int c, int status, const std::string& body, const std::string& extra = "") {
    send_all(c, "HTTP/1.1 " + std::to_string(status) +
                    " X\r\nContent-Length: " + std::to_string(body.size()) +
                    "\r\nConnection: close\r\n" + extra + "\r\n" + body);
  }

  void serve(int c) {
    std::string buf;
    size_t head_end;
    while ((head_end = buf.find("\r\n\r\n")) == std::string::npos)
      if (!read_more(c, buf)) return;
    std::string head = buf.substr(0, head_end);
    size_t length = std::strtoul(header(head, "content-length").c_str(), nullptr, 10);
    while (buf.size() < head_end + 4 + length)
      if (!read_more(c, buf)) return;
    std::string body = buf.substr(head_end + 4, length);
    size_t sp1 = head.find(' '), sp2 = head.find(' ', sp1 + 1);
    std::string path = head.substr(sp1 + 1, sp2 - sp1 - 1);
    ++requests_;

    auto arg = [&](const std::string& prefix) {
      return std::strtoul(path.c_str() + prefix.size(), nullptr, 10);
    };
    if (path == "/hello") {
      respond(c, 200, "hello");
    } else if (path == "/echo") {
      respond(c, 201, header(head, "content-type") + "|" + body);
    } else if (path.rfind("/status/", 0) == 0) {
      int s = static_cast<int>(arg("/status/"));
      respond(c, s, "status " + std::to_string(s));
    } else if (path.rfind("/slow/", 0) == 0) {
      auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(arg("/slow/"));
      while (!stop_ && std::chrono::steady_clock::now() < until)
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      respond(c, 200, "slow");
    } else if (path.rfind("/big/", 0) == 0) {
      respond(c, 200, std::string(arg("/big/"), 'x'));
    } else if (path.rfind("/chunked/", 0) == 0) {
      size_t left = arg("/chunked/");
      send_all(c, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n");
      while (left > 0 && !stop_) {
        size_t n = left < 65536 ? left : 65536;
        char size[32];
        std::snprintf(size, sizeof size, "%zx\r\n", n);
        send_all(c, size + std::string(n, 'y') + "\r\n");
        left -= n;
      }
      send_all(c, "0\r\n\r\n");
    } else if (path == "/redirect") {
      respond(c, 302, "moved", "Location: " + url("/hello") + "\r\n");
    } else if (path == "/hang") {
      ++hang_open_;
      std::string rest;
      while (read_more(c, rest)) {
      }
      if (!stop_) ++hang_closed_;
    } else {
      respond(c, 404, "no such path");
    }
  }

  int fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> requests_{0}, hang_open_{0}, hang_closed_{0};
  std::thread accept_thread_;
  std::mutex mu_;
  std::vector<std::thread> conns_;
};

}  // namespace pith::test
