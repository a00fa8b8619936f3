// A small HTTP/1.1 client on libcurl for AWS JSON APIs.
//
// Connection reuse: finished easy handles go back to a pool and keep their
// connection cache, so consecutive requests to one endpoint reuse the
// keep-alive connection. TLS peer and host verification are on by default.
// Transport failures are statuses, never exceptions:
//   DeadlineExceeded  connect or request timeout
//   Unavailable       connection refused/reset, DNS failure, TLS failure, …
// Thread-safety: Send may be called from any number of threads.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "aws/sigv4.h"
#include "util/mutex.h"

namespace outbox::aws {

struct HttpClientOptions {
  absl::Duration connect_timeout = absl::Seconds(3);
  // Whole-request timeout (connect + send + receive).
  absl::Duration request_timeout = absl::Seconds(15);
  // Verify the server certificate and host name (https). Turning it off is
  // only for test endpoints with self-signed certificates.
  bool verify_tls = true;
  std::string ca_file;  // empty: the system store
  // Idle handles (each with its connection cache) kept for reuse.
  int max_idle_handles = 16;
};

struct HttpRequest {
  std::string url;  // scheme://host[:port]/path[?query]
  std::string method = "POST";
  Headers headers;
  std::string body;
};

struct HttpResponse {
  int status = 0;
  std::string body;
  Headers headers;
};

// Splits an http(s) URL. InvalidArgument naming the URL when it is not one.
struct UrlParts {
  std::string scheme;
  std::string host_header;  // host, plus ":port" when the port is not the scheme's default
  std::string target;       // path[?query], "/" when empty
};
absl::StatusOr<UrlParts> ParseUrl(std::string_view url);

class HttpClient {
 public:
  explicit HttpClient(HttpClientOptions options = {});
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  absl::StatusOr<HttpResponse> Send(const HttpRequest& req);

  // Connections opened so far (a test hook for keep-alive).
  int64_t connections_opened() const;

 private:
  void* Acquire();
  void Release(void* handle);

  HttpClientOptions options_;
  mutable util::Mutex mu_;
  std::vector<void*> idle_ ABSL_GUARDED_BY(mu_);  // CURL*
  int64_t connections_opened_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace outbox::aws
