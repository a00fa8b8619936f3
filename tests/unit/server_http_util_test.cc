// Reply helpers of the daemon (src/server/http_util.h).
#include <httplib.h>

#include <string>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "server/http_util.h"

namespace outbox::server {
namespace {

// Regression (fuzz_http): the 404 handler echoes the request path; a path with
// bytes that are not UTF-8 made the JSON dump throw inside httplib's error
// handler, which terminated the daemon.
TEST(HttpUtil, ErrorReplyWithInvalidUtf8NeitherThrowsNorLosesTheReply) {
  httplib::Response res;
  const std::string path = "/v1\xf2\xf2/tenants";
  ASSERT_NO_THROW(ErrorReply(res, 404, "not_found", "no route GET " + path, ""));
  EXPECT_EQ(res.status, 404);
  auto j = nlohmann::json::parse(res.body, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << res.body;
  EXPECT_EQ(j["error"]["code"], "not_found");
  EXPECT_EQ(j["error"]["message"], "no route GET /v1\xEF\xBF\xBD\xEF\xBF\xBD/tenants");
}

TEST(HttpUtil, JsonReplyReplacesInvalidUtf8InKeysAndValues) {
  httplib::Response res;
  nlohmann::json body = {{std::string("k\xff"), std::string("v\xc3")}, {"ok", "fine"}};
  ASSERT_NO_THROW(JsonReply(res, 400, body));
  auto j = nlohmann::json::parse(res.body, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << res.body;
  EXPECT_EQ(j["ok"], "fine");
  EXPECT_EQ(j["k\xEF\xBF\xBD"], "v\xEF\xBF\xBD");
  EXPECT_EQ(res.get_header_value("Content-Type"), "application/json");
}

}  // namespace
}  // namespace outbox::server
