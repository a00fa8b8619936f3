// A small W3C WebDriver client for the browser tests (tests/e2e/console_test.cc):
// starts Debian's `chromedriver` on a free port and drives Debian's
// `chromium` headless through it over HTTP (cpp-httplib). Only what the tests
// use: navigate, find, click, type, text, run a script, screenshot.
#pragma once

#include <arpa/inet.h>
#include <httplib.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <thread>

#include "absl/strings/escaping.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace outbox::testing_support {

// The first of `names` that is an executable on PATH (or an absolute path), or "".
inline std::string FindProgram(std::initializer_list<const char*> names) {
  for (const char* n : names) {
    if (n[0] == '/') {
      if (access(n, X_OK) == 0) return n;
      continue;
    }
    const char* path = std::getenv("PATH");
    std::string dirs = path ? path : "/usr/bin:/bin";
    size_t pos = 0;
    while (pos <= dirs.size()) {
      size_t colon = dirs.find(':', pos);
      if (colon == std::string::npos) colon = dirs.size();
      std::string cand = dirs.substr(pos, colon - pos) + "/" + n;
      if (access(cand.c_str(), X_OK) == 0) return cand;
      pos = colon + 1;
    }
  }
  return "";
}

class WebDriver {
 public:
  using json = nlohmann::json;

  // Starts chromedriver and a headless browser session; ok() says whether
  // both came up (error() says why not).
  WebDriver(const std::string& chromedriver, const std::string& browser, const std::string& log) {
    port_ = FreePort();
    pid_ = fork();
    if (pid_ == 0) {
      const std::string port_arg = "--port=" + std::to_string(port_);
      const std::string log_arg = "--log-path=" + log;
      setsid();
      execl(chromedriver.c_str(), chromedriver.c_str(), port_arg.c_str(), log_arg.c_str(),
            (char*)nullptr);
      _exit(127);
    }
    http_ = std::make_unique<httplib::Client>("127.0.0.1", port_);
    http_->set_read_timeout(2, 0);
    bool up = false;
    for (int i = 0; i < 200 && !up; ++i) {
      auto r = http_->Get("/status");
      up = r && r->status == 200;
      if (!up) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    if (!up) {
      error_ =
          "chromedriver did not answer on port " + std::to_string(port_) + " (see " + log + ")";
      return;
    }
    http_->set_read_timeout(60, 0);  // a new session starts the browser
    // --no-sandbox: CI runs as root, where Chromium's sandbox refuses to start.
    json caps = {
        {"capabilities",
         {{"alwaysMatch",
           {{"goog:chromeOptions",
             {{"binary", browser},
              {"args",
               {"--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1360,1000", "--no-first-run", "--no-default-browser-check"}}}}}}}}};
    auto r = http_->Post("/session", caps.dump(), "application/json");
    if (!r || r->status != 200) {
      error_ = "new session failed: " + (r ? r->body : std::string("no answer"));
      return;
    }
    session_ = json::parse(r->body)["value"]["sessionId"].get<std::string>();
  }
  ~WebDriver() {
    if (!session_.empty()) http_->Delete(("/session/" + session_).c_str());
    if (pid_ > 0) {
      kill(-pid_, SIGTERM);
      kill(pid_, SIGTERM);
      int st = 0;
      waitpid(pid_, &st, 0);
    }
  }
  bool ok() const { return !session_.empty(); }
  const std::string& error() const { return error_; }

  void Navigate(const std::string& url) { Command("POST", "/url", {{"url", url}}); }
  // Runs `script` (a function body; `arguments` holds args) and returns its value.
  json Script(const std::string& script, json args = json::array()) {
    return Command("POST", "/execute/sync", {{"script", script}, {"args", args}});
  }
  // The element's id, or nullopt when no element matches `css`.
  std::optional<std::string> Find(const std::string& css) {
    json v = Command("POST", "/element", {{"using", "css selector"}, {"value", css}}, true);
    if (!v.is_object() || v.empty()) return std::nullopt;
    return v.begin().value().get<std::string>();
  }
  // How long a wait polls by default: long enough for a headless browser on a
  // 2-core machine that runs other tests beside it (a wait ends as soon as its
  // condition holds, so a passing run does not get slower).
  static constexpr double kWaitSeconds = 45;
  // Polls for `css` up to `secs`; "" when it never appeared.
  std::string WaitFind(const std::string& css, double secs = kWaitSeconds) {
    return WaitUntil([&] { return Find(css).value_or(""); }, secs);
  }
  // Polls until the text of `css` contains `needle`; returns the last text seen.
  std::string WaitText(const std::string& css, const std::string& needle,
                       double secs = kWaitSeconds) {
    std::string last;
    WaitUntil(
        [&]() -> std::string {
          last = Text(css);
          return last.find(needle) != std::string::npos ? last : "";
        },
        secs);
    return last;
  }
  // innerText of the first match of `css` ("" when none).
  std::string Text(const std::string& css) {
    json v = Script("const e = document.querySelector(arguments[0]); return e ? e.innerText : '';",
                    {css});
    return v.is_string() ? v.get<std::string>() : "";
  }
  bool Click(const std::string& css) {
    auto id = Find(css);
    if (!id) return false;
    Command("POST", "/element/" + *id + "/click", json::object());
    return true;
  }
  bool Type(const std::string& css, const std::string& text) {
    auto id = Find(css);
    if (!id) return false;
    Command("POST", "/element/" + *id + "/value", {{"text", text}});
    return true;
  }
  // Saves a PNG of the viewport (the whole page: the window is resized to it).
  bool Screenshot(const std::string& path) {
    json size = Script(
        "return [document.documentElement.scrollWidth, document.documentElement.scrollHeight];");
    if (size.is_array() && size.size() == 2) {
      const int w = std::max(1360, size[0].get<int>()),
                h = std::min(4000, size[1].get<int>() + 140);
      Command("POST", "/window/rect", {{"width", w}, {"height", std::max(800, h)}});
    }
    json v = Command("GET", "/screenshot", json());
    std::string png;
    if (!v.is_string() || !absl::Base64Unescape(v.get<std::string>(), &png)) return false;
    std::filesystem::create_directories(std::filesystem::path(path).parent_path());
    std::ofstream(path, std::ios::binary) << png;
    return std::filesystem::file_size(path) > 1000;
  }
  // The last WebDriver error ("" when the last command succeeded).
  const std::string& last_error() const { return last_error_; }

 private:
  template <class F>
  static std::string WaitUntil(F f, double secs) {
    auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(int(secs * 1000));
    while (true) {
      std::string v = f();
      if (!v.empty() || std::chrono::steady_clock::now() >= until) return v;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  json Command(const std::string& method, const std::string& path, const json& body,
               bool quiet_not_found = false) {
    const std::string url = "/session/" + session_ + path;
    httplib::Result r = method == "GET" ? http_->Get(url.c_str())
                                        : http_->Post(url.c_str(), body.dump(), "application/json");
    last_error_.clear();
    if (!r) {
      last_error_ = "no answer from chromedriver";
      return json();
    }
    json j = json::parse(r->body, nullptr, false);
    if (r->status != 200) {
      last_error_ = r->body.substr(0, 500);
      if (!quiet_not_found)
        ADD_FAILURE() << "WebDriver " << method << " " << path << ": " << last_error_;
      return json();
    }
    return j.is_object() && j.contains("value") ? j["value"] : json();
  }
  // A port nothing listens on now (bound to 0, read back, closed).
  static int FreePort() {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    int port = 0;
    if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
        getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0)
      port = ntohs(a.sin_port);
    close(fd);
    return port;
  }

  pid_t pid_ = -1;
  int port_ = 0;
  std::unique_ptr<httplib::Client> http_;
  std::string session_, error_, last_error_;
};

}  // namespace outbox::testing_support
