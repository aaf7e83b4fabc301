// Redis over hiredis. See redis_client.h.
#include "runtime/redis_client.h"

#include <hiredis/hiredis.h>
#include <poll.h>

#include <charconv>

#include <spdlog/spdlog.h>

#include "common/error.h"
#include "runtime/kv_store.h"

namespace pith::runtime {

namespace {

int parse_int(std::string_view s, const std::string& url, const char* what) {
  int v = -1;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || v < 0)
    fail("state store {}: the {} '{}' is not a number", url, what, s);
  return v;
}

timeval to_timeval(std::chrono::milliseconds ms) {
  return {static_cast<time_t>(ms.count() / 1000),
          static_cast<suseconds_t>(ms.count() % 1000 * 1000)};
}

RedisReply convert(const redisReply* r) {
  RedisReply out;
  switch (r->type) {
    case REDIS_REPLY_STRING:
      out.type = RedisReply::Type::String;
      out.str.assign(r->str, r->len);
      break;
    case REDIS_REPLY_STATUS:
      out.type = RedisReply::Type::Status;
      out.str.assign(r->str, r->len);
      break;
    case REDIS_REPLY_INTEGER:
      out.type = RedisReply::Type::Integer;
      out.integer = r->integer;
      break;
    case REDIS_REPLY_ARRAY:
      out.type = RedisReply::Type::Array;
      for (size_t i = 0; i < r->elements; ++i) out.elements.push_back(convert(r->element[i]));
      break;
    default:
      break;  // NIL
  }
  return out;
}

struct ReplyDeleter {
  void operator()(redisReply* r) const { freeReplyObject(r); }
};
using ReplyPtr = std::unique_ptr<redisReply, ReplyDeleter>;

// Connects, authenticates and selects the database. Returns nullptr with `why` on failure.
redisContext* open(const RedisUrl& url, std::chrono::milliseconds timeout, std::string* why) {
  redisContext* c = redisConnectWithTimeout(url.host.c_str(), url.port, to_timeval(timeout));
  if (!c || c->err) {
    *why = c ? c->errstr : "out of memory";
    if (c) redisFree(c);
    return nullptr;
  }
  redisSetTimeout(c, to_timeval(timeout));
  auto run = [&](std::vector<std::string> args) {
    std::vector<const char*> argv;
    std::vector<size_t> lens;
    for (const auto& a : args) argv.push_back(a.data()), lens.push_back(a.size());
    ReplyPtr r(static_cast<redisReply*>(
        redisCommandArgv(c, static_cast<int>(argv.size()), argv.data(), lens.data())));
    if (!r) {
      *why = c->errstr;
      return false;
    }
    if (r->type == REDIS_REPLY_ERROR) {
      *why = std::string(r->str, r->len);
      return false;
    }
    return true;
  };
  bool ok = true;
  if (!url.password.empty())
    ok = url.user.empty() ? run({"AUTH", url.password}) : run({"AUTH", url.user, url.password});
  if (ok && url.db != 0) ok = run({"SELECT", std::to_string(url.db)});
  if (!ok) {
    redisFree(c);
    return nullptr;
  }
  return c;
}

}  // namespace

RedisUrl RedisUrl::parse(const std::string& url) {
  constexpr std::string_view scheme = "redis://";
  if (url.rfind(scheme, 0) != 0)
    fail("state store '{}': only redis://[[USER]:PASSWORD@]HOST[:PORT][/DB] is supported", url);
  std::string_view rest = std::string_view(url).substr(scheme.size());
  RedisUrl u;
  if (auto at = rest.rfind('@'); at != std::string_view::npos) {
    std::string_view cred = rest.substr(0, at);
    rest.remove_prefix(at + 1);
    auto colon = cred.find(':');
    if (colon == std::string_view::npos) fail("state store {}: USER:PASSWORD@ needs the ':'", url);
    u.user = cred.substr(0, colon);
    u.password = cred.substr(colon + 1);
  }
  if (auto slash = rest.find('/'); slash != std::string_view::npos) {
    std::string_view db = rest.substr(slash + 1);
    rest = rest.substr(0, slash);
    if (!db.empty()) u.db = parse_int(db, url, "database");
  }
  if (!rest.empty() && rest.front() == '[') {  // [IPv6]:port
    auto close = rest.find(']');
    if (close == std::string_view::npos) fail("state store {}: unclosed '['", url);
    u.host = rest.substr(1, close - 1);
    rest.remove_prefix(close + 1);
    if (!rest.empty()) {
      if (rest.front() != ':') fail("state store {}: expected ':PORT' after ']'", url);
      u.port = parse_int(rest.substr(1), url, "port");
    }
  } else if (auto colon = rest.rfind(':'); colon != std::string_view::npos) {
    u.host = rest.substr(0, colon);
    u.port = parse_int(rest.substr(colon + 1), url, "port");
  } else {
    u.host = rest;
  }
  if (u.host.empty()) fail("state store {}: no host", url);
  if (u.port < 1 || u.port > 65535) fail("state store {}: port {} is out of range", url, u.port);
  return u;
}

std::string RedisUrl::redacted() const {
  std::string cred = password.empty() ? "" : (user + ":***@");
  return "redis://" + cred + host + ":" + std::to_string(port) + "/" + std::to_string(db);
}

RedisClient::RedisClient(RedisUrl url, std::chrono::milliseconds timeout)
    : url_(std::move(url)), timeout_(timeout) {}

RedisClient::~RedisClient() {
  if (ctx_) redisFree(ctx_);
}

redisContext* RedisClient::connection_locked() {
  if (ctx_) return ctx_;
  // While Redis is down, fail fast instead of paying a connect timeout on every call.
  const auto now = std::chrono::steady_clock::now();
  if (now < next_attempt_) {
    ++failures_;
    throw StoreFailure(PITH_ERR_NETWORK, "state store " + url_.redacted() + " is unreachable");
  }
  std::string why;
  ctx_ = open(url_, timeout_, &why);
  if (!ctx_) {
    next_attempt_ = now + std::chrono::milliseconds(250);
    ++failures_;
    throw StoreFailure(PITH_ERR_NETWORK,
                       "state store " + url_.redacted() + " is unreachable: " + why);
  }
  return ctx_;
}

RedisReply RedisClient::command(std::initializer_list<std::string_view> args) {
  std::vector<const char*> argv;
  std::vector<size_t> lens;
  for (auto a : args) argv.push_back(a.data()), lens.push_back(a.size());
  std::lock_guard lock(mu_);
  ReplyPtr r;
  // A connection that sat idle across a Redis restart fails on first use without the command
  // reaching the new server: one retry on a fresh connection, never more.
  for (int attempt = 0; attempt < 2 && !r; ++attempt) {
    const bool reused = ctx_ != nullptr;
    redisContext* c = connection_locked();
    r.reset(static_cast<redisReply*>(
        redisCommandArgv(c, static_cast<int>(argv.size()), argv.data(), lens.data())));
    if (r) break;
    std::string why = c->errstr;
    redisFree(ctx_);
    ctx_ = nullptr;  // reconnect on the next call
    if (!reused || attempt == 1) {
      ++failures_;
      throw StoreFailure(PITH_ERR_NETWORK, "state store " + url_.redacted() + " broke off: " + why);
    }
  }
  if (r->type == REDIS_REPLY_ERROR) {
    std::string msg(r->str, r->len);
    // Redis at its maxmemory refuses writes: a limit, as the local store's total is.
    pith_status_t st = msg.rfind("OOM", 0) == 0 ? PITH_ERR_LIMIT : PITH_ERR_NETWORK;
    ++failures_;
    throw StoreFailure(st, "state store " + url_.redacted() + ": " + msg);
  }
  return convert(r.get());
}

RedisSubscriber::RedisSubscriber(RedisUrl url, std::string pattern, Handler on_message)
    : url_(std::move(url)), pattern_(std::move(pattern)), on_message_(std::move(on_message)) {
  thread_ = std::thread([this] { run(); });
}

RedisSubscriber::~RedisSubscriber() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

bool RedisSubscriber::wait_subscribed(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu_);
  return cv_.wait_for(lock, timeout, [&] { return subscribed_.load() || stop_.load(); }) &&
         subscribed_;
}

void RedisSubscriber::run() {
  auto backoff = std::chrono::milliseconds(100);
  while (!stop_) {
    const auto started = std::chrono::steady_clock::now();
    if (!listen_once()) return;
    if (std::chrono::steady_clock::now() - started > std::chrono::seconds(5))
      backoff = std::chrono::milliseconds(100);  // it had been up a while: retry soon
    std::unique_lock lock(mu_);
    cv_.wait_for(lock, backoff, [&] { return stop_.load(); });
    backoff = std::min(backoff * 2, std::chrono::milliseconds(2000));
  }
}

bool RedisSubscriber::listen_once() {
  std::string why;
  redisContext* c = open(url_, std::chrono::milliseconds(2000), &why);
  if (!c) return !stop_;
  std::unique_ptr<redisContext, void (*)(redisContext*)> owned(c, redisFree);
  const char* argv[] = {"PSUBSCRIBE", pattern_.data()};
  const size_t lens[] = {10, pattern_.size()};
  if (redisAppendCommandArgv(c, 2, argv, lens) != REDIS_OK) return !stop_;
  int done = 0;
  while (!done)
    if (redisBufferWrite(c, &done) != REDIS_OK) return !stop_;
  // Poll with a short timeout so the destructor's stop is noticed; hiredis's own blocking read
  // would leave the context unusable after a timeout.
  for (;;) {
    if (stop_) return false;
    pollfd p{c->fd, POLLIN, 0};
    int n = ::poll(&p, 1, 100);
    if (n < 0 && errno != EINTR) break;
    if (n <= 0) continue;
    if (redisBufferRead(c) != REDIS_OK) break;
    bool broken = false;
    for (;;) {
      void* raw = nullptr;
      if (redisGetReplyFromReader(c, &raw) != REDIS_OK) {
        broken = true;  // a protocol error: start over on a new connection
        break;
      }
      if (!raw) break;
      ReplyPtr r(static_cast<redisReply*>(raw));
      if (r->type != REDIS_REPLY_ARRAY || r->elements < 3) continue;
      std::string_view kind(r->element[0]->str, r->element[0]->len);
      if (kind == "psubscribe") {
        {
          std::lock_guard lock(mu_);
          subscribed_ = true;
        }
        cv_.notify_all();
        if (ever_subscribed_) spdlog::info("state store {}: subscribed again", url_.redacted());
        ever_subscribed_ = true;
      } else if (kind == "pmessage" && r->elements == 4) {
        on_message_(std::string_view(r->element[2]->str, r->element[2]->len),
                    std::string_view(r->element[3]->str, r->element[3]->len));
      }
    }
    if (broken) break;
  }
  if (subscribed_.exchange(false) && !stop_)
    spdlog::warn(
        "state store {}: subscription lost, reconnecting (broadcasts from other replicas "
        "are missed until then)",
        url_.redacted());
  return !stop_;
}

}  // namespace pith::runtime
