// Inferlet HTTP (abi.h "HTTP", src/runtime/http_client.*, src/runtime/api/http.cpp) against a real
// HTTP server on 127.0.0.1 in this process (tiny_http_server.h), driven by the http_fetch inferlet:
// the allow list (host, host:port, schemes), a disabled server, GET/POST with status codes,
// timeouts, the response-size cap, redirects not followed, concurrency without blocking the
// scheduler thread, and an instance (or the whole runtime) ending while a request is in flight.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>

#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <mutex>
#include <thread>

#include "built_inferlet.h"
#include "common/error.h"
#include "runtime/http_client.h"
#include "runtime/runtime.h"
#include "tiny_http_server.h"

namespace pith::runtime {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using test::TinyHttpServer;

std::string inferlet(const std::string& name) {
  return std::string(PITH_INFERLET_DIR) + "/" + name + ".wasm";
}

struct Events {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::string> messages, logs;

  EventSink sink() {
    return [this](uint64_t, const InstanceEvent& e) {
      std::lock_guard lock(mu);
      if (e.kind == InstanceEvent::Kind::Message) messages.push_back(e.text);
      if (e.kind == InstanceEvent::Kind::Log) logs.push_back(e.text);
      cv.notify_all();
    };
  }
  bool wait_message(const std::string& m, std::chrono::milliseconds timeout = 20s) {
    std::unique_lock lock(mu);
    return cv.wait_for(lock, timeout, [&] {
      return std::find(messages.begin(), messages.end(), m) != messages.end();
    });
  }
  std::vector<std::string> all() {
    std::lock_guard lock(mu);
    return messages;
  }
  std::string log_containing(const std::string& s) {
    std::lock_guard lock(mu);
    for (const auto& l : logs)
      if (l.find(s) != std::string::npos) return l;
    return {};
  }
};

template <typename Pred>
bool eventually(Pred pred, std::chrono::milliseconds timeout = 5s) {
  auto until = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < until) {
    if (pred()) return true;
    std::this_thread::sleep_for(5ms);
  }
  return pred();
}

// ---- the policy, without a guest ---------------------------------------------------------------

TEST(HttpPolicy, AllowListMatchesHostAndPort) {
  HttpClient c(HttpConfig{.allow = {"Example.COM", "127.0.0.1:8080", "[::1]:9000"}});
  std::string why;
  EXPECT_EQ(c.check("http://example.com/a", &why), PITH_OK);
  EXPECT_EQ(c.check("https://EXAMPLE.com.:444/a?b#c", &why), PITH_OK);  // any port, root dot
  EXPECT_EQ(c.check("http://127.0.0.1:8080/x", &why), PITH_OK);
  EXPECT_EQ(c.check("http://[::1]:9000/", &why), PITH_OK);

  EXPECT_EQ(c.check("http://127.0.0.1:8081/x", &why), PITH_ERR_NOT_ENABLED);
  EXPECT_NE(why.find("refused host 127.0.0.1:8081"), std::string::npos) << why;
  EXPECT_EQ(c.check("http://127.0.0.1/x", &why), PITH_ERR_NOT_ENABLED);  // default port 80
  EXPECT_EQ(c.check("http://localhost:8080/", &why), PITH_ERR_NOT_ENABLED);
  EXPECT_EQ(c.check("http://example.com.evil.org/", &why), PITH_ERR_NOT_ENABLED);
  EXPECT_EQ(c.check("http://user@evil.org/?example.com", &why), PITH_ERR_NOT_ENABLED);
  EXPECT_NE(why.find("evil.org"), std::string::npos) << why;

  EXPECT_EQ(c.check("file:///etc/passwd", &why), PITH_ERR_NOT_ENABLED);
  EXPECT_NE(why.find("scheme 'file'"), std::string::npos) << why;
  EXPECT_EQ(c.check("ftp://example.com/", &why), PITH_ERR_NOT_ENABLED);
  EXPECT_EQ(c.check("not a url", &why), PITH_ERR_BAD_ARGUMENT);
  EXPECT_EQ(c.check(std::string_view("http://example.com/\0x", 21), &why), PITH_ERR_BAD_ARGUMENT);
}

TEST(HttpPolicy, BadAllowEntriesAreRejected) {
  for (const char* bad : {"host:0", "host:99999", "host:abc", "a/b", "::1", "[::1", ""})
    EXPECT_THROW(HttpClient(HttpConfig{.allow = {bad}}), Error) << bad;
}

TEST(HttpAddresses, NonPublicAddressesAreRecognised) {
  auto v4 = [](const char* text) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    EXPECT_EQ(inet_pton(AF_INET, text, &a.sin_addr), 1) << text;
    const char* what = nullptr;
    return is_non_public_address(&a, &what) ? std::string(what) : std::string("public");
  };
  auto v6 = [](const char* text) {
    sockaddr_in6 a{};
    a.sin6_family = AF_INET6;
    EXPECT_EQ(inet_pton(AF_INET6, text, &a.sin6_addr), 1) << text;
    const char* what = nullptr;
    return is_non_public_address(&a, &what) ? std::string(what) : std::string("public");
  };
  EXPECT_EQ(v4("127.0.0.1"), "loopback");
  EXPECT_EQ(v4("10.1.2.3"), "private");
  EXPECT_EQ(v4("172.16.0.1"), "private");
  EXPECT_EQ(v4("172.31.255.255"), "private");
  EXPECT_EQ(v4("172.32.0.1"), "public");
  EXPECT_EQ(v4("192.168.1.1"), "private");
  EXPECT_EQ(v4("169.254.169.254"), "link-local");  // cloud metadata endpoints
  EXPECT_EQ(v4("100.64.0.1"), "shared (CGNAT)");
  EXPECT_EQ(v4("100.128.0.1"), "public");
  EXPECT_EQ(v4("0.0.0.0"), "unspecified");
  EXPECT_EQ(v4("224.0.0.1"), "multicast");
  EXPECT_EQ(v4("8.8.8.8"), "public");
  EXPECT_EQ(v6("::1"), "loopback");
  EXPECT_EQ(v6("::"), "unspecified");
  EXPECT_EQ(v6("fe80::1"), "link-local");
  EXPECT_EQ(v6("fd00::1"), "private (unique-local)");
  EXPECT_EQ(v6("::ffff:10.0.0.1"), "private");
  EXPECT_EQ(v6("::ffff:8.8.8.8"), "public");
  EXPECT_EQ(v6("2001:4860:4860::8888"), "public");
}

// ---- through a guest -------------------------------------------------------------------------

class RuntimeHttpTest : public ::testing::TestWithParam<TierPolicy> {
 protected:
  void SetUp() override { ASSERT_TRUE(inferlet_built(inferlet("http_fetch"))); }
  RuntimeConfig config(std::vector<std::string> allow, int threads = 1) {
    RuntimeConfig c;
    c.compiler.cache_dir = PITH_TEST_NATIVE_CACHE;
    c.threads = threads;
    c.tiers = GetParam();
    c.http_allow = std::move(allow);
    return c;
  }
  std::vector<std::string> fetch(Runtime& rt, std::vector<std::string> args, Events* ev = nullptr) {
    Events local;
    Events& e = ev ? *ev : local;
    args.insert(args.begin(), "http_fetch");
    auto inst = rt.launch(rt.load_program_file(inferlet("http_fetch")), args, e.sink());
    EXPECT_EQ(inst->wait().reason, "exited with code 0");
    return e.all();
  }
  std::string here(const TinyHttpServer& s) { return "127.0.0.1:" + std::to_string(s.port()); }
};

INSTANTIATE_TEST_SUITE_P(Tiers, RuntimeHttpTest,
                         ::testing::Values(TierPolicy::NativeOnly, TierPolicy::InterpreterOnly),
                         [](const auto& info) {
                           return info.param == TierPolicy::NativeOnly ? "Native" : "Interpreter";
                         });

using Lines = std::vector<std::string>;

TEST_P(RuntimeHttpTest, GetAndPostReturnStatusAndBody) {
  TinyHttpServer srv;
  Runtime rt(config({here(srv)}));
  EXPECT_EQ(fetch(rt, {"get", srv.url("/hello")}), (Lines{"status 200", "body hello"}));
  EXPECT_EQ(fetch(rt, {"post", srv.url("/echo"), R"({"q":1})"}),
            (Lines{"status 201", R"(body application/json|{"q":1})"}));
  EXPECT_EQ(fetch(rt, {"post", srv.url("/echo"), "raw"}),
            (Lines{"status 201", "body application/octet-stream|raw"}));
  EXPECT_EQ(fetch(rt, {"get", srv.url("/status/404")}), (Lines{"status 404", "body status 404"}));
  // Redirects are returned, not followed.
  EXPECT_EQ(fetch(rt, {"get", srv.url("/redirect")}), (Lines{"status 302", "body moved"}));
  EXPECT_EQ(srv.requests(), 5);
  // Nobody listens on a port the server just closed: a network error, not a crash.
  int dead_port = 0;
  {
    TinyHttpServer gone;
    dead_port = gone.port();
  }
  Runtime rt2(config({"127.0.0.1"}));
  EXPECT_EQ(fetch(rt2, {"get", "http://127.0.0.1:" + std::to_string(dead_port) + "/"}),
            (Lines{"error network error"}));
}

TEST_P(RuntimeHttpTest, DisabledWithoutAnAllowList) {
  TinyHttpServer srv;
  Runtime rt(config({}));
  Events ev;
  EXPECT_EQ(fetch(rt, {"get", srv.url("/hello")}, &ev), (Lines{"error not enabled"}));
  EXPECT_NE(ev.log_containing("not enabled in this server"), "");
  EXPECT_EQ(srv.requests(), 0);
}

TEST_P(RuntimeHttpTest, RefusedHostIsLoggedAndNeverContacted) {
  TinyHttpServer srv, other;
  Runtime rt(config({here(srv)}));
  Events ev;
  EXPECT_EQ(fetch(rt, {"get", other.url("/hello")}, &ev), (Lines{"error not enabled"}));
  EXPECT_NE(ev.log_containing("refused host " + here(other)), "");
  Events ev2;
  std::string by_name = "http://localhost:" + std::to_string(srv.port()) + "/hello";
  EXPECT_EQ(fetch(rt, {"get", by_name}, &ev2), (Lines{"error not enabled"}));
  EXPECT_NE(ev2.log_containing("refused host localhost:"), "");
  EXPECT_EQ(fetch(rt, {"get", "file:///etc/passwd"}), (Lines{"error not enabled"}));
  EXPECT_EQ(srv.requests() + other.requests(), 0);
}

TEST_P(RuntimeHttpTest, AllowedNamesThatResolveToPrivateAddressesAreRefused) {
  TinyHttpServer srv;
  const std::string name = "localhost:" + std::to_string(srv.port());
  Runtime rt(config({name}));
  Events ev;
  EXPECT_EQ(fetch(rt, {"get", "http://" + name + "/hello"}, &ev), (Lines{"error not enabled"}));
  EXPECT_NE(ev.log_containing("a loopback address"), "") << ev.log_containing("http");
  EXPECT_EQ(srv.requests(), 0);
  // The operator may allow it; a listed address literal is always what the operator chose.
  RuntimeConfig c = config({name});
  c.http_allow_private = true;
  Runtime allowed(c);
  EXPECT_EQ(fetch(allowed, {"get", "http://" + name + "/hello"}),
            (Lines{"status 200", "body hello"}));
  Runtime literal(config({here(srv)}));
  EXPECT_EQ(fetch(literal, {"get", srv.url("/hello")}), (Lines{"status 200", "body hello"}));
  EXPECT_EQ(srv.requests(), 2);
}

TEST_P(RuntimeHttpTest, SlowServerTimesOut) {
  TinyHttpServer srv;
  RuntimeConfig c = config({here(srv)});
  c.http_timeout_ms = 300;
  Runtime rt(c);
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(fetch(rt, {"get", srv.url("/slow/5000")}), (Lines{"error timeout"}));
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 3s);
  EXPECT_EQ(fetch(rt, {"get", srv.url("/slow/10")}), (Lines{"status 200", "body slow"}));
}

TEST_P(RuntimeHttpTest, OversizedResponseIsAnErrorNotTruncated) {
  TinyHttpServer srv;
  RuntimeConfig c = config({here(srv)});
  c.http_max_response_bytes = 1 << 20;
  Runtime rt(c);
  // Exactly at the cap is fine; one byte more fails, with or without a Content-Length.
  EXPECT_EQ(fetch(rt, {"all", srv.url("/big/1048576"), srv.url("/big/1048577"),
                       srv.url("/chunked/1048576"), srv.url("/chunked/3000000")}),
            (Lines{"0: status 200 1048576", "1: error limit exceeded", "2: status 200 1048576",
                   "3: error limit exceeded"}));
}

TEST_P(RuntimeHttpTest, ConcurrentRequestsDoNotBlockTheSchedulerThread) {
  TinyHttpServer srv;
  Runtime rt(config({here(srv)}, /*threads=*/1));
  auto prog = rt.load_program_file(inferlet("http_fetch"));
  rt.launch(prog, {"http_fetch"})->wait();  // a usage error; only makes sure the code is built
  Events fetch_ev, echo_ev;
  auto echo = rt.launch(rt.load_program_file(inferlet("echo")), {"echo"}, echo_ev.sink());
  ASSERT_TRUE(echo_ev.wait_message("arg 0: echo"));
  std::vector<std::string> args = {"http_fetch", "all"};
  for (int i = 0; i < 6; ++i) args.push_back(srv.url("/slow/500"));
  auto t0 = std::chrono::steady_clock::now();
  auto f = rt.launch(prog, args, fetch_ev.sink());
  // The same (only) scheduler thread answers another instance while the requests run.
  ASSERT_TRUE(eventually([&] { return srv.requests() == 6; }, 2s));
  echo->push_message("ping");
  ASSERT_TRUE(echo_ev.wait_message("echo: ping", 2s));
  EXPECT_TRUE(fetch_ev.all().empty());  // still waiting for the slow server
  EXPECT_EQ(f->wait().reason, "exited with code 0");
  auto took = std::chrono::steady_clock::now() - t0;
  Lines want;
  for (int i = 0; i < 6; ++i) want.push_back(std::to_string(i) + ": status 200 4");
  EXPECT_EQ(fetch_ev.all(), want);
  EXPECT_LT(took, 2500ms);  // in parallel: one sequential pass would take 3 s
  echo->close_input();
  echo->wait();
}

TEST_P(RuntimeHttpTest, InstanceKilledMidRequestCancelsIt) {
  TinyHttpServer srv;
  Runtime rt(config({here(srv)}));
  Events ev;
  auto inst = rt.launch(rt.load_program_file(inferlet("http_fetch")),
                        {"http_fetch", "get", srv.url("/hang")}, ev.sink());
  ASSERT_TRUE(eventually([&] { return srv.hang_open() == 1; }));
  ASSERT_EQ(rt.http()->in_flight(), 1u);
  inst->kill();
  EXPECT_EQ(inst->wait().reason, "killed: by request");
  // The transfer is aborted: the server sees its connection closed.
  EXPECT_TRUE(eventually([&] { return srv.hang_closed() == 1; }));
  EXPECT_TRUE(eventually([&] { return rt.http()->in_flight() == 0; }));
  EXPECT_TRUE(ev.all().empty());
  // The runtime keeps serving requests.
  EXPECT_EQ(fetch(rt, {"get", srv.url("/hello")}), (Lines{"status 200", "body hello"}));
}

TEST_P(RuntimeHttpTest, RuntimeEndsWithARequestInFlight) {
  TinyHttpServer srv;
  {
    Runtime rt(config({here(srv)}));
    auto inst = rt.launch(rt.load_program_file(inferlet("http_fetch")),
                          {"http_fetch", "get", srv.url("/hang")});
    ASSERT_TRUE(eventually([&] { return srv.hang_open() == 1; }));
  }  // kills the instance, then aborts the transfer
  EXPECT_TRUE(eventually([&] { return srv.hang_closed() == 1; }));
}

}  // namespace
}  // namespace pith::runtime
