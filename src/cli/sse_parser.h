// SseParser: incremental parser for a text/event-stream body (the WHATWG Server-Sent Events
// format, as `pith serve` writes it: docs/server-api.md "Event stream"). Bytes arrive in
// arbitrary pieces from the transfer; each complete event (a blank line ends it) is handed to
// a callback. Lines end in LF or CRLF (a bare CR is not treated as a line end); comment lines
// (":" first, the server's keep-alives) are skipped; several data lines join with "\n".
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace pith::cli {

struct SseEvent {
  std::optional<uint64_t> id;  // the `id:` field when it was a decimal number
  std::string event = "message";
  std::string data;
};

// Returns false to stop reading the stream.
using SseHandler = std::function<bool(const SseEvent&)>;

class SseParser {
 public:
  // Parses `bytes`; returns false as soon as a handler call returned false (the remaining
  // bytes are dropped).
  bool feed(std::string_view bytes, const SseHandler& on_event);

  // The id of the last event that carried one (for Last-Event-ID on reconnect).
  std::optional<uint64_t> last_id() const { return last_id_; }

 private:
  bool line(std::string_view l, const SseHandler& on_event);

  std::string partial_;  // an unfinished line from the previous piece
  SseEvent current_;
  bool has_data_ = false;
  std::optional<uint64_t> last_id_;
};

}  // namespace pith::cli
