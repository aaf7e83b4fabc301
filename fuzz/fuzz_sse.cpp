// libFuzzer target: the Server-Sent Events parser of the client (cli/sse_parser.h), which reads
// event streams from servers it does not control. The stream is parsed once whole and once cut
// into pieces at places the input chooses: both must yield the same events and the same last id
// (the transfer may split a stream anywhere).
#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cli/sse_parser.h"

namespace {

struct Seen {
  std::vector<std::string> events;
  std::optional<uint64_t> last_id;
};

Seen parse(std::string_view stream, std::string_view cuts) {
  pith::cli::SseParser p;
  Seen seen;
  auto on_event = [&](const pith::cli::SseEvent& e) {
    seen.events.push_back((e.id ? std::to_string(*e.id) : "-") + "|" + e.event + "|" + e.data);
    return true;
  };
  size_t at = 0;
  for (unsigned char c : cuts) {  // each cut byte: the length of the next piece
    if (at >= stream.size()) break;
    size_t n = std::min<size_t>(c % 17, stream.size() - at);
    p.feed(stream.substr(at, n), on_event);
    at += n;
  }
  p.feed(stream.substr(at), on_event);
  seen.last_id = p.last_id();
  return seen;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // The first byte says how many of the following bytes are cut lengths.
  if (size == 0) return 0;
  std::string_view in(reinterpret_cast<const char*>(data) + 1, size - 1);
  const size_t n_cuts = std::min<size_t>(data[0], in.size());
  std::string_view cuts = in.substr(0, n_cuts), stream = in.substr(n_cuts);
  Seen whole = parse(stream, ""), pieces = parse(stream, cuts);
  if (whole.events != pieces.events || whole.last_id != pieces.last_id) __builtin_trap();
  return 0;
}
