// A `pith serve` child process. See child_server.h.
#include "bench/child_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <thread>

#include "cli/server_client.h"
#include "common/error.h"

extern char** environ;

namespace pith::bench {

uint16_t free_loopback_port() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  const bool ok = fd >= 0 && bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
                  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0;
  if (fd >= 0) close(fd);
  if (!ok) fail("cannot find a free loopback port");
  return ntohs(a.sin_port);
}

ChildServer::ChildServer(const std::string& what, std::vector<std::string> serve_args)
    : port_(free_loopback_port()), url_(fmt::format("http://127.0.0.1:{}", port_)) {
  log_path_ = (std::filesystem::temp_directory_path() /
               fmt::format("pith-{}-server-{}-{}.log", what, getpid(), port_))
                  .string();
  std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  std::vector<std::string> args = {self,        "serve",  "--host",
                                   "127.0.0.1", "--port", std::to_string(port_)};
  args.insert(args.end(), serve_args.begin(), serve_args.end());
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, log_path_.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&fa, STDOUT_FILENO, STDERR_FILENO);
  int rc = posix_spawn(&pid_, self.c_str(), &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) fail("{}: cannot start `pith serve`: {}", what, std::strerror(rc));
  cli::ServerClient client(url_, "");
  for (int i = 0; i < 1200; ++i) {  // model load and the built-in inferlet: up to 2 minutes
    if (waitpid(pid_, nullptr, WNOHANG) == pid_) {
      pid_ = 0;
      fail("{}: `pith serve` exited during startup (log: {})", what, log_path_);
    }
    try {
      if (client.perform(cli::http_request("GET", "/health")).status == 200) return;
    } catch (const Error&) {
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  kill(pid_, SIGKILL);  // the destructor does not run for a constructor that throws
  waitpid(pid_, nullptr, 0);
  pid_ = 0;
  fail("{}: `pith serve` did not become healthy in 2 minutes (log: {})", what, log_path_);
}

ChildServer::~ChildServer() {
  if (pid_ <= 0) return;
  kill(pid_, SIGTERM);  // drains
  for (int i = 0; i < 300; ++i) {
    if (waitpid(pid_, nullptr, WNOHANG) == pid_) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  kill(pid_, SIGKILL);
  waitpid(pid_, nullptr, 0);
}

}  // namespace pith::bench
