// A Redis client for the runtime's shared state (shared_state.h), over hiredis (Debian
// libhiredis-dev): one synchronous command connection shared by threads, and a subscriber thread
// for pattern subscriptions. Both survive Redis going away: a failed command drops the connection
// and throws StoreFailure (the caller's guest gets an error, never a crash); the next command
// reconnects, and the subscriber reconnects with backoff and subscribes again.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <initializer_list>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

struct redisContext;

namespace pith::runtime {

// redis://[[USER]:PASSWORD@]HOST[:PORT][/DB]. Throws pith::Error naming what is wrong.
struct RedisUrl {
  std::string host;
  int port = 6379;
  std::string user, password;
  int db = 0;
  static RedisUrl parse(const std::string& url);
  std::string redacted() const;  // for logs: the password left out
};

struct RedisReply {
  enum class Type { Nil, String, Integer, Status, Array };
  Type type = Type::Nil;
  std::string str;
  long long integer = 0;
  std::vector<RedisReply> elements;
};

class RedisClient {
 public:
  explicit RedisClient(RedisUrl url,
                       std::chrono::milliseconds timeout = std::chrono::milliseconds(2000));
  ~RedisClient();
  RedisClient(const RedisClient&) = delete;
  RedisClient& operator=(const RedisClient&) = delete;

  // Runs one command (binary-safe arguments). Throws StoreFailure when Redis cannot be reached,
  // breaks off, or answers with an error.
  RedisReply command(std::initializer_list<std::string_view> args);
  const RedisUrl& url() const { return url_; }
  uint64_t failures() const { return failures_.load(); }  // commands that threw

 private:
  redisContext* connection_locked();  // connects (after the retry interval) or throws

  const RedisUrl url_;
  const std::chrono::milliseconds timeout_;
  std::mutex mu_;
  redisContext* ctx_ = nullptr;
  std::chrono::steady_clock::time_point next_attempt_{};
  std::atomic<uint64_t> failures_{0};
};

// A thread that PSUBSCRIBEs to `pattern` and calls on_message(channel, payload) for every
// message, reconnecting (100 ms, doubling to 2 s) whenever the connection is lost. Messages
// published while it is disconnected are lost (Redis pub/sub delivers at most once).
class RedisSubscriber {
 public:
  using Handler = std::function<void(std::string_view channel, std::string_view payload)>;
  RedisSubscriber(RedisUrl url, std::string pattern, Handler on_message);
  ~RedisSubscriber();  // stops and joins the thread
  RedisSubscriber(const RedisSubscriber&) = delete;
  RedisSubscriber& operator=(const RedisSubscriber&) = delete;

  bool subscribed() const { return subscribed_.load(); }
  // Waits until the subscription is active (true) or the timeout passes (false).
  bool wait_subscribed(std::chrono::milliseconds timeout);

 private:
  void run();
  bool listen_once();  // one connection's life; false when stopping

  const RedisUrl url_;
  const std::string pattern_;
  const Handler on_message_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> subscribed_{false};
  bool ever_subscribed_ = false;  // subscriber thread only: log transitions, not every retry
  std::mutex mu_;
  std::condition_variable cv_;
  std::thread thread_;
};

}  // namespace pith::runtime
