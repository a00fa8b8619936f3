// outbox::Version() and outbox::BuildIdentity() (outbox/version.h): the
// version of project() and the build's identity that `outbox --version` prints.
#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <string>

#include "outbox/sqlite.h"
#include "outbox/version.h"

namespace outbox {
namespace {

TEST(Version, IsTheProjectsAndTheIdentityNamesCommitBuildCompilerAndSqlite) {
  std::ifstream in(std::string(OUTBOX_SOURCE_DIR) + "/CMakeLists.txt");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::smatch m;
  ASSERT_TRUE(std::regex_search(text, m, std::regex(R"(project\(outbox VERSION ([0-9.]+))")));
  EXPECT_EQ(std::string(Version()), m[1].str());
  const std::string id = BuildIdentity();
  EXPECT_EQ(id.rfind(std::string(Version()) + " (commit ", 0), 0u) << id;
  // A checkout's commit (hex, maybe -dirty) or "unknown" outside one.
  EXPECT_TRUE(std::regex_search(id, std::regex(R"(\(commit ([0-9a-f]{7,40}(-dirty)?|unknown), )")))
      << id;
  EXPECT_NE(id.find("SQLite " + SqliteVersion() + ")"), std::string::npos) << id;
}

}  // namespace
}  // namespace outbox
