// SigV4 against AWS's published test suite (tests/testdata/sigv4/, see its
// PROVENANCE.md): every case's canonical request, string to sign and
// Authorization value must match exactly.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/time/time.h"
#include "aws/config.h"
#include "aws/sigv4.h"
#include "nlohmann/json.hpp"
#include "support/temp_dir.h"

namespace outbox::aws {
namespace {

namespace fs = std::filesystem;

std::string Slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

fs::path SuiteDir() {
  const char* dir = std::getenv("OUTBOX_TESTDATA_DIR");
  return fs::path(dir != nullptr && *dir != '\0' ? dir : OUTBOX_TESTDATA_DIR) / "sigv4";
}

struct ParsedRequest {
  SigningRequest req;
};

// Parses a .req file as PROVENANCE.md describes: request line split at the
// first and the last space; headers until an empty line; continuation lines
// (leading whitespace) extend the previous header; the rest is the body.
SigningRequest ParseReq(const std::string& text) {
  SigningRequest r;
  std::vector<std::string> lines;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string::npos) nl = text.size();
    lines.push_back(text.substr(pos, nl - pos));
    pos = nl + 1;
  }
  const std::string& rl = lines.at(0);
  size_t first = rl.find(' '), last = rl.rfind(' ');
  r.method = rl.substr(0, first);
  r.target = rl.substr(first + 1, last - first - 1);
  size_t i = 1;
  for (; i < lines.size(); ++i) {
    const std::string& l = lines[i];
    if (l.empty()) break;
    if (l[0] == ' ' || l[0] == '\t') {
      r.headers.back().second += " " + l;
      continue;
    }
    size_t colon = l.find(':');
    r.headers.emplace_back(l.substr(0, colon), l.substr(colon + 1));
  }
  for (size_t j = i + 1; j < lines.size(); ++j) {
    if (j > i + 1) r.body += "\n";
    r.body += lines[j];
  }
  return r;
}

TEST(SigV4Suite, EveryCaseMatchesCanonicalRequestStringToSignAndAuthorization) {
  fs::path dir = SuiteDir();
  ASSERT_TRUE(fs::exists(dir / "context.json"))
      << "missing " << dir << " (tests/testdata/sigv4, or set OUTBOX_TESTDATA_DIR)";
  auto ctx = nlohmann::json::parse(Slurp(dir / "context.json"));
  absl::Time t;
  std::string err;
  ASSERT_TRUE(absl::ParseTime(absl::RFC3339_full, ctx["timestamp"].get<std::string>(), &t, &err))
      << err;
  int cases = 0;
  for (const auto& entry : fs::recursive_directory_iterator(dir / "aws4_testsuite")) {
    if (entry.path().extension() != ".req") continue;
    fs::path base = entry.path();
    base.replace_extension();
    std::string name = fs::relative(entry.path().parent_path(), dir / "aws4_testsuite").string();
    SCOPED_TRACE(name);
    SigningParams p;
    p.credentials.access_key_id = ctx["credentials"]["access_key_id"];
    p.credentials.secret_access_key = ctx["credentials"]["secret_access_key"];
    p.region = ctx["region"];
    p.service = ctx["service"];
    p.time = t;
    // Tokens: added by the signer (get-vanilla-with-session-token) or already in
    // the request (post-sts-header-before). post-sts-header-after signs without it.
    if (ctx["session_tokens"].contains(name) && name != "post-sts-token/post-sts-header-after") {
      p.credentials.session_token = ctx["session_tokens"][name]["token"];
    }
    SigningRequest req = ParseReq(Slurp(entry.path()));
    Signature sig = SignRequest(req, p);
    EXPECT_EQ(sig.canonical_request, Slurp(base.string() + ".creq"));
    EXPECT_EQ(sig.string_to_sign, Slurp(base.string() + ".sts"));
    EXPECT_EQ(sig.authorization, Slurp(base.string() + ".authz"));
    EXPECT_EQ(sig.string_to_sign.substr(sig.string_to_sign.find('\n') + 1, 16),
              ctx["amz_date"].get<std::string>());
    ++cases;
  }
  EXPECT_EQ(cases, 34) << "the suite has 34 cases (PROVENANCE.md)";
}

TEST(SigV4, AddsDateAndSessionTokenWhenAbsent) {
  SigningRequest req;
  req.headers = {{"Host", "dynamodb.us-east-1.amazonaws.com"},
                 {"X-Amz-Target", "DynamoDB_20120810.ListTables"}};
  req.body = "{}";
  SigningParams p{
      {"AKID", "SECRET", "TOKEN"}, "us-east-1", "dynamodb", absl::FromUnixSeconds(1440938160)};
  Signature s = SignRequest(req, p);
  EXPECT_EQ(s.signed_headers, "host;x-amz-date;x-amz-security-token;x-amz-target");
  EXPECT_NE(s.canonical_request.find("x-amz-date:20150830T123600Z\n"), std::string::npos);
  EXPECT_NE(s.canonical_request.find("x-amz-security-token:TOKEN\n"), std::string::npos);
  EXPECT_EQ(s.headers.size(), 4u);
  EXPECT_TRUE(s.authorization.starts_with(
      "AWS4-HMAC-SHA256 Credential=AKID/20150830/us-east-1/dynamodb/aws4_request"));
  // A different body changes the signature.
  req.body = "{ }";
  EXPECT_NE(SignRequest(req, p).signature, s.signature);
}

// ---- credentials / region / endpoint resolution -------------------------------------

EnvLookup FakeEnv(std::map<std::string, std::string> vars) {
  return [vars](std::string_view k) -> std::optional<std::string> {
    auto it = vars.find(std::string(k));
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

TEST(AwsConfig, EnvironmentCredentialsWin) {
  auto c = ResolveCredentials(FakeEnv({{"AWS_ACCESS_KEY_ID", "A"},
                                       {"AWS_SECRET_ACCESS_KEY", "S"},
                                       {"AWS_SESSION_TOKEN", "T"},
                                       {"HOME", "/nonexistent"}}));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->access_key_id, "A");
  EXPECT_EQ(c->secret_access_key, "S");
  EXPECT_EQ(c->session_token, "T");
}

TEST(AwsConfig, SharedFilesWithProfile) {
  testing_support::TempDir dir;
  std::ofstream(dir.file("credentials"))
      << "[default]\naws_access_key_id = DEF\naws_secret_access_key = DEFS\n"
      << "# comment\n[prod]\naws_access_key_id=PROD\naws_secret_access_key = PRODS\n"
      << "aws_session_token = PTOK\n";
  std::ofstream(dir.file("config"))
      << "[default]\nregion = eu-west-1\n[profile prod]\nregion=us-west-2\n"
      << "[profile cfgonly]\naws_access_key_id = C\naws_secret_access_key = CS\n";
  std::map<std::string, std::string> vars = {
      {"AWS_SHARED_CREDENTIALS_FILE", dir.file("credentials")},
      {"AWS_CONFIG_FILE", dir.file("config")}};
  auto def = ResolveCredentials(FakeEnv(vars));
  ASSERT_TRUE(def.ok()) << def.status();
  EXPECT_EQ(def->access_key_id, "DEF");
  EXPECT_EQ(*ResolveRegion(FakeEnv(vars)), "eu-west-1");
  vars["AWS_PROFILE"] = "prod";
  auto prod = ResolveCredentials(FakeEnv(vars));
  ASSERT_TRUE(prod.ok());
  EXPECT_EQ(prod->access_key_id, "PROD");
  EXPECT_EQ(prod->session_token, "PTOK");
  EXPECT_EQ(*ResolveRegion(FakeEnv(vars)), "us-west-2");
  vars["AWS_REGION"] = "ap-south-1";
  EXPECT_EQ(*ResolveRegion(FakeEnv(vars)), "ap-south-1");
  vars["AWS_PROFILE"] = "cfgonly";
  EXPECT_EQ(ResolveCredentials(FakeEnv(vars))->access_key_id, "C");
  vars["AWS_PROFILE"] = "missing";
  auto none = ResolveCredentials(FakeEnv(vars));
  EXPECT_TRUE(absl::IsNotFound(none.status()));
  EXPECT_NE(none.status().message().find("'missing'"), absl::string_view::npos) << none.status();
}

TEST(AwsConfig, EndpointOverrideThenEnvThenDefault) {
  auto env = FakeEnv({});
  EXPECT_EQ(ResolveEndpoint("", "DYNAMODB", "dynamodb", "eu-west-1", env),
            "https://dynamodb.eu-west-1.amazonaws.com");
  EXPECT_EQ(ResolveEndpoint("", "DYNAMODB", "dynamodb", "r",
                            FakeEnv({{"AWS_ENDPOINT_URL", "http://g:1"}})),
            "http://g:1");
  EXPECT_EQ(ResolveEndpoint("", "DYNAMODB", "dynamodb", "r",
                            FakeEnv({{"AWS_ENDPOINT_URL", "http://g:1"},
                                     {"AWS_ENDPOINT_URL_DYNAMODB", "http://d:2"}})),
            "http://d:2");
  EXPECT_EQ(ResolveEndpoint("http://localhost:8000", "DYNAMODB", "dynamodb", "r",
                            FakeEnv({{"AWS_ENDPOINT_URL_DYNAMODB", "http://d:2"}})),
            "http://localhost:8000");
}

}  // namespace
}  // namespace outbox::aws
