// The relay conformance suite (relay_suite.h) on the embedded backends: one
// SQLite file (ChangeFeedRelay: sends and checkpoint in one commit), the same
// through StoreWrapper/QueueWrapper decorators (the capability is forwarded),
// and a store and a queue on two files (StreamRelay).
#include <memory>

#include "conformance/relay_suite.h"
#include "outbox/sqlite.h"
#include "support/port_wrappers.h"

namespace outbox::conformance {
namespace {

RelayPair OneFile(const std::string& dir, Clock* clock) {
  auto file = OpenSqliteFile({.path = dir + "/one.db"});
  EXPECT_TRUE(file.ok()) << file.status();
  RelayPair p;
  p.store = *OpenSqliteStore(*file, clock);
  p.queue = *OpenSqliteQueue(*file, clock);
  return p;
}

RelayPair Wrapped(const std::string& dir, Clock* clock) {
  struct Inner {
    RelayPair pair;
  };
  auto inner = std::make_shared<Inner>(Inner{OneFile(dir, clock)});
  RelayPair p;
  p.store = std::make_unique<testing_support::StoreWrapper>(inner->pair.store.get());
  p.queue = std::make_unique<testing_support::QueueWrapper>(inner->pair.queue.get());
  p.keep = inner;
  return p;
}

RelayPair TwoFiles(const std::string& dir, Clock* clock) {
  auto store_file = OpenSqliteFile({.path = dir + "/store.db"});
  auto queue_file = OpenSqliteFile({.path = dir + "/queue.db"});
  EXPECT_TRUE(store_file.ok() && queue_file.ok());
  RelayPair p;
  p.store = *OpenSqliteStore(*store_file, clock);
  p.queue = *OpenSqliteQueue(*queue_file, clock);
  return p;
}

std::vector<RelayCase> Cases() {
  std::vector<RelayCase> out;
  for (const RelayBackend& b : {RelayBackend{"one_file", OneFile, "change-feed"},
                                RelayBackend{"one_file_wrapped", Wrapped, "change-feed"},
                                RelayBackend{"two_files", TwoFiles, "stream"}}) {
    for (const char* mode : {"feed", "poll"}) out.push_back({b, mode});
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(Sqlite, RelayConformance, ::testing::ValuesIn(Cases()), RelayCaseName);

}  // namespace
}  // namespace outbox::conformance
