// EventLog: the bounded, replayable event buffer of one instance, read by any number of
// Server-Sent-Event streams (and the OpenAI handler) on the server's I/O thread. Producers are
// the runtime's scheduler threads (send(), log lines, exit); readers wait asynchronously, so a
// stream costs a coroutine frame and a timer, not a thread.
//
// Events get consecutive ids from 1. When more than max_events or max_bytes are buffered the
// oldest are dropped; a reader that asks for an id that is gone learns how many it missed.
#pragma once

#include <utility>  // before asio: Boost 1.74's awaitable.hpp uses std::exchange

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace pith::server {

namespace asio = boost::asio;

struct ServerEvent {
  uint64_t id = 0;
  std::string type;  // "message", "log", "terminated"
  std::string data;  // the payload (JSON for SSE; raw text for messages, see `text`)
  std::string text;  // raw message text (type "message"), for in-process readers
};

class EventLog {
 public:
  EventLog(asio::io_context& io, size_t max_events, size_t max_bytes);

  // Any thread.
  void append(std::string type, std::string data, std::string text = {});
  void close();  // no more events after this (after "terminated")
  bool closed() const;

  struct Read {
    std::vector<ServerEvent> events;  // id > after, oldest first
    uint64_t dropped = 0;             // events after `after` that are no longer buffered
    bool closed = false;              // and `events` holds the last ones
  };
  Read read_after(uint64_t after) const;

  // I/O thread: completes when an event with id > after exists, the log is closed, or
  // `timeout` passes (heartbeats).
  asio::awaitable<void> wait(uint64_t after, std::chrono::milliseconds timeout);

 private:
  void wake_locked();

  asio::io_context& io_;
  const size_t max_events_, max_bytes_;
  mutable std::mutex mu_;
  std::deque<ServerEvent> events_;
  size_t bytes_ = 0;
  uint64_t next_id_ = 1;
  bool closed_ = false;
  std::vector<std::shared_ptr<asio::steady_timer>> waiters_;
};

}  // namespace pith::server
