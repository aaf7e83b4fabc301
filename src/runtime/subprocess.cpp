// Limited child processes for the native compiler. See subprocess.h.
#include "runtime/subprocess.h"

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>
#include <unordered_set>

#include "common/error.h"

namespace pith::runtime {

namespace {

// The process groups of the tools running now. A pid leaves the set before it is reaped, so a
// kill under the lock never reaches a recycled pid (an exited, unreaped leader keeps its pid).
struct RunningTools {
  std::mutex mu;
  std::unordered_set<pid_t> groups;
  std::unordered_set<pid_t> ended;  // killed by end_running_tools(), not yet reaped
  // Tools between the closed check and their group's registration: one that end_running_tools()
  // closes in that window kills itself on registering, and is counted and waited for there.
  size_t starting = 0;
  bool closed = false;
};

RunningTools& running_tools() {
  static RunningTools* tools = new RunningTools;  // never destroyed: detached builders use it
  return *tools;
}

}  // namespace

size_t end_running_tools(std::chrono::milliseconds wait) {
  RunningTools& tools = running_tools();
  size_t n = 0;
  {
    std::lock_guard lock(tools.mu);
    tools.closed = true;
    for (pid_t g : tools.groups) {
      kill(-g, SIGKILL);
      tools.ended.insert(g);
      ++n;
    }
    n += tools.starting;
  }
  const auto deadline = std::chrono::steady_clock::now() + wait;
  while (std::chrono::steady_clock::now() < deadline) {
    {
      std::lock_guard lock(tools.mu);
      if (tools.groups.empty() && tools.starting == 0) break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return n;
}

std::string ProcessResult::describe() const {
  if (ended) return "ended: the server is stopping";
  if (timed_out) return "killed: wall-clock limit";
  if (signal == SIGXCPU || signal == SIGKILL)
    return fmt::format("killed by signal {} (CPU or memory limit)", signal);
  if (signal) return fmt::format("killed by signal {}", signal);
  return fmt::format("exit code {}", exit_code);
}

ProcessResult run_limited(const std::vector<std::string>& argv, const std::string& workdir,
                          const ProcessLimits& limits) {
  PITH_CHECK(!argv.empty());
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  std::string log_path = workdir + "/tool-output.txt";
  int log_fd = open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (log_fd < 0) fail("{}: cannot create: {}", log_path, std::strerror(errno));

  RunningTools& tools = running_tools();
  {
    std::lock_guard lock(tools.mu);
    if (tools.closed) {
      close(log_fd);
      fail("cannot start {}: the server is stopping", argv[0]);
    }
    ++tools.starting;
  }

  // Everything the child needs is prepared here: after vfork it may only make system calls.
  int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
  const rlimit cpu{limits.cpu_seconds, limits.cpu_seconds + 1};
  const rlimit as{limits.address_space, limits.address_space};
  const rlimit fsize{limits.file_size, limits.file_size};
  const char* dir = workdir.c_str();
  char* const* child_argv = args.data();

  // vfork: the child borrows the parent's address space until exec, so starting a tool costs the
  // same in a server with gigabytes mapped (fork would copy its page tables: milliseconds). The
  // child makes the same system calls posix_spawn makes, then execs or _exits.
  pid_t pid = vfork();
  if (pid == 0) {
    if (chdir(dir) != 0) _exit(126);
    dup2(log_fd, 1);
    dup2(log_fd, 2);
    if (devnull >= 0) dup2(devnull, 0);
    // Nothing else of the server's: an inherited listening socket would keep the port bound
    // after the server dies, until the compiler exits (a restart then fails to listen).
    close_range(3, ~0u, 0);
    setrlimit(RLIMIT_CPU, &cpu);
    setrlimit(RLIMIT_AS, &as);
    setrlimit(RLIMIT_FSIZE, &fsize);
    setpgid(0, 0);                     // its own process group: the wall-clock kill reaches cc1 too
    prctl(PR_SET_PDEATHSIG, SIGKILL);  // a server killed outright takes the driver along
    execvp(child_argv[0], child_argv);
    _exit(127);
  }
  if (devnull >= 0) close(devnull);
  if (pid < 0) {
    close(log_fd);
    {
      std::lock_guard lock(tools.mu);
      --tools.starting;
    }
    fail("cannot start {}: vfork: {}", argv[0], std::strerror(errno));
  }
  close(log_fd);
  {
    // vfork returned after the child's exec (or exit): its process group exists.
    std::lock_guard lock(tools.mu);
    --tools.starting;
    tools.groups.insert(pid);
    if (tools.closed) {  // ended between the check above and now
      kill(-pid, SIGKILL);
      tools.ended.insert(pid);
    }
  }

  ProcessResult result;
  auto deadline =
      std::chrono::steady_clock::now() + std::chrono::duration<double>(limits.wall_seconds);
  int status = 0;
  for (auto sleep = std::chrono::microseconds(200);;) {
    // WNOWAIT: see the exit without reaping, so the pid leaves the set while it is still ours.
    siginfo_t info{};
    int w = waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT);
    if (w == 0 && info.si_pid == pid) {
      std::lock_guard lock(tools.mu);
      tools.groups.erase(pid);
      result.ended = tools.ended.erase(pid) > 0;
      break;
    }
    if (w < 0 && errno != EINTR) {
      std::lock_guard lock(tools.mu);
      tools.groups.erase(pid);
      tools.ended.erase(pid);
      fail("waitid({}): {}", argv[0], std::strerror(errno));
    }
    if (std::chrono::steady_clock::now() > deadline && !result.timed_out) {
      result.timed_out = true;
      kill(-pid, SIGKILL);
    }
    std::this_thread::sleep_for(sleep);
    if (sleep < std::chrono::milliseconds(20)) sleep *= 2;
  }
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status)) {
    result.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    result.signal = WTERMSIG(status);
  }
  std::ifstream in(log_path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  result.output = ss.str();
  if (result.output.size() > 4096)
    result.output = result.output.substr(result.output.size() - 4096);
  if (result.exit_code == 127 && result.output.empty())
    result.output = fmt::format("{}: command not found", argv[0]);
  return result;
}

}  // namespace pith::runtime
