// Fuzzes the HTTP request handlers of `outbox serve` in-process: a real
// Daemon (embedded SQLite store in a temp dir, strict catalog, bearer token)
// is opened once but never started; each input becomes one HTTP/1.1 request
// that cpp-httplib's own request processing (Server::process_request over an
// in-memory stream, no socket) parses and routes to the daemon's handlers:
// POST /v1/events, GET /v1/tenants/{t}/events, /healthz, /readyz, /metrics,
// /ops/reconcile, /ops/dead-letters, POST /ops/redrive.
//
// Input format (text):
//   line 1            METHOD TARGET            e.g. "POST /v1/events"
//   lines until blank extra headers            e.g. "Idempotency-Key: k1"
//   the rest          the body (Content-Length is computed)
// "Authorization: Bearer <token>" is added unless the input has its own
// Authorization header.
//
// Checks: the server answers every request with a status line; no answer is a
// 500 (a handler threw or an unmapped error); every answer other than
// /metrics is JSON, errors as {"error":{"code","message"}} and 4xx only for a
// client error. Aborts otherwise.
#include <httplib.h>
#include <stdlib.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>

#include "config/daemon_config.h"
#include "nlohmann/json.hpp"
#include "server/daemon.h"
#include "spdlog/spdlog.h"

namespace {

constexpr const char* kToken = "fuzz-token";

// Reads the request from memory, collects the response.
class MemoryStream : public httplib::Stream {
 public:
  explicit MemoryStream(std::string in) : in_(std::move(in)) {}
  bool is_readable() const override { return true; }
  bool is_writable() const override { return true; }
  ssize_t read(char* ptr, size_t size) override {
    size_t n = std::min(size, in_.size() - pos_);
    std::memcpy(ptr, in_.data() + pos_, n);
    pos_ += n;
    return static_cast<ssize_t>(n);
  }
  ssize_t write(const char* ptr, size_t size) override {
    out_.append(ptr, size);
    return static_cast<ssize_t>(size);
  }
  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    ip = "127.0.0.1";
    port = 40000;
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    ip = "127.0.0.1";
    port = 8080;
  }
  socket_t socket() const override { return INVALID_SOCKET; }
  const std::string& out() const { return out_; }

 private:
  std::string in_;
  size_t pos_ = 0;
  std::string out_;
};

// Server::process_request is protected; a pointer to it taken through a
// derived class may be applied to any httplib::Server.
struct ProcessAccess : httplib::Server {
  static bool Process(httplib::Server& server, httplib::Stream& strm) {
    bool closed = false;
    auto fn = &ProcessAccess::process_request;
    return (server.*fn)(strm, /*close_connection=*/true, closed, [](httplib::Request&) {});
  }
};

// Opened once, never started and never destroyed (the process exits after the run).
std::unique_ptr<outbox::server::Daemon> g_daemon;

[[noreturn]] void Fail(const char* what, const std::string& request, const std::string& response) {
  std::fprintf(stderr, "fuzz_http: %s\n--- request\n%s\n--- response\n%s\n", what, request.c_str(),
               response.c_str());
  std::abort();
}

std::string BuildRequest(std::string_view in, std::string* path) {
  auto next_line = [&in]() {
    size_t nl = in.find('\n');
    std::string_view line = in.substr(0, nl);
    in = nl == std::string_view::npos ? std::string_view() : in.substr(nl + 1);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    return std::string(line);
  };
  std::string first = next_line();
  size_t sp = first.find(' ');
  std::string method = sp == std::string::npos ? "GET" : first.substr(0, sp);
  std::string target = sp == std::string::npos ? first : first.substr(sp + 1);
  if (target.empty() || target[0] != '/') target = "/" + target;
  *path = target.substr(0, target.find('?'));
  std::string headers;
  bool has_auth = false;
  while (!in.empty()) {
    std::string h = next_line();
    if (h.empty()) break;
    if (h.size() >= 14 && strncasecmp(h.c_str(), "authorization:", 14) == 0) has_auth = true;
    if (h.size() >= 15 && strncasecmp(h.c_str(), "content-length:", 15) == 0) continue;
    headers += h + "\r\n";
  }
  std::string req = method + " " + target + " HTTP/1.1\r\nHost: fuzz\r\n" + headers;
  if (!has_auth) req += std::string("Authorization: Bearer ") + kToken + "\r\n";
  req += "Content-Length: " + std::to_string(in.size()) + "\r\n\r\n";
  req.append(in.data(), in.size());
  return req;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  spdlog::set_level(spdlog::level::off);
  const char* base = std::filesystem::is_directory("/dev/shm") ? "/dev/shm" : std::getenv("TMPDIR");
  std::string tmpl = std::string(base ? base : "/tmp") + "/outbox-fuzz-http-XXXXXX";
  if (mkdtemp(tmpl.data()) == nullptr) {
    std::perror("fuzz_http: mkdtemp");
    std::abort();
  }
  static const std::string dir = tmpl;
  // The daemon stays open to the end; its files go when the process exits.
  std::atexit([] {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  });
  const std::string toml =
      "[store]\npath = \"" + dir +
      "/outbox.db\"\n"
      "[ops]\nlisten = \"127.0.0.1:0\"\ntoken = \"" +
      kToken +
      "\"\nmax_body_bytes = 65536\n"
      "[records]\ntables = [\"orders\"]\n"
      "[[event_types]]\ntype = \"com.order_placed\"\nproducer = \"shop\"\n"
      "[[event_types]]\ntype = \"com.order_shipped\"\nproducer = \"shop\"\n"
      "[[subscriptions]]\nname = \"audit\"\nglob = \"com.*\"\nlane = \"DURABLE\"\n";
  auto cfg = outbox::config::ParseDaemonConfig(toml, "fuzz.toml");
  if (!cfg.ok()) {
    std::fprintf(stderr, "fuzz_http: config: %s\n", cfg.status().ToString().c_str());
    std::abort();
  }
  auto d = outbox::server::Daemon::Open(*std::move(cfg));
  if (!d.ok()) {
    std::fprintf(stderr, "fuzz_http: open: %s\n", d.status().ToString().c_str());
    std::abort();
  }
  g_daemon = *std::move(d);
  std::fprintf(stderr, "fuzz_http: daemon store in %s (removed at exit)\n", dir.c_str());
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string path;
  const std::string request =
      BuildRequest(std::string_view(reinterpret_cast<const char*>(data), size), &path);
  MemoryStream strm(request);
  ProcessAccess::Process(g_daemon->http_server(), strm);
  const std::string& out = strm.out();
  if (out.empty()) return 0;  // httplib dropped a request it could not parse
  if (out.rfind("HTTP/1.1 ", 0) != 0 || out.size() < 12) Fail("no status line", request, out);
  const int status = std::atoi(out.c_str() + 9);
  const size_t body_at = out.find("\r\n\r\n");
  const std::string body = body_at == std::string::npos ? "" : out.substr(body_at + 4);
  if (status >= 500 && status != 503) Fail("server error", request, out);
  if (status < 200 || status > 599) Fail("unexpected status", request, out);
  if (path == "/metrics" && status == 200) return 0;  // Prometheus text
  if (body.empty()) {
    // httplib answers requests it rejects itself (bad request line, HEAD) without a body.
    if (status == 400 || status == 404 || status == 405 || status == 413 || status == 414 ||
        status == 416 || status == 200) {
      return 0;
    }
    Fail("empty body", request, out);
  }
  nlohmann::json j = nlohmann::json::parse(body, nullptr, false);
  if (j.is_discarded()) Fail("body is not JSON", request, out);
  if (status >= 400) {
    if (!j.contains("error") || !j["error"].is_object() || !j["error"].contains("code") ||
        !j["error"]["code"].is_string() || !j["error"].contains("message") ||
        !j["error"]["message"].is_string()) {
      if (!(path == "/readyz" && status == 503))
        Fail("error body without error.code/message", request, out);
    }
  }
  return 0;
}
