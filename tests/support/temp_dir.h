// A unique temporary directory removed at destruction.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <string>

namespace outbox::testing_support {

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "outbox-test-XXXXXX").string();
    char* p = mkdtemp(tmpl.data());
    path_ = p ? p : "";
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty() && !std::getenv("OUTBOX_KEEP_TEMP")) std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

}  // namespace outbox::testing_support
