// DynamoDB's 573 reserved words. The source of truth is reserved_words.txt
// (one word per line); reserved_words.inc is the same text wrapped in a raw
// string literal so it is embedded without a build step. A unit test keeps
// the two identical.
#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "expr/ast.h"

namespace outbox::expr::internal {
namespace {

constexpr std::string_view kReservedWordsText =
#include "expr/reserved_words.inc"
    ;

struct Table {
  std::vector<std::string> words;
  absl::flat_hash_set<std::string> set;
  Table() {
    size_t i = 0;
    while (i < kReservedWordsText.size()) {
      size_t j = kReservedWordsText.find('\n', i);
      if (j == std::string_view::npos) j = kReservedWordsText.size();
      std::string w(kReservedWordsText.substr(i, j - i));
      if (!w.empty()) {
        set.insert(w);
        words.push_back(std::move(w));
      }
      i = j + 1;
    }
  }
};

const Table& GetTable() {
  static const Table* t = new Table();
  return *t;
}

}  // namespace

const std::vector<std::string>& ReservedWords() { return GetTable().words; }

bool IsReservedWord(std::string_view word) {
  if (word.size() > 32) return false;
  std::string up(word);
  std::transform(up.begin(), up.end(), up.begin(),
                 [](char c) { return (c >= 'a' && c <= 'z') ? static_cast<char>(c - 32) : c; });
  return GetTable().set.contains(up);
}

}  // namespace outbox::expr::internal
