// run_limited: runs a tool (wasm2c, the C compiler) in a separate process with CPU-time,
// address-space and output-size limits, so a hostile or huge module cannot take the server down
// while it is being compiled. fork/exec with setrlimit in the child; stdout+stderr go to a file
// whose tail is returned for error messages.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace pith::runtime {

struct ProcessLimits {
  uint64_t cpu_seconds = 60;            // RLIMIT_CPU (the child is killed by SIGXCPU/SIGKILL)
  uint64_t address_space = 4ull << 30;  // RLIMIT_AS
  uint64_t file_size = 512ull << 20;    // RLIMIT_FSIZE
  double wall_seconds = 120;            // killed with SIGKILL past this
};

struct ProcessResult {
  int exit_code = -1;  // -1 if killed by a signal
  int signal = 0;      // the signal that ended it, 0 if it exited
  bool timed_out = false;
  bool ended = false;  // killed by end_running_tools()
  std::string output;  // last 4 KiB of stdout+stderr
  bool ok() const { return exit_code == 0; }
  std::string describe() const;  // "exit code 1", "killed by signal 9 (wall-clock limit)", ...
};

// argv[0] is looked up in PATH unless it contains '/'. Throws pith::Error if it cannot start,
// or once end_running_tools() has been called.
ProcessResult run_limited(const std::vector<std::string>& argv, const std::string& workdir,
                          const ProcessLimits& limits);

// For a stopping server: kills every tool still running (its whole process group: cc1, as, ld
// too), waits up to `wait` for them to be reaped, and refuses new ones. Without it a background
// native build outlives the server and keeps writing into its cache directory. Returns how many
// were ended, those still starting included (they end themselves as they register).
size_t end_running_tools(std::chrono::milliseconds wait);

}  // namespace pith::runtime
