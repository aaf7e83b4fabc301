#include "cli/attached_instance.h"

#include <fmt/format.h>

#include <cstdio>
#include <iostream>
#include <mutex>
#include <thread>

namespace pith::cli {

runtime::EventSink terminal_sink() {
  auto mu = std::make_shared<std::mutex>();
  return [mu](uint64_t, const runtime::InstanceEvent& e) {
    std::lock_guard lock(*mu);
    if (e.kind == runtime::InstanceEvent::Kind::Message) {
      fmt::print("{}\n", e.text);
      std::fflush(stdout);
    } else if (e.kind == runtime::InstanceEvent::Kind::Log) {
      static const char* levels[] = {"debug", "info", "warn", "error"};
      fmt::print(stderr, "[{}] {}\n", levels[e.level & 3], e.text);
    }
  };
}

int attach(const std::shared_ptr<runtime::Instance>& inst, const std::string& program,
           bool no_stdin, bool verbose) {
  if (verbose)
    fmt::print(stderr, "pith: instance {} of {} runs on the {} tier\n", inst->id(), program,
               inst->tier());
  if (no_stdin) {
    inst->close_input();
  } else {
    // Detached: a blocking read must not keep the process alive after the instance ends.
    std::weak_ptr<runtime::Instance> weak = inst;
    std::thread([weak] {
      std::string line;
      while (std::getline(std::cin, line)) {
        auto i = weak.lock();
        if (!i || !i->push_message(line)) return;
      }
      if (auto i = weak.lock()) i->close_input();
    }).detach();
  }
  runtime::ExitStatus st = inst->wait();
  if (verbose) fmt::print(stderr, "pith: {}: {}\n", program, st.reason);
  if (st.kind == runtime::ExitStatus::Kind::Exited) return st.code;
  fmt::print(stderr, "pith: {}: {}\n", program, st.reason);
  return 1;
}

}  // namespace pith::cli
