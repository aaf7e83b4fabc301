// Running one inferlet instance attached to the terminal: its send() messages go to stdout,
// its log lines to stderr, stdin lines become messages (EOF closes its input), and the
// process exit code follows the instance's exit. Shared by `pith run` and `pith run-local`.
#pragma once

#include <memory>
#include <string>

#include "runtime/instance.h"

namespace pith::cli {

// The sink to launch the instance with.
runtime::EventSink terminal_sink();

// Forwards stdin to the instance (unless no_stdin), waits for it to end, and returns the
// exit code for the process (the instance's code, or 1 when it trapped or was killed, with the
// reason on stderr).
int attach(const std::shared_ptr<runtime::Instance>& inst, const std::string& program,
           bool no_stdin, bool verbose);

}  // namespace pith::cli
