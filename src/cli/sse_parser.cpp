#include "cli/sse_parser.h"

#include <charconv>

namespace pith::cli {

bool SseParser::feed(std::string_view bytes, const SseHandler& on_event) {
  while (!bytes.empty()) {
    size_t nl = bytes.find('\n');
    if (nl == std::string_view::npos) {
      partial_.append(bytes);
      return true;
    }
    std::string_view piece = bytes.substr(0, nl);
    bytes.remove_prefix(nl + 1);
    bool go;
    if (partial_.empty()) {
      if (!piece.empty() && piece.back() == '\r') piece.remove_suffix(1);
      go = line(piece, on_event);
    } else {
      partial_.append(piece);
      if (partial_.back() == '\r') partial_.pop_back();
      std::string whole = std::move(partial_);
      partial_.clear();
      go = line(whole, on_event);
    }
    if (!go) return false;
  }
  return true;
}

bool SseParser::line(std::string_view l, const SseHandler& on_event) {
  if (l.empty()) {
    // The spec dispatches only events with data; the id and type still reset.
    // The id counts as seen only once its event is complete: a stream cut mid-event is
    // resumed from before it.
    SseEvent done = std::move(current_);
    bool had = has_data_;
    if (done.id) last_id_ = done.id;
    current_ = SseEvent{};
    has_data_ = false;
    return had ? on_event(done) : true;
  }
  if (l.front() == ':') return true;
  std::string_view field = l, value;
  if (size_t colon = l.find(':'); colon != std::string_view::npos) {
    field = l.substr(0, colon);
    value = l.substr(colon + 1);
    if (!value.empty() && value.front() == ' ') value.remove_prefix(1);
  }
  if (field == "data") {
    if (has_data_) current_.data.push_back('\n');
    current_.data.append(value);
    has_data_ = true;
  } else if (field == "event") {
    current_.event = value.empty() ? "message" : std::string(value);
  } else if (field == "id") {
    uint64_t v = 0;
    auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
    if (ec == std::errc() && end == value.data() + value.size() && !value.empty()) {
      current_.id = v;
    }
  }
  // Other fields (retry) do not matter to pith's clients.
  return true;
}

}  // namespace pith::cli
