// ChildServer: `pith serve` (this very binary) as a child process on a free loopback port, for the
// benchmarks that measure a real server over HTTP (`pith bench soak --server`, `pith bench
// serving`). Its log goes to a temporary file named in every error; the destructor sends
// SIGTERM (the server drains) and waits, then SIGKILL after 30 s.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

namespace pith::bench {

uint16_t free_loopback_port();

class ChildServer {
 public:
  // `serve_args`: everything after `pith serve` except --host/--port, which are added. `what`
  // names the benchmark in errors. Returns once /health answers 200 (model loaded), or throws.
  ChildServer(const std::string& what, std::vector<std::string> serve_args);
  ~ChildServer();
  ChildServer(const ChildServer&) = delete;
  ChildServer& operator=(const ChildServer&) = delete;

  const std::string& url() const { return url_; }
  pid_t pid() const { return pid_; }
  uint16_t port() const { return port_; }
  const std::string& log_path() const { return log_path_; }

 private:
  uint16_t port_;
  std::string url_, log_path_;
  pid_t pid_ = 0;
};

}  // namespace pith::bench
