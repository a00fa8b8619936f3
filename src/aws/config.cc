#include "aws/config.h"

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "fmt/format.h"

namespace outbox::aws {
namespace {

std::string Trim(std::string_view s) {
  size_t b = s.find_first_not_of(" \t\r");
  if (b == std::string_view::npos) return "";
  size_t e = s.find_last_not_of(" \t\r");
  return std::string(s.substr(b, e - b + 1));
}

std::optional<std::string> NonEmpty(const EnvLookup& env, std::string_view name) {
  auto v = env(name);
  if (v && !v->empty()) return v;
  return std::nullopt;
}

std::string Home(const EnvLookup& env) { return NonEmpty(env, "HOME").value_or(""); }

std::optional<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string CredentialsPath(const EnvLookup& env) {
  return NonEmpty(env, "AWS_SHARED_CREDENTIALS_FILE").value_or(Home(env) + "/.aws/credentials");
}
std::string ConfigPath(const EnvLookup& env) {
  return NonEmpty(env, "AWS_CONFIG_FILE").value_or(Home(env) + "/.aws/config");
}
std::string Profile(const EnvLookup& env) {
  return NonEmpty(env, "AWS_PROFILE").value_or("default");
}

// The profile's section in the config file: [default] or [profile NAME].
const std::map<std::string, std::string>* ConfigSection(
    const std::map<std::string, std::map<std::string, std::string>>& ini,
    const std::string& profile) {
  auto it = ini.find("profile " + profile);
  if (it == ini.end() && profile == "default") it = ini.find("default");
  return it == ini.end() ? nullptr : &it->second;
}

std::optional<Credentials> FromSection(const std::map<std::string, std::string>& sec) {
  auto id = sec.find("aws_access_key_id");
  auto secret = sec.find("aws_secret_access_key");
  if (id == sec.end() || secret == sec.end() || id->second.empty() || secret->second.empty())
    return std::nullopt;
  Credentials c{id->second, secret->second, ""};
  if (auto t = sec.find("aws_session_token"); t != sec.end()) c.session_token = t->second;
  return c;
}

}  // namespace

EnvLookup ProcessEnv() {
  return [](std::string_view name) -> std::optional<std::string> {
    const char* v = std::getenv(std::string(name).c_str());
    if (v == nullptr) return std::nullopt;
    return std::string(v);
  };
}

std::map<std::string, std::map<std::string, std::string>> ParseIni(std::string_view text) {
  std::map<std::string, std::map<std::string, std::string>> out;
  std::string section;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string_view::npos) nl = text.size();
    std::string line = Trim(text.substr(pos, nl - pos));
    pos = nl + 1;
    if (line.empty() || line[0] == '#' || line[0] == ';') continue;
    if (line.front() == '[' && line.back() == ']') {
      section = Trim(std::string_view(line).substr(1, line.size() - 2));
      out[section];
      continue;
    }
    size_t eq = line.find('=');
    if (eq == std::string::npos || section.empty()) continue;
    out[section][Trim(std::string_view(line).substr(0, eq))] =
        Trim(std::string_view(line).substr(eq + 1));
  }
  return out;
}

absl::StatusOr<Credentials> ResolveCredentials(const EnvLookup& env) {
  auto id = NonEmpty(env, "AWS_ACCESS_KEY_ID");
  auto secret = NonEmpty(env, "AWS_SECRET_ACCESS_KEY");
  if (id && secret) {
    return Credentials{*id, *secret, NonEmpty(env, "AWS_SESSION_TOKEN").value_or("")};
  }
  std::string profile = Profile(env);
  std::string cred_path = CredentialsPath(env), config_path = ConfigPath(env);
  if (auto text = ReadFile(cred_path)) {
    auto ini = ParseIni(*text);
    if (auto it = ini.find(profile); it != ini.end()) {
      if (auto c = FromSection(it->second)) return *c;
    }
  }
  if (auto text = ReadFile(config_path)) {
    auto ini = ParseIni(*text);
    if (const auto* sec = ConfigSection(ini, profile)) {
      if (auto c = FromSection(*sec)) return *c;
    }
  }
  return absl::NotFoundError(fmt::format(
      "no AWS credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or aws_access_key_id/"
      "aws_secret_access_key for profile '{}' in {} or {}",
      profile, cred_path, config_path));
}

absl::StatusOr<std::string> ResolveRegion(const EnvLookup& env) {
  if (auto r = NonEmpty(env, "AWS_REGION")) return *r;
  if (auto r = NonEmpty(env, "AWS_DEFAULT_REGION")) return *r;
  std::string profile = Profile(env);
  std::string config_path = ConfigPath(env);
  if (auto text = ReadFile(config_path)) {
    auto ini = ParseIni(*text);
    if (const auto* sec = ConfigSection(ini, profile)) {
      if (auto it = sec->find("region"); it != sec->end() && !it->second.empty()) return it->second;
    }
  }
  return absl::NotFoundError(fmt::format(
      "no AWS region: set AWS_REGION (or AWS_DEFAULT_REGION) or `region` for profile '{}' in {}",
      profile, config_path));
}

std::string ResolveEndpoint(std::string_view override_url, std::string_view service_env_suffix,
                            std::string_view host_prefix, std::string_view region,
                            const EnvLookup& env) {
  if (!override_url.empty()) return std::string(override_url);
  if (auto v = NonEmpty(env, "AWS_ENDPOINT_URL_" + std::string(service_env_suffix))) return *v;
  if (auto v = NonEmpty(env, "AWS_ENDPOINT_URL")) return *v;
  return fmt::format("https://{}.{}.amazonaws.com", host_prefix, region);
}

}  // namespace outbox::aws
