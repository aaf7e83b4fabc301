#include "server/event_log.h"

#include <boost/asio/post.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <algorithm>

namespace pith::server {

EventLog::EventLog(asio::io_context& io, size_t max_events, size_t max_bytes)
    : io_(io), max_events_(std::max<size_t>(1, max_events)), max_bytes_(max_bytes) {}

void EventLog::append(std::string type, std::string data, std::string text) {
  std::lock_guard lock(mu_);
  if (closed_) return;
  ServerEvent e{next_id_++, std::move(type), std::move(data), std::move(text)};
  bytes_ += e.data.size() + e.text.size();
  events_.push_back(std::move(e));
  // Keep at least the newest event (the terminated event must always be readable).
  while (events_.size() > 1 && (events_.size() > max_events_ || bytes_ > max_bytes_)) {
    bytes_ -= events_.front().data.size() + events_.front().text.size();
    events_.pop_front();
  }
  wake_locked();
}

void EventLog::close() {
  std::lock_guard lock(mu_);
  closed_ = true;
  wake_locked();
}

bool EventLog::closed() const {
  std::lock_guard lock(mu_);
  return closed_;
}

void EventLog::wake_locked() {
  // Timers belong to the I/O thread: cancel them there.
  for (auto& t : waiters_) asio::post(io_, [t] { t->cancel(); });
  waiters_.clear();
}

EventLog::Read EventLog::read_after(uint64_t after) const {
  Read r;
  std::lock_guard lock(mu_);
  uint64_t first = events_.empty() ? next_id_ : events_.front().id;
  if (after + 1 < first) r.dropped = first - after - 1;
  // Ids are consecutive, so the first event to return is found by offset, not by a scan (a
  // streaming request re-reads after every token).
  const size_t skip = after >= first ? static_cast<size_t>(after - first + 1) : 0;
  for (size_t i = std::min(skip, events_.size()); i < events_.size(); ++i)
    r.events.push_back(events_[i]);
  r.closed = closed_;
  return r;
}

asio::awaitable<void> EventLog::wait(uint64_t after, std::chrono::milliseconds timeout) {
  auto timer = std::make_shared<asio::steady_timer>(co_await asio::this_coro::executor);
  timer->expires_after(timeout);
  {
    std::lock_guard lock(mu_);
    if (closed_ || next_id_ - 1 > after) co_return;
    waiters_.push_back(timer);
  }
  boost::system::error_code ec;
  co_await timer->async_wait(asio::redirect_error(asio::use_awaitable, ec));
  std::lock_guard lock(mu_);
  std::erase(waiters_, timer);
}

}  // namespace pith::server
