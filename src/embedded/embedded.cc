// outbox::Embedded (include/outbox/embedded.h): the embedded stack, one SQLite
// file under an outbox::Pipeline.
#include "outbox/embedded.h"

#include <filesystem>

#include "outbox/pipeline.h"
#include "outbox/sqlite.h"

namespace outbox {

struct Embedded::Impl {
  EmbeddedOptions options;
  std::shared_ptr<SqliteFile> file;
  Store* store = nullptr;  // owned by the pipeline
  Queue* queue = nullptr;
  std::unique_ptr<Pipeline> pipeline;
};

Embedded::Embedded() : impl_(std::make_unique<Impl>()) {}
Embedded::~Embedded() = default;

absl::StatusOr<std::unique_ptr<Embedded>> Embedded::Open(EmbeddedOptions options) {
  if (options.path.empty()) return absl::InvalidArgumentError("path: must not be empty");
  std::unique_ptr<Embedded> e(new Embedded());
  Impl& m = *e->impl_;
  Clock* clock = options.clock ? options.clock : Clock::Real();
  SqliteFileOptions fo = options.file;
  fo.path = options.path;
  fo.synchronous_full = options.synchronous_full;
  auto file = OpenSqliteFile(std::move(fo));
  if (!file.ok()) return file.status();
  auto store = OpenSqliteStore(*file, clock);
  if (!store.ok()) return store.status();
  auto queue = OpenSqliteQueue(*file, clock);
  if (!queue.ok()) return queue.status();
  m.file = *file;
  m.store = store->get();
  m.queue = queue->get();
  PipelineOptions po;
  po.store = *std::move(store);
  po.queue = *std::move(queue);
  po.clock = clock;
  po.engine = options.engine;
  po.relay_mode = options.engine.write_outbox_rows ? "poll" : "feed";
  po.queue_name = options.queue;
  po.event_queue = options.event_queue;
  po.record_queue = options.record_queue;
  po.record_tables = options.record_tables;
  auto p = Pipeline::Open(std::move(po));
  if (!p.ok()) return p.status();
  m.pipeline = *std::move(p);
  if (options.clock == nullptr) options.clock = clock;
  m.options = std::move(options);
  return e;
}

Store* Embedded::store() { return impl_->store; }
SqliteFile* Embedded::file() { return impl_->file.get(); }
Queue* Embedded::queue() { return impl_->queue; }
Engine* Embedded::engine() { return impl_->pipeline->engine(); }
Inbox* Embedded::inbox() { return impl_->pipeline->inbox(); }
Clock* Embedded::clock() { return impl_->pipeline->clock(); }
const EmbeddedOptions& Embedded::options() const { return impl_->options; }
Pipeline* Embedded::pipeline() { return impl_->pipeline.get(); }

absl::Status Embedded::Subscribe(Subscription sub) {
  return impl_->pipeline->Subscribe(std::move(sub));
}

absl::StatusOr<std::unique_ptr<ChangeFeedRelay>> Embedded::NewRelay(RelayOptions options) {
  Impl& m = *impl_;
  if (options.queue == RelayOptions{}.queue) options.queue = m.options.queue;
  options.events_table = m.options.engine.events_table;
  options.relay_state_table = m.options.engine.relay_state_table;
  return ChangeFeedRelay::Open(m.store, m.queue, clock(), std::move(options));
}

absl::StatusOr<std::unique_ptr<RecordChangeRelay>> Embedded::NewRecordRelay(
    std::vector<std::string> tables) {
  RecordRelayOptions o;
  o.tables = std::move(tables);
  return NewRecordRelay(std::move(o));
}

absl::StatusOr<std::unique_ptr<RecordChangeRelay>> Embedded::NewRecordRelay(RecordRelayOptions o) {
  Impl& m = *impl_;
  const RecordRelayOptions defaults;
  if (o.tables.empty()) o.tables = m.options.record_tables;
  if (o.queue == defaults.queue) o.queue = m.options.record_queue;
  if (o.relay_state_table == defaults.relay_state_table)
    o.relay_state_table = m.options.engine.relay_state_table;
  return RecordChangeRelay::Open(m.store, m.queue, clock(), std::move(o));
}

absl::StatusOr<std::unique_ptr<DurableWorker>> Embedded::NewWorker(WorkerOptions options) {
  return impl_->pipeline->NewWorker(std::move(options));
}

absl::StatusOr<std::unique_ptr<RecordChangeConsumer>> Embedded::NewRecordConsumer(
    RecordConsumerOptions options) {
  return impl_->pipeline->NewRecordConsumer(std::move(options));
}

std::unique_ptr<ops::Ops> Embedded::NewOps(ops::OpsOptions options) {
  return impl_->pipeline->NewOps(std::move(options));
}

}  // namespace outbox
