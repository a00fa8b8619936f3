#include "cli/open.h"

#include "embedded/backends.h"
#include "relay/relay_mode.h"
#include "sqlite/file.h"

namespace outbox::cli {

namespace {

// The engine over `store`, tables ensured; it writes outbox rows when the
// recorded relay mode is "poll".
absl::StatusOr<std::unique_ptr<Engine>> OpenEngine(Store* store) {
  EngineOptions eo;
  auto mode = StoredRelayMode(store);
  if (!mode.ok()) return mode.status();
  eo.write_outbox_rows = *mode == "poll";
  auto engine = Engine::Open(store, eo);
  if (!engine.ok()) return engine.status();
  if (auto s = (*engine)->EnsureTables(); !s.ok()) return s;
  return engine;
}

}  // namespace

absl::StatusOr<Stack> OpenStack(const StoreFlags& flags, const std::string& path) {
  BackendSpec spec;
  spec.dynamodb = flags.dynamodb();
  spec.sqs = flags.sqs();
  spec.path = path;
  spec.dynamodb_options.endpoint = flags.endpoint;
  spec.dynamodb_options.region = flags.region;
  spec.sqs_options.endpoint = flags.queue_endpoint;
  spec.sqs_options.region = flags.region;
  auto b = OpenBackends(std::move(spec));
  if (!b.ok()) return b.status();
  Stack st;
  st.dynamodb = flags.dynamodb();
  st.sqs = flags.sqs();
  if (b->file != nullptr) st.db = sqlite::DatabaseOf(*b->file);
  st.store = std::move(b->store);
  st.queue = std::move(b->queue);
  auto engine = OpenEngine(st.store.get());
  if (!engine.ok()) return engine.status();
  st.engine = *std::move(engine);
  return st;
}

absl::StatusOr<std::string> StoredRelayMode(Store* store) {
  return relay::StoredRelayMode(store, EngineOptions{}.relay_state_table);
}

absl::Status StoreRelayMode(Store* store, const std::string& mode) {
  return relay::StoreRelayMode(store, mode, EngineOptions{}.relay_state_table);
}

}  // namespace outbox::cli
