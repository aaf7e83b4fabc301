// SharedState and the Redis client (--state-store) against a real redis-server (Debian's, which
// `make deps` installs) started on a free loopback port: the key-value store and program/export
// records shared by two "replicas", pub/sub between them, and a Redis restart survived.
#include "runtime/shared_state.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <thread>
#include <vector>

#include "common/error.h"

extern char** environ;

namespace pith::runtime {
namespace {

using namespace std::chrono_literals;

int free_port() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  close(fd);
  return ntohs(a.sin_port);
}

std::string find_redis_server() {
  for (const char* dir : {"/usr/bin", "/usr/sbin", "/usr/local/bin"}) {
    std::string p = std::string(dir) + "/redis-server";
    if (std::filesystem::exists(p)) return p;
  }
  return "";
}

// A redis-server child process on a fixed port, restartable.
class RedisServer {
 public:
  RedisServer() : port_(free_port()), binary_(find_redis_server()) {}
  ~RedisServer() { stop(); }
  bool start() {
    if (binary_.empty()) return false;
    std::string port = std::to_string(port_);
    std::vector<std::string> args = {binary_,     "--port",     port,     "--bind",
                                     "127.0.0.1", "--save",     "",       "--appendonly",
                                     "no",        "--loglevel", "warning"};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t quiet;  // its startup banner and warnings stay out of the log
    posix_spawn_file_actions_init(&quiet);
    posix_spawn_file_actions_addopen(&quiet, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&quiet, 2, "/dev/null", O_WRONLY, 0);
    const int rc = posix_spawn(&pid_, binary_.c_str(), &quiet, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&quiet);
    if (rc != 0) return false;
    for (int i = 0; i < 200; ++i) {  // up to 10 s for the port to accept
      RedisClient probe(RedisUrl::parse(url()), 200ms);
      try {
        if (probe.command({"PING"}).str == "PONG") return true;
      } catch (const StoreFailure&) {
      }
      std::this_thread::sleep_for(50ms);
    }
    return false;
  }
  void stop() {
    if (pid_ <= 0) return;
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }
  std::string url() const { return "redis://127.0.0.1:" + std::to_string(port_); }

 private:
  int port_;
  std::string binary_;
  pid_t pid_ = -1;
};

class SharedStateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(find_redis_server().empty())
        << "redis-server not found: `make deps` (scripts/setup-deps.sh) installs Debian's "
           "redis-server";
    ASSERT_TRUE(redis_.start()) << "redis-server did not start";
  }
  RedisServer redis_;
};

TEST(RedisUrl, ParsesTheFormsAndRefusesTheRest) {
  RedisUrl u = RedisUrl::parse("redis://localhost");
  EXPECT_EQ(u.host, "localhost");
  EXPECT_EQ(u.port, 6379);
  EXPECT_EQ(u.db, 0);
  u = RedisUrl::parse("redis://:s3cret@10.0.0.5:7000/3");
  EXPECT_EQ(u.host, "10.0.0.5");
  EXPECT_EQ(u.port, 7000);
  EXPECT_EQ(u.password, "s3cret");
  EXPECT_EQ(u.user, "");
  EXPECT_EQ(u.db, 3);
  EXPECT_EQ(u.redacted().find("s3cret"), std::string::npos);
  u = RedisUrl::parse("redis://app:pw@[::1]:6380");
  EXPECT_EQ(u.host, "::1");
  EXPECT_EQ(u.port, 6380);
  EXPECT_EQ(u.user, "app");
  for (const char* bad : {"http://x", "redis://", "redis://h:0", "redis://h:99999", "redis://h:p",
                          "redis://h/x", "redis://nopass@h", "redis://[::1"})
    EXPECT_THROW(RedisUrl::parse(bad), Error) << bad;
}

TEST_F(SharedStateTest, TwoReplicasShareTheStoreProgramsAndExportRecords) {
  SharedState a(redis_.url(), {}, "r1"), b(redis_.url(), {}, "r2");
  EXPECT_EQ(a.get("k"), std::nullopt);
  EXPECT_EQ(a.set("k", std::string("v\0w", 3)), PITH_OK);  // binary-safe
  EXPECT_EQ(b.get("k"), std::string("v\0w", 3));
  EXPECT_TRUE(b.contains("k"));
  EXPECT_TRUE(b.erase("k"));
  EXPECT_FALSE(a.contains("k"));
  EXPECT_FALSE(a.erase("k"));

  KvStoreLimits small;
  small.max_value = 4;
  SharedState limited(redis_.url(), small, "r3");
  EXPECT_EQ(limited.set("k", "12345"), PITH_ERR_LIMIT);
  EXPECT_FALSE(a.contains("k"));

  const std::string wasm("\0asm-bytes", 10);
  a.put_program("abc", wasm, "named");
  auto p = b.get_program("abc");
  ASSERT_TRUE(p);
  EXPECT_EQ(p->first, wasm);
  EXPECT_EQ(p->second, "named");
  b.forget_program("abc");
  EXPECT_FALSE(a.get_program("abc"));

  a.note_export("prompt");
  EXPECT_EQ(b.export_owner("prompt"), "r1");
  b.forget_export("prompt");  // not b's record: it stays
  EXPECT_EQ(b.export_owner("prompt"), "r1");
  a.forget_export("prompt");
  EXPECT_EQ(b.export_owner("prompt"), std::nullopt);
}

TEST_F(SharedStateTest, BroadcastsReachEveryReplicaAndSurviveARedisRestart) {
  std::mutex mu;
  std::vector<std::string> got;
  RedisSubscriber sub(RedisUrl::parse(redis_.url()), "pith:topic:*",
                      [&](std::string_view channel, std::string_view payload) {
                        std::lock_guard lock(mu);
                        got.push_back(std::string(channel) + "=" + std::string(payload));
                      });
  ASSERT_TRUE(sub.wait_subscribed(5s));
  SharedState publisher(redis_.url(), {}, "r1");
  auto wait_for = [&](const std::string& want) {
    for (int i = 0; i < 200; ++i) {
      {
        std::lock_guard lock(mu);
        if (!got.empty() && got.back() == want) return true;
      }
      std::this_thread::sleep_for(25ms);
    }
    return false;
  };
  publisher.publish("swarm/ready", "1");
  EXPECT_TRUE(wait_for("pith:topic:swarm/ready=1"));

  // Redis goes away: calls fail at once with a clear error, nothing else breaks.
  redis_.stop();
  for (int i = 0; i < 100 && sub.subscribed(); ++i) std::this_thread::sleep_for(20ms);
  EXPECT_FALSE(sub.subscribed());
  try {
    publisher.get("k");
    ADD_FAILURE() << "a call with Redis down succeeded";
  } catch (const StoreFailure& e) {
    EXPECT_EQ(e.status, PITH_ERR_NETWORK);
    EXPECT_NE(std::string(e.what()).find("state store redis://127.0.0.1"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(publisher.publish("t", "lost"), StoreFailure);

  // It returns on the same port: the next calls work (the idle connection broke: one retry),
  // and the subscriber subscribes again by itself.
  ASSERT_TRUE(redis_.start());
  bool works = false;
  for (int i = 0; i < 40 && !works; ++i) {
    try {
      works = publisher.set("k", "back") == PITH_OK;
    } catch (const StoreFailure&) {
      std::this_thread::sleep_for(100ms);  // within the client's 250 ms retry interval
    }
  }
  EXPECT_TRUE(works);
  for (int i = 0; i < 100 && !sub.subscribed(); ++i) std::this_thread::sleep_for(50ms);
  ASSERT_TRUE(sub.subscribed());
  publisher.publish("swarm/done", "2");
  EXPECT_TRUE(wait_for("pith:topic:swarm/done=2"));
}

}  // namespace
}  // namespace pith::runtime
