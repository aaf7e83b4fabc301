#include "cli/server_client.h"

#include <curl/curl.h>
#include <fmt/format.h>

#include <exception>
#include <memory>
#include <mutex>

namespace pith::cli {

using nlohmann::json;

namespace {

constexpr size_t kMaxErrorBody = 64 << 10;

// CURL and CURLM are both void: one deleter type each.
struct EasyDeleter {
  void operator()(CURL* h) const { curl_easy_cleanup(h); }
};
struct MultiDeleter {
  void operator()(CURLM* m) const { curl_multi_cleanup(m); }
};
struct ListDeleter {
  void operator()(curl_slist* l) const { curl_slist_free_all(l); }
};
using EasyHandle = std::unique_ptr<CURL, EasyDeleter>;
using MultiHandle = std::unique_ptr<CURLM, MultiDeleter>;
using HeaderList = std::unique_ptr<curl_slist, ListDeleter>;

std::string normalize_url(std::string url) {
  if (url.find("://") == std::string::npos) url = "http://" + url;
  while (!url.empty() && url.back() == '/') url.pop_back();
  return url;
}

// One configured easy handle for `request`; `headers` and `errbuf` must outlive the transfer.
EasyHandle make_handle(const std::string& url, const std::string& api_key, const HttpRequest& r,
                       HeaderList& headers, char* errbuf) {
  EasyHandle h(curl_easy_init());
  if (!h) fail("libcurl: cannot create a handle");
  CURL* c = h.get();
  const std::string full = url + r.path;
  curl_easy_setopt(c, CURLOPT_URL, full.c_str());
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);  // the CLI's own SIGINT handler must stay in charge
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, 10'000L);
  curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
  curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
  if (r.method == "HEAD") {
    curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
  } else if (r.method == "POST") {
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, r.body.data());
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(r.body.size()));
  } else if (r.method != "GET") {
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, r.method.c_str());
  }
  if (r.idle_timeout_s > 0) {
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, r.idle_timeout_s);
  }
  std::vector<std::string> lines = r.headers;
  if (!api_key.empty()) lines.push_back("Authorization: Bearer " + api_key);
  // A POST without a type would claim a form; an upload must not wait for 100-continue.
  if (r.method == "POST")
    lines.push_back("Content-Type: " +
                    (r.content_type.empty() ? "application/octet-stream" : r.content_type));
  lines.push_back("Expect:");
  curl_slist* list = nullptr;
  for (const auto& l : lines) {
    curl_slist* next = curl_slist_append(list, l.c_str());
    if (!next) {
      curl_slist_free_all(list);
      fail("libcurl: out of memory");
    }
    list = next;
  }
  headers.reset(list);
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, list);
  return h;
}

[[noreturn]] void transport_failure(const std::string& url, const HttpRequest& r, CURLcode code,
                                    const char* errbuf) {
  std::string detail = errbuf[0] ? errbuf : curl_easy_strerror(code);
  if (code == CURLE_COULDNT_CONNECT || code == CURLE_COULDNT_RESOLVE_HOST)
    fail(
        "cannot connect to the pith server at {}: {} (start one with `pith serve -m MODEL`, or "
        "point --server / "
        "PITH_SERVER at it)",
        url, detail);
  fail("{} {}{}: {}", r.method, url, r.path, detail);
}

size_t collect(char* data, size_t size, size_t n, void* user) {
  static_cast<std::string*>(user)->append(data, size * n);
  return size * n;
}

void response_info(CURL* c, HttpResponse& out) {
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &out.status);
  char* type = nullptr;
  curl_easy_getinfo(c, CURLINFO_CONTENT_TYPE, &type);
  if (type) out.content_type = type;
}

json parse_json_body(const HttpResponse& r) {
  if (r.body.empty()) return nullptr;
  json j = json::parse(r.body, nullptr, false);
  if (j.is_discarded())
    fail("the server answered {} with a body that is not JSON: {:.200}", r.status, r.body);
  return j;
}

// The state of one event stream, shared with libcurl's write callback.
struct StreamState {
  CURL* handle = nullptr;
  const SseHandler* on_event = nullptr;
  SseParser parser;
  long status = 0;
  std::string error_body;
  bool stopped = false;
  std::exception_ptr failure;  // thrown by the handler; rethrown outside libcurl
};

size_t stream_write(char* data, size_t size, size_t n, void* user) {
  auto* s = static_cast<StreamState*>(user);
  const size_t len = size * n;
  if (s->status == 0) curl_easy_getinfo(s->handle, CURLINFO_RESPONSE_CODE, &s->status);
  if (s->status >= 400) {
    if (s->error_body.size() < kMaxErrorBody)
      s->error_body.append(data, std::min(len, kMaxErrorBody - s->error_body.size()));
    return len;
  }
  try {
    if (!s->parser.feed(std::string_view(data, len), *s->on_event)) {
      s->stopped = true;
      return 0;  // aborts the transfer
    }
  } catch (...) {
    s->failure = std::current_exception();
    return 0;
  }
  return len;
}

}  // namespace

ServerError::ServerError(long status, std::string type, const std::string& message)
    : Error(fmt::format("the server answered {} ({}): {}", status, type, message)),
      status_(status),
      type_(std::move(type)) {}

ServerClient::ServerClient(std::string url, std::string api_key)
    : url_(normalize_url(std::move(url))), api_key_(std::move(api_key)) {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

ServerError ServerClient::error_of(const HttpResponse& r) {
  json j = json::parse(r.body, nullptr, false);
  if (!j.is_discarded() && j.is_object() && j.contains("error") && j["error"].is_object()) {
    const json& e = j["error"];
    std::string type = e.value("type", "error");
    std::string message = e.value("message", r.body);
    return ServerError(r.status, type, message);
  }
  std::string text = r.body.size() > 200 ? r.body.substr(0, 200) + "..." : r.body;
  return ServerError(r.status, "http_error", text.empty() ? "(no body)" : text);
}

HttpResponse ServerClient::perform(const HttpRequest& request) const {
  HeaderList headers;
  char errbuf[CURL_ERROR_SIZE] = {0};
  EasyHandle h = make_handle(url_, api_key_, request, headers, errbuf);
  HttpResponse out;
  curl_easy_setopt(h.get(), CURLOPT_WRITEFUNCTION, collect);
  curl_easy_setopt(h.get(), CURLOPT_WRITEDATA, &out.body);
  CURLcode rc = curl_easy_perform(h.get());
  if (rc != CURLE_OK) transport_failure(url_, request, rc, errbuf);
  response_info(h.get(), out);
  return out;
}

json ServerClient::get(const std::string& path) const {
  HttpResponse r = perform(http_request("GET", path));
  if (r.status >= 400) throw error_of(r);
  return parse_json_body(r);
}

json ServerClient::post(const std::string& path, const json& body) const {
  HttpResponse r = perform(http_request("POST", path, body.dump(), "application/json"));
  if (r.status >= 400) throw error_of(r);
  return parse_json_body(r);
}

json ServerClient::post_bytes(const std::string& path, std::string bytes,
                              const std::string& content_type) const {
  HttpResponse r = perform(http_request("POST", path, std::move(bytes), content_type));
  if (r.status >= 400) throw error_of(r);
  return parse_json_body(r);
}

json ServerClient::del(const std::string& path) const {
  HttpResponse r = perform(http_request("DELETE", path));
  if (r.status >= 400) throw error_of(r);
  return parse_json_body(r);
}

bool ServerClient::exists(const std::string& path) const {
  HttpResponse r = perform(http_request("HEAD", path));
  if (r.status == 404) return false;
  if (r.status >= 400) throw ServerError(r.status, "http_error", fmt::format("HEAD {}", path));
  return true;
}

ServerClient::StreamEnd ServerClient::stream(const HttpRequest& request, const SseHandler& on_event,
                                             const std::function<bool()>& cancelled) const {
  HeaderList headers;
  char errbuf[CURL_ERROR_SIZE] = {0};
  HttpRequest r = request;
  r.headers.push_back("Accept: text/event-stream");
  EasyHandle h = make_handle(url_, api_key_, r, headers, errbuf);
  StreamState state;
  state.handle = h.get();
  state.on_event = &on_event;
  curl_easy_setopt(h.get(), CURLOPT_WRITEFUNCTION, stream_write);
  curl_easy_setopt(h.get(), CURLOPT_WRITEDATA, &state);

  // The multi interface waits in slices, so `cancelled` is seen within ~100 ms even on a
  // quiet stream.
  MultiHandle m(curl_multi_init());
  if (!m) fail("libcurl: cannot create a multi handle");
  curl_multi_add_handle(m.get(), h.get());
  CURLcode result = CURLE_OK;
  bool cancel = false;
  for (;;) {
    int running = 0;
    curl_multi_perform(m.get(), &running);
    int queued = 0;
    bool done = false;
    while (CURLMsg* msg = curl_multi_info_read(m.get(), &queued)) {
      if (msg->msg == CURLMSG_DONE) {
        result = msg->data.result;
        done = true;
      }
    }
    if (done || running == 0) break;
    if (cancelled && cancelled()) {
      cancel = true;
      break;
    }
    curl_multi_poll(m.get(), nullptr, 0, 100, nullptr);
  }
  curl_multi_remove_handle(m.get(), h.get());
  if (state.failure) std::rethrow_exception(state.failure);
  if (cancel) return StreamEnd::Cancelled;
  if (state.stopped) return StreamEnd::Stopped;
  if (result != CURLE_OK) transport_failure(url_, r, result, errbuf);
  HttpResponse resp;
  response_info(h.get(), resp);
  if (resp.status >= 400) {
    resp.body = std::move(state.error_body);
    throw error_of(resp);
  }
  return StreamEnd::Closed;
}

}  // namespace pith::cli
