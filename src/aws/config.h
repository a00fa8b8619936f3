// Where AWS credentials, the region and the endpoint come from, in the order
// the AWS SDKs use:
//   credentials: AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY / AWS_SESSION_TOKEN,
//                then the shared credentials file (AWS_SHARED_CREDENTIALS_FILE,
//                default ~/.aws/credentials) section [<profile>], then the
//                config file (AWS_CONFIG_FILE, default ~/.aws/config) section
//                [profile <profile>] ([default] for the default profile);
//                profile = AWS_PROFILE or "default".
//   region:      AWS_REGION, AWS_DEFAULT_REGION, then `region` in the config file.
//   endpoint:    explicit override, AWS_ENDPOINT_URL_<SERVICE>, AWS_ENDPOINT_URL,
//                else https://<service>.<region>.amazonaws.com.
// The environment is read through a lookup function so tests can inject one.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "aws/sigv4.h"

namespace outbox::aws {

using EnvLookup = std::function<std::optional<std::string>(std::string_view)>;
EnvLookup ProcessEnv();  // std::getenv

// Parses an INI-style AWS file: {section -> {key -> value}}. Comments start with
// '#' or ';'; keys and values are trimmed; keys are case-sensitive.
std::map<std::string, std::map<std::string, std::string>> ParseIni(std::string_view text);

// Credentials from the chain above. NotFound naming every place looked at when none.
absl::StatusOr<Credentials> ResolveCredentials(const EnvLookup& env = ProcessEnv());
// Region from the chain above; NotFound when none.
absl::StatusOr<std::string> ResolveRegion(const EnvLookup& env = ProcessEnv());
// `service_env_suffix` e.g. "DYNAMODB" (AWS_ENDPOINT_URL_DYNAMODB), `host_prefix` e.g. "dynamodb".
std::string ResolveEndpoint(std::string_view override_url, std::string_view service_env_suffix,
                            std::string_view host_prefix, std::string_view region,
                            const EnvLookup& env = ProcessEnv());

}  // namespace outbox::aws
