#include "aws/http_client.h"

#include <curl/curl.h>

#include <cctype>

#include "fmt/format.h"

namespace outbox::aws {
namespace {

struct CurlGlobal {
  CurlGlobal() { curl_global_init(CURL_GLOBAL_DEFAULT); }
};
void EnsureCurlGlobal() { static CurlGlobal g; }

size_t WriteBody(char* ptr, size_t size, size_t nmemb, void* userdata) {
  static_cast<std::string*>(userdata)->append(ptr, size * nmemb);
  return size * nmemb;
}

size_t WriteHeader(char* ptr, size_t size, size_t nmemb, void* userdata) {
  std::string_view line(ptr, size * nmemb);
  auto* headers = static_cast<Headers*>(userdata);
  size_t colon = line.find(':');
  if (colon != std::string_view::npos) {
    std::string_view v = line.substr(colon + 1);
    while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.remove_prefix(1);
    while (!v.empty() && (v.back() == '\r' || v.back() == '\n' || v.back() == ' '))
      v.remove_suffix(1);
    headers->emplace_back(std::string(line.substr(0, colon)), std::string(v));
  } else if (line.starts_with("HTTP/")) {
    headers->clear();  // a new response (e.g. after 100-continue)
  }
  return size * nmemb;
}

}  // namespace

absl::StatusOr<UrlParts> ParseUrl(std::string_view url) {
  UrlParts p;
  size_t sep = url.find("://");
  if (sep == std::string_view::npos) {
    return absl::InvalidArgumentError(
        fmt::format("endpoint '{}' is not a URL (expected http(s)://host[:port])", url));
  }
  p.scheme = std::string(url.substr(0, sep));
  for (auto& c : p.scheme) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (p.scheme != "http" && p.scheme != "https") {
    return absl::InvalidArgumentError(
        fmt::format("endpoint '{}': scheme must be http or https", url));
  }
  std::string_view rest = url.substr(sep + 3);
  size_t slash = rest.find_first_of("/?");
  std::string_view authority = rest.substr(0, slash);
  p.target = slash == std::string_view::npos ? "/" : std::string(rest.substr(slash));
  if (p.target.front() == '?') p.target = "/" + p.target;
  if (authority.empty() || authority.find('@') != std::string_view::npos) {
    return absl::InvalidArgumentError(
        fmt::format("endpoint '{}': missing or unsupported host", url));
  }
  std::string host(authority);
  for (auto& c : host) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  size_t colon = host.rfind(':');
  if (colon != std::string::npos && host.find(']') == std::string::npos) {
    std::string port = host.substr(colon + 1);
    if (port.empty() || port.find_first_not_of("0123456789") != std::string::npos) {
      return absl::InvalidArgumentError(fmt::format("endpoint '{}': bad port '{}'", url, port));
    }
    if ((p.scheme == "http" && port == "80") || (p.scheme == "https" && port == "443"))
      host = host.substr(0, colon);
  }
  p.host_header = host;
  return p;
}

HttpClient::HttpClient(HttpClientOptions options) : options_(std::move(options)) {
  EnsureCurlGlobal();
}

HttpClient::~HttpClient() {
  for (void* h : idle_) curl_easy_cleanup(static_cast<CURL*>(h));
}

int64_t HttpClient::connections_opened() const {
  util::MutexLock l(mu_);
  return connections_opened_;
}

void* HttpClient::Acquire() {
  {
    util::MutexLock l(mu_);
    if (!idle_.empty()) {
      void* h = idle_.back();
      idle_.pop_back();
      return h;
    }
  }
  return curl_easy_init();
}

void HttpClient::Release(void* handle) {
  util::MutexLock l(mu_);
  if (static_cast<int>(idle_.size()) < options_.max_idle_handles) {
    idle_.push_back(handle);
  } else {
    curl_easy_cleanup(static_cast<CURL*>(handle));
  }
}

absl::StatusOr<HttpResponse> HttpClient::Send(const HttpRequest& req) {
  CURL* curl = static_cast<CURL*>(Acquire());
  if (curl == nullptr) return absl::InternalError("curl_easy_init failed");
  curl_easy_reset(curl);  // keeps the connection cache
  HttpResponse resp;
  curl_slist* hdrs = nullptr;
  for (const auto& [k, v] : req.headers) hdrs = curl_slist_append(hdrs, (k + ": " + v).c_str());
  hdrs = curl_slist_append(hdrs, "Expect:");  // no 100-continue round trip
  curl_easy_setopt(curl, CURLOPT_URL, req.url.c_str());
  curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, req.method.c_str());
  if (req.method == "POST" || !req.body.empty()) {
    curl_easy_setopt(curl, CURLOPT_POSTFIELDS, req.body.data());
    curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(req.body.size()));
  }
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, hdrs);
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, WriteBody);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &resp.body);
  curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, WriteHeader);
  curl_easy_setopt(curl, CURLOPT_HEADERDATA, &resp.headers);
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl, CURLOPT_TCP_KEEPALIVE, 1L);
  curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS,
                   static_cast<long>(absl::ToInt64Milliseconds(options_.connect_timeout)));
  curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS,
                   static_cast<long>(absl::ToInt64Milliseconds(options_.request_timeout)));
  curl_easy_setopt(curl, CURLOPT_SSL_VERIFYPEER, options_.verify_tls ? 1L : 0L);
  curl_easy_setopt(curl, CURLOPT_SSL_VERIFYHOST, options_.verify_tls ? 2L : 0L);
  if (!options_.ca_file.empty()) curl_easy_setopt(curl, CURLOPT_CAINFO, options_.ca_file.c_str());
  CURLcode rc = curl_easy_perform(curl);
  curl_slist_free_all(hdrs);
  long connects = 0;
  curl_easy_getinfo(curl, CURLINFO_NUM_CONNECTS, &connects);
  {
    util::MutexLock l(mu_);
    connections_opened_ += connects;
  }
  if (rc != CURLE_OK) {
    std::string msg = fmt::format("{} {}: {}", req.method, req.url, curl_easy_strerror(rc));
    curl_easy_cleanup(curl);  // the connection state is unknown: do not reuse
    if (rc == CURLE_OPERATION_TIMEDOUT) return absl::DeadlineExceededError(msg);
    return absl::UnavailableError(msg);
  }
  long status = 0;
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
  resp.status = static_cast<int>(status);
  Release(curl);
  return resp;
}

}  // namespace outbox::aws
