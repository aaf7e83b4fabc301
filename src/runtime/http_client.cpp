// Inferlet HTTP over libcurl's multi interface. See http_client.h.
#include "runtime/http_client.h"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <list>
#include <mutex>
#include <thread>
#include <utility>

#include "common/error.h"

namespace pith::runtime {

namespace {

constexpr size_t kMaxUrlBytes = 8192;
// How often the worker asks whether running transfers are still wanted.
constexpr auto kWantedInterval = std::chrono::milliseconds(50);

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return out;
}

// Hosts compare case-insensitively and without a trailing root dot ("Example.COM." =
// "example.com").
std::string normalize_host(std::string_view host) {
  std::string h = lower(host);
  if (h.size() > 1 && h.back() == '.') h.pop_back();
  return h;
}

bool parse_port(std::string_view s, uint32_t* port) {
  uint32_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || p != s.data() + s.size() || v == 0 || v > 65535)
    return false;
  *port = v;
  return true;
}

void global_init() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

// A parsed URL (curl's own parser, so the check and the transfer see the same host).
struct ParsedUrl {
  CURLU* handle = nullptr;
  std::string scheme, host;
  uint32_t port = 0;
  ParsedUrl() = default;
  ParsedUrl(const ParsedUrl&) = delete;
  ParsedUrl& operator=(const ParsedUrl&) = delete;
  ~ParsedUrl() {
    if (handle) curl_url_cleanup(handle);
  }
  CURLU* release() { return std::exchange(handle, nullptr); }
};

std::string get_part(CURLU* u, CURLUPart part, unsigned flags = 0) {
  char* v = nullptr;
  if (curl_url_get(u, part, &v, flags) != CURLUE_OK || !v) return {};
  std::string s(v);
  curl_free(v);
  return s;
}

// PITH_OK with `out` filled; PITH_ERR_NOT_ENABLED for a scheme other than http(s);
// PITH_ERR_BAD_ARGUMENT for anything else that is not a URL with a host. The reason goes to *why.
// An IPv4 dotted quad or a bracketed IPv6 literal (as normalize_host leaves them).
bool is_address_literal(const std::string& host) {
  in_addr a4;
  if (inet_pton(AF_INET, host.c_str(), &a4) == 1) return true;
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
    in6_addr a6;
    return inet_pton(AF_INET6, host.substr(1, host.size() - 2).c_str(), &a6) == 1;
  }
  return false;
}

pith_status_t parse_url(std::string_view url, ParsedUrl* out, std::string* why) {
  if (url.empty() || url.size() > kMaxUrlBytes || url.find('\0') != std::string_view::npos) {
    *why = fmt::format("http: refused a malformed URL ({} bytes)", url.size());
    return PITH_ERR_BAD_ARGUMENT;
  }
  out->handle = curl_url();
  if (!out->handle) throw Error("http: out of memory");
  std::string s(url);
  CURLUcode rc = curl_url_set(out->handle, CURLUPART_URL, s.c_str(), 0);
  if (rc != CURLUE_OK) {
    *why = fmt::format("http: refused '{:.200}': {}", s, curl_url_strerror(rc));
    return PITH_ERR_BAD_ARGUMENT;
  }
  out->scheme = lower(get_part(out->handle, CURLUPART_SCHEME));
  if (out->scheme != "http" && out->scheme != "https") {
    *why = fmt::format("http: refused scheme '{}' (only http and https)", out->scheme);
    return PITH_ERR_NOT_ENABLED;
  }
  out->host = normalize_host(get_part(out->handle, CURLUPART_HOST));
  std::string port = get_part(out->handle, CURLUPART_PORT, CURLU_DEFAULT_PORT);
  if (out->host.empty() || !parse_port(port, &out->port)) {
    *why = fmt::format("http: refused '{:.200}': no host or port", s);
    return PITH_ERR_BAD_ARGUMENT;
  }
  return PITH_OK;
}

}  // namespace

// ---------------------------------------------------------------- the worker

struct HttpClient::Worker {
  struct Transfer {
    HttpRequest request;
    std::function<bool()> wanted;
    HttpDone done;
    CURL* easy = nullptr;
    CURLU* url = nullptr;
    curl_slist* headers = nullptr;
    std::string response;
    size_t max_bytes = 0;
    bool too_big = false;
    bool check_address = false;   // the host is a name: refuse non-public addresses it resolves to
    std::string refused_address;  // set when that refusal happened
    char error[CURL_ERROR_SIZE] = {};

    ~Transfer() {
      if (easy) curl_easy_cleanup(easy);
      if (url) curl_url_cleanup(url);
      if (headers) curl_slist_free_all(headers);
    }
  };

  explicit Worker(const HttpConfig& config) : config(config) {
    global_init();
    multi = curl_multi_init();
    if (!multi) throw Error("http: curl_multi_init failed");
    thread = std::thread([this] { loop(); });
  }

  ~Worker() {
    {
      std::lock_guard lock(mu);
      stop = true;
    }
    curl_multi_wakeup(multi);
    thread.join();
    for (auto& t : running) curl_multi_remove_handle(multi, t->easy);
    running.clear();
    queued.clear();
    curl_multi_cleanup(multi);
  }

  void submit(std::unique_ptr<Transfer> t) {
    {
      std::lock_guard lock(mu);
      queued.push_back(std::move(t));
      ++count;
    }
    curl_multi_wakeup(multi);
  }

  static size_t on_body(char* data, size_t size, size_t n, void* user) {
    auto* t = static_cast<Transfer*>(user);
    size_t bytes = size * n;
    if (t->response.size() - 4 + bytes > t->max_bytes) {
      t->too_big = true;
      return 0;  // aborts the transfer with CURLE_WRITE_ERROR
    }
    t->response.append(data, bytes);
    return bytes;
  }

  // Opens the connection's socket unless the name resolved to a non-public address.
  static curl_socket_t open_socket(void* user, curlsocktype purpose, curl_sockaddr* address) {
    auto* t = static_cast<Transfer*>(user);
    const char* what = nullptr;
    if (purpose == CURLSOCKTYPE_IPCXN && is_non_public_address(&address->addr, &what)) {
      char text[INET6_ADDRSTRLEN] = "?";
      const auto* sa = reinterpret_cast<const sockaddr*>(&address->addr);
      if (sa->sa_family == AF_INET)
        inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(sa)->sin_addr, text, sizeof text);
      else if (sa->sa_family == AF_INET6)
        inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(sa)->sin6_addr, text,
                  sizeof text);
      t->refused_address = fmt::format("{}, a {} address", text, what);
      return CURL_SOCKET_BAD;
    }
    return socket(address->family, address->socktype, address->protocol);
  }

  // Sets up the easy handle; false (and the transfer completed with an error) if curl refuses.
  bool begin(Transfer& t) {
    t.easy = curl_easy_init();
    if (!t.easy) return false;
    t.response.assign(4, '\0');  // room for the status code
    t.max_bytes = config.max_response_bytes;
    CURL* e = t.easy;
    curl_easy_setopt(e, CURLOPT_CURLU, t.url);
    curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);  // scheduler threads own the signals
    curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, static_cast<long>(config.timeout_ms));
    curl_easy_setopt(e, CURLOPT_MAXFILESIZE_LARGE,
                     static_cast<curl_off_t>(config.max_response_bytes));
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, &Worker::on_body);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, &t);
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, t.error);
    curl_easy_setopt(e, CURLOPT_USERAGENT, "pith-inferlet");
    curl_easy_setopt(e, CURLOPT_PRIVATE, &t);
    if (t.check_address) {
      curl_easy_setopt(e, CURLOPT_OPENSOCKETFUNCTION, &Worker::open_socket);
      curl_easy_setopt(e, CURLOPT_OPENSOCKETDATA, &t);
    }
    t.headers = curl_slist_append(t.headers, "Expect:");  // no 100-continue round trip
    if (t.request.method == "POST") {
      // The ABI has no headers: JSON-looking bodies are labelled JSON, others as raw bytes.
      auto first = std::find_if(t.request.body.begin(), t.request.body.end(), [](char c) {
        return c != ' ' && c != '\n' && c != '\r' && c != '\t';
      });
      bool json = first != t.request.body.end() && (*first == '{' || *first == '[');
      t.headers = curl_slist_append(t.headers, json ? "Content-Type: application/json"
                                                    : "Content-Type: application/octet-stream");
      curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE,
                       static_cast<curl_off_t>(t.request.body.size()));
      curl_easy_setopt(e, CURLOPT_POSTFIELDS, t.request.body.data());
    } else {
      curl_easy_setopt(e, CURLOPT_HTTPGET, 1L);
    }
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, t.headers);
    return curl_multi_add_handle(multi, e) == CURLM_OK;
  }

  void finish(Transfer& t, CURLcode rc) {
    if (rc == CURLE_OK) {
      long code = 0;
      curl_easy_getinfo(t.easy, CURLINFO_RESPONSE_CODE, &code);
      uint32_t c = static_cast<uint32_t>(code);
      std::memcpy(t.response.data(), &c, 4);  // little endian, as the guest reads it
      t.done(PITH_OK, std::move(t.response));
    } else if (!t.refused_address.empty()) {
      t.done(PITH_ERR_NOT_ENABLED,
             fmt::format("http: refused {}: it resolves to {} (allow with "
                         "--inferlet-http-allow-private, or list the address itself)",
                         t.request.url, t.refused_address));
    } else if (t.too_big || rc == CURLE_FILESIZE_EXCEEDED) {
      t.done(PITH_ERR_LIMIT,
             fmt::format("response larger than {} bytes", config.max_response_bytes));
    } else if (rc == CURLE_OPERATION_TIMEDOUT) {
      t.done(PITH_ERR_TIMEOUT, fmt::format("no complete response within {} ms", config.timeout_ms));
    } else {
      t.done(PITH_ERR_NETWORK, std::string(t.error[0] ? t.error : curl_easy_strerror(rc)));
    }
  }

  void loop() {
    auto last_wanted_check = std::chrono::steady_clock::now();
    for (;;) {
      std::deque<std::unique_ptr<Transfer>> starting;
      {
        std::lock_guard lock(mu);
        if (stop) return;
        while (!queued.empty() && running.size() + starting.size() < config.max_in_flight) {
          starting.push_back(std::move(queued.front()));
          queued.pop_front();
        }
      }
      for (auto& t : starting) {
        if (!t->wanted()) {
          std::lock_guard lock(mu);
          --count;
          continue;
        }
        if (!begin(*t)) {
          t->done(PITH_ERR_INTERNAL, "http: could not start the transfer");
          std::lock_guard lock(mu);
          --count;
          continue;
        }
        running.push_back(std::move(t));
      }

      int still = 0;
      curl_multi_perform(multi, &still);
      int left = 0;
      while (CURLMsg* m = curl_multi_info_read(multi, &left)) {
        if (m->msg != CURLMSG_DONE) continue;
        Transfer* t = nullptr;
        curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, &t);
        CURLcode rc = m->data.result;
        curl_multi_remove_handle(multi, m->easy_handle);
        finish(*t, rc);
        drop(t);
      }

      auto now = std::chrono::steady_clock::now();
      if (now - last_wanted_check >= kWantedInterval) {
        last_wanted_check = now;
        for (auto it = running.begin(); it != running.end();) {
          Transfer* t = it->get();
          ++it;
          if (!t->wanted()) {
            curl_multi_remove_handle(multi, t->easy);  // closes the connection: the peer sees it
            drop(t);
          }
        }
      }
      // Sleeps until socket activity, a curl timer, a wakeup (new request, stop) or the next
      // wanted-check; idle, it only wakes for new requests.
      int wait_ms = running.empty() ? 60'000 : static_cast<int>(kWantedInterval.count());
      curl_multi_poll(multi, nullptr, 0, wait_ms, nullptr);
    }
  }

  void drop(Transfer* t) {
    running.remove_if([t](const std::unique_ptr<Transfer>& p) { return p.get() == t; });
    std::lock_guard lock(mu);
    --count;
  }

  const HttpConfig& config;
  CURLM* multi = nullptr;
  std::mutex mu;
  bool stop = false;
  std::deque<std::unique_ptr<Transfer>> queued;  // under mu
  size_t count = 0;                              // queued + running, under mu
  std::list<std::unique_ptr<Transfer>> running;  // worker thread only
  std::thread thread;
};

// ---------------------------------------------------------------- addresses

bool is_non_public_address(const void* sockaddr_ptr, const char** what) {
  const char* kind = nullptr;
  const auto* sa = static_cast<const sockaddr*>(sockaddr_ptr);
  auto v4 = [&](uint32_t a) {  // host byte order
    if ((a >> 24) == 127) return "loopback";
    if ((a >> 24) == 10 || (a >> 20) == 0xAC1 || (a >> 16) == 0xC0A8) return "private";
    if ((a >> 16) == 0xA9FE) return "link-local";
    if ((a >> 22) == (100u << 2 | 1)) return "shared (CGNAT)";
    if ((a >> 28) == 0xE) return "multicast";
    if ((a >> 24) == 0) return "unspecified";
    return static_cast<const char*>(nullptr);
  };
  if (sa->sa_family == AF_INET) {
    kind = v4(ntohl(static_cast<const sockaddr_in*>(sockaddr_ptr)->sin_addr.s_addr));
  } else if (sa->sa_family == AF_INET6) {
    const in6_addr& a = static_cast<const sockaddr_in6*>(sockaddr_ptr)->sin6_addr;
    const uint8_t* b = a.s6_addr;
    if (IN6_IS_ADDR_LOOPBACK(&a))
      kind = "loopback";
    else if (IN6_IS_ADDR_UNSPECIFIED(&a))
      kind = "unspecified";
    else if (IN6_IS_ADDR_LINKLOCAL(&a))
      kind = "link-local";
    else if ((b[0] & 0xFE) == 0xFC)
      kind = "private (unique-local)";
    else if (IN6_IS_ADDR_MULTICAST(&a))
      kind = "multicast";
    else if (IN6_IS_ADDR_V4MAPPED(&a))
      kind = v4(uint32_t{b[12]} << 24 | uint32_t{b[13]} << 16 | uint32_t{b[14]} << 8 | b[15]);
  }
  if (what) *what = kind;
  return kind != nullptr;
}

// ---------------------------------------------------------------- the client

HttpClient::HttpClient(HttpConfig config) : config_(std::move(config)) {
  if (config_.timeout_ms == 0) fail("http: the timeout must be > 0 ms");
  if (config_.max_in_flight == 0) fail("http: max_in_flight must be > 0");
  for (const std::string& raw : config_.allow) {
    std::string_view e = raw;
    AllowEntry a;
    size_t colon = std::string_view::npos;
    if (!e.empty() && e.front() == '[') {  // [v6]:port or [v6]
      size_t close = e.find(']');
      if (close == std::string_view::npos)
        fail("http allow list: '{}' is not HOST or HOST:PORT", raw);
      if (close + 1 < e.size()) {
        if (e[close + 1] != ':') fail("http allow list: '{}' is not HOST or HOST:PORT", raw);
        colon = close + 1;
      }
    } else {
      colon = e.rfind(':');
      if (colon != std::string_view::npos && e.find(':') != colon)
        fail("http allow list: '{}': write IPv6 addresses in brackets, e.g. [::1]:8080", raw);
    }
    a.host = normalize_host(e.substr(0, colon));
    if (colon != std::string_view::npos && !parse_port(e.substr(colon + 1), &a.port))
      fail("http allow list: '{}' has a bad port", raw);
    if (a.host.empty() || a.host.find_first_of("/?#@ ") != std::string::npos)
      fail("http allow list: '{}' is not HOST or HOST:PORT", raw);
    allow_.push_back(std::move(a));
  }
  if (!allow_.empty()) worker_ = std::make_unique<Worker>(config_);
}

HttpClient::~HttpClient() = default;

pith_status_t HttpClient::check(std::string_view url, std::string* why) const {
  if (allow_.empty()) {
    *why =
        "http: not enabled in this server (allow hosts with --inferlet-http-allow HOST[,HOST...])";
    return PITH_ERR_NOT_ENABLED;
  }
  ParsedUrl u;
  pith_status_t st = parse_url(url, &u, why);  // also refuses schemes other than http(s)
  if (st != PITH_OK) return st;
  for (const AllowEntry& a : allow_)
    if (a.host == u.host && (a.port == 0 || a.port == u.port)) return PITH_OK;
  *why = fmt::format("http: refused host {}:{} (not in the server's --inferlet-http-allow list)",
                     u.host, u.port);
  return PITH_ERR_NOT_ENABLED;
}

void HttpClient::start(HttpRequest request, std::function<bool()> wanted, HttpDone done) {
  std::string why;
  ParsedUrl u;
  if (!worker_ || check(request.url, &why) != PITH_OK ||
      parse_url(request.url, &u, &why) != PITH_OK) {
    done(PITH_ERR_NOT_ENABLED, why);
    return;
  }
  auto t = std::make_unique<Worker::Transfer>();
  t->check_address = !config_.allow_private && !is_address_literal(u.host);
  t->request = std::move(request);
  t->wanted = std::move(wanted);
  t->done = std::move(done);
  t->url = u.release();
  worker_->submit(std::move(t));
}

size_t HttpClient::in_flight() const {
  if (!worker_) return 0;
  std::lock_guard lock(worker_->mu);
  return worker_->count;
}

}  // namespace pith::runtime
