// `outbox serve` as a child process and a webhook receiver, for the e2e
// tests of the daemon (tests/e2e/serve_test.cc, serve_aws_test.cc).
#pragma once

#include <fcntl.h>
#include <httplib.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <regex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "server/webhook.h"

namespace outbox::testing_support {

using json = nlohmann::json;

inline const char* Bin() {
  const char* bin = std::getenv("OUTBOX_BIN");
  EXPECT_NE(bin, nullptr) << "OUTBOX_BIN not set (run through ctest)";
  return bin;
}

// A running `outbox serve`; stdout's first line gives the port.
class ServeProcess {
 public:
  // `extra`: more arguments after `serve --config CONFIG --listen 127.0.0.1:0`.
  ServeProcess(const std::string& config, const std::string& log,
               const std::vector<std::string>& extra = {}) {
    int fds[2];
    if (pipe(fds) != 0) return;
    pid_ = fork();
    if (pid_ == 0) {
      dup2(fds[1], 1);
      int err = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
      if (err >= 0) dup2(err, 2);
      close(fds[0]);
      std::vector<const char*> argv = {Bin(),          "serve",    "--config",
                                       config.c_str(), "--listen", "127.0.0.1:0"};
      for (const auto& e : extra) argv.push_back(e.c_str());
      argv.push_back(nullptr);
      execv(Bin(), const_cast<char* const*>(argv.data()));
      _exit(127);
    }
    close(fds[1]);
    out_ = fdopen(fds[0], "r");
    char line[512];
    if (fgets(line, sizeof line, out_) != nullptr) {
      std::cmatch m;
      if (std::regex_search(line, m, std::regex(R"(https?://127\.0\.0\.1:(\d+))")))
        port_ = std::stoi(m[1]);
    }
  }
  ~ServeProcess() {
    if (pid_ > 0 && !reaped_) Kill(SIGKILL);
    if (out_) fclose(out_);
  }
  int port() const { return port_; }
  pid_t pid() const { return pid_; }
  // Sends `sig` and waits; returns the exit code (or 128+signal).
  int Kill(int sig) {
    kill(pid_, sig);
    int st = 0;
    waitpid(pid_, &st, 0);
    reaped_ = true;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  }

 private:
  pid_t pid_ = -1;
  FILE* out_ = nullptr;
  int port_ = 0;
  bool reaped_ = false;
};

// A webhook receiver: per path an answer policy; dedup by Idempotency-Key.
class Receiver {
 public:
  explicit Receiver(std::string secret) : secret_(std::move(secret)) {
    server_.Post(R"(/hook/(\w+))", [this](const httplib::Request& req, httplib::Response& res) {
      const std::string sub = req.matches[1];
      const std::string key = req.get_header_value("Idempotency-Key");
      const int64_t ts = std::atoll(req.get_header_value("Outbox-Timestamp").c_str());
      std::lock_guard<std::mutex> l(mu_);
      ++raw_[sub];
      if (!outbox::server::VerifyWebhookSignature(secret_, ts, req.body,
                                                  req.get_header_value("Outbox-Signature"))) {
        ++bad_signatures_;
      }
      json body = json::parse(req.body, nullptr, false);
      if (body.is_discarded() || key != body.value("id", "") + ":" + sub) ++bad_keys_;
      attempts_[key].push_back(std::atoi(req.get_header_value("Outbox-Attempt").c_str()));
      int status = 200;
      auto pol = policy_.find(sub);
      if (pol != policy_.end()) status = pol->second(key, static_cast<int>(attempts_[key].size()));
      res.status = status;
      if (status >= 200 && status < 300) {
        if (!done_[sub].insert(key).second) ++duplicate_effects_[sub];
        ids_[sub].insert(body.value("id", ""));
      }
      res.set_content("{}", "application/json");
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    while (!server_.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ~Receiver() {
    server_.stop();
    thread_.join();
  }
  std::string Url(const std::string& sub) const {
    return "http://127.0.0.1:" + std::to_string(port_) + "/hook/" + sub;
  }
  // policy(key, nth delivery of this key) -> HTTP status
  void SetPolicy(const std::string& sub, std::function<int(const std::string&, int)> p) {
    std::lock_guard<std::mutex> l(mu_);
    policy_[sub] = std::move(p);
  }
  int Raw(const std::string& sub) {
    std::lock_guard<std::mutex> l(mu_);
    return raw_[sub];
  }
  int Unique(const std::string& sub) {
    std::lock_guard<std::mutex> l(mu_);
    return static_cast<int>(done_[sub].size());
  }
  int DuplicateEffects(const std::string& sub) {
    std::lock_guard<std::mutex> l(mu_);
    return duplicate_effects_[sub];
  }
  std::set<std::string> Ids(const std::string& sub) {
    std::lock_guard<std::mutex> l(mu_);
    return ids_[sub];
  }
  std::vector<int> Attempts(const std::string& key) {
    std::lock_guard<std::mutex> l(mu_);
    return attempts_[key];
  }
  int bad_signatures() {
    std::lock_guard<std::mutex> l(mu_);
    return bad_signatures_;
  }
  int bad_keys() {
    std::lock_guard<std::mutex> l(mu_);
    return bad_keys_;
  }

 private:
  std::string secret_;
  httplib::Server server_;
  std::thread thread_;
  int port_ = 0;
  std::mutex mu_;
  std::map<std::string, std::function<int(const std::string&, int)>> policy_;
  std::map<std::string, int> raw_, duplicate_effects_;
  std::map<std::string, std::set<std::string>> done_, ids_;
  std::map<std::string, std::vector<int>> attempts_;
  int bad_signatures_ = 0, bad_keys_ = 0;
};

// Polls `pred` every 20 ms for up to `secs` real seconds (the daemon runs on real time).
template <class F>
bool WaitFor(F pred, double secs) {
  auto until =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(static_cast<int>(secs * 1000));
  while (std::chrono::steady_clock::now() < until) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return pred();
}

// Emits `events` events of `type` over `tenants` tenants ("h<i % tenants>")
// through POST /v1/events with bearer `token`, each with its own idempotency
// token and retried while the server is down; once `kill_after` are emitted
// and `rx` has seen more than `min_raw` deliveries of `sub`, SIGKILLs
// `*server` and replaces it with `start()`. Returns the emitted event ids
// (one per event when idempotent retries work) and the client retries.
struct KillNineRun {
  std::set<std::string> emitted;
  int client_retries = 0;
  int exit_code = 0;  // of the killed server: 128 + SIGKILL
};
inline KillNineRun EmitThroughAKillNine(std::unique_ptr<ServeProcess>* server,
                                        const std::function<std::unique_ptr<ServeProcess>()>& start,
                                        Receiver& rx, const std::string& token, const char* type,
                                        int events, int tenants, int kill_after, int min_raw,
                                        const std::string& sub, double wait_seconds) {
  KillNineRun out;
  std::atomic<int> port{(*server)->port()};
  std::mutex mu;
  std::atomic<int> done{0};
  std::atomic<int> retries{0};
  std::thread emitter([&] {
    for (int i = 0; i < events; ++i) {
      json body = {{"tenant", "h" + std::to_string(i % tenants)},
                   {"type", type},
                   {"payload", {{"n", i}}},
                   {"idempotency_token", "emit-" + std::to_string(i)}};
      for (int attempt = 0; attempt < 1000; ++attempt) {
        httplib::Client c("127.0.0.1", port.load());
        c.set_bearer_token_auth(token);
        c.set_read_timeout(10, 0);
        auto r = c.Post("/v1/events", body.dump(), "application/json");
        if (r && r->status == 201) {
          std::lock_guard<std::mutex> l(mu);
          out.emitted.insert(json::parse(r->body)["id"].get<std::string>());
          break;
        }
        ++retries;  // refused while the server is down: the same token again
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
      ++done;
    }
  });
  const bool reached =
      WaitFor([&] { return done.load() >= kill_after && rx.Raw(sub) > min_raw; }, wait_seconds);
  EXPECT_TRUE(reached) << "the run did not reach the kill point";
  out.exit_code = (*server)->Kill(SIGKILL);
  *server = start();
  port = (*server)->port();
  emitter.join();
  EXPECT_EQ(done.load(), events);
  out.client_retries = retries.load();
  return out;
}

}  // namespace outbox::testing_support
