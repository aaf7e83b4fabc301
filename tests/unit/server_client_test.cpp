// The CLI's HTTP/SSE client (src/cli/server_client.h, sse_parser.h): the event-stream parser
// on every way a stream can be cut into pieces, and the client's error mapping, POST bodies and
// stream cancellation against a real HTTP peer on 127.0.0.1 (tests/unit/tiny_http_server.h).
// The client against `pith serve` itself is covered end to end by tests/e2e/cli_client.py.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <vector>

#include "cli/server_client.h"
#include "cli/sse_parser.h"
#include "tiny_http_server.h"

namespace pith::cli {
namespace {

const std::string kStream =
    ": keep-alive\r\n\r\n"
    "id: 3\nevent: message\ndata: {\"text\":\"hello\"}\n\n"
    "id: 4\r\nevent: log\r\ndata: line one\r\ndata:line two\r\n\r\n"
    "data: no id, default type\n\n"
    "retry: 100\nid: 9\nevent: terminated\ndata: {}\n\n";

std::vector<SseEvent> parse_in_pieces(const std::string& text, size_t piece) {
  SseParser p;
  std::vector<SseEvent> out;
  for (size_t at = 0; at < text.size(); at += piece)
    EXPECT_TRUE(p.feed(std::string_view(text).substr(at, piece), [&](const SseEvent& e) {
      out.push_back(e);
      return true;
    }));
  return out;
}

TEST(SseParser, SameEventsHoweverTheStreamIsCut) {
  for (size_t piece : {size_t{1}, size_t{2}, size_t{3}, size_t{7}, kStream.size()}) {
    SCOPED_TRACE(piece);
    auto ev = parse_in_pieces(kStream, piece);
    ASSERT_EQ(ev.size(), 4u);
    EXPECT_EQ(ev[0].id, 3u);
    EXPECT_EQ(ev[0].event, "message");
    EXPECT_EQ(ev[0].data, "{\"text\":\"hello\"}");
    EXPECT_EQ(ev[1].id, 4u);
    EXPECT_EQ(ev[1].event, "log");
    EXPECT_EQ(ev[1].data, "line one\nline two");  // CR stripped, one optional space after ':'
    EXPECT_FALSE(ev[2].id.has_value());
    EXPECT_EQ(ev[2].event, "message");
    EXPECT_EQ(ev[3].id, 9u);
    EXPECT_EQ(ev[3].event, "terminated");
  }
}

TEST(SseParser, LastIdCountsOnlyCompleteEvents) {
  SseParser p;
  auto keep = [](const SseEvent&) { return true; };
  p.feed("id: 5\ndata: x\n\nid: 6\ndata: half", keep);
  EXPECT_EQ(p.last_id(), 5u);  // event 6 was cut: a reconnect must ask for it again
  p.feed("\n\n", keep);
  EXPECT_EQ(p.last_id(), 6u);
  p.feed("id: nope\ndata: y\n\n", keep);
  EXPECT_EQ(p.last_id(), 6u);  // a non-numeric id is ignored
}

TEST(SseParser, EventWithoutDataIsNotDispatched) {
  auto ev = parse_in_pieces("event: ping\n\nid: 1\n\ndata:\n\n", 4);
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].data, "");
  EXPECT_EQ(ev[0].event, "message");  // the type reset after the empty event
}

TEST(SseParser, HandlerStopsTheStream) {
  SseParser p;
  int seen = 0;
  EXPECT_FALSE(
      p.feed("data: a\n\ndata: b\n\ndata: c\n\n", [&](const SseEvent&) { return ++seen < 2; }));
  EXPECT_EQ(seen, 2);
}

// A loopback port nobody listens on.
int closed_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

TEST(ServerClient, ConnectionRefusedNamesTheServer) {
  const std::string url = "127.0.0.1:" + std::to_string(closed_port());
  ServerClient c(url, "");
  EXPECT_EQ(c.url(), "http://" + url);  // scheme added
  try {
    c.get("/v1/instances");
    FAIL() << "no error";
  } catch (const ServerError&) {
    FAIL() << "a transport failure is not a server answer";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot connect to the pith server at http://" + url),
              std::string::npos)
        << e.what();
  }
}

TEST(ServerClient, ErrorStatusesBecomeServerErrors) {
  test::TinyHttpServer s;
  ServerClient c(s.url("/"), "secret");  // trailing slash dropped
  try {
    c.get("/status/429");
    FAIL() << "no error";
  } catch (const ServerError& e) {
    EXPECT_EQ(e.status(), 429);
    EXPECT_EQ(e.type(), "http_error");  // no JSON error body: the text is kept
    EXPECT_NE(std::string(e.what()).find("status 429"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(c.exists("/status/404"));
  EXPECT_TRUE(c.exists("/hello"));
  EXPECT_THROW(c.exists("/status/500"), ServerError);
  // 200 with a body that is not JSON is an error of its own.
  EXPECT_THROW(c.get("/hello"), Error);
}

TEST(ServerClient, JsonErrorBodyIsParsed) {
  HttpResponse r{
      404, R"({"error":{"message":"program ab is not uploaded","type":"not_found","code":404}})",
      "application/json"};
  ServerError e = ServerClient::error_of(r);
  EXPECT_EQ(e.status(), 404);
  EXPECT_EQ(e.type(), "not_found");
  EXPECT_NE(std::string(e.what()).find("program ab is not uploaded"), std::string::npos);
}

TEST(ServerClient, PostSendsBodyAndType) {
  test::TinyHttpServer s;
  ServerClient c(s.url(""), "");
  std::string bytes("\0asm\x01\0\0\0", 8);
  HttpResponse r = c.perform(http_request("POST", "/echo", bytes, "application/wasm"));
  EXPECT_EQ(r.status, 201);
  EXPECT_EQ(r.body, "application/wasm|" + bytes);
  r = c.perform(http_request("POST", "/echo"));
  EXPECT_EQ(r.body, "application/octet-stream|");  // an empty POST still has a body (length 0)
}

TEST(ServerClient, CancelEndsAQuietStream) {
  test::TinyHttpServer s;
  ServerClient c(s.url(""), "");
  const auto t0 = std::chrono::steady_clock::now();
  auto end = c.stream(
      http_request("GET", "/hang"), [](const SseEvent&) { return true; },
      [t0] { return std::chrono::steady_clock::now() - t0 > std::chrono::milliseconds(300); });
  EXPECT_EQ(end, ServerClient::StreamEnd::Cancelled);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(2));
  for (int i = 0; i < 200 && s.hang_closed() == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(s.hang_closed(), 1);  // the connection was closed, not leaked
}

}  // namespace
}  // namespace pith::cli
