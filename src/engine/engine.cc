// Engine: options, opening, tables and subscriptions. Emit is in emit.cc,
// reading and verifying the log in verify.cc.
#include "engine/engine_impl.h"
#include "fmt/format.h"
#include "outbox/outbox_row.h"
#include "spdlog/spdlog.h"

namespace outbox {

absl::Status EngineOptions::Validate() const {
  for (const auto* t : {&events_table, &inbox_table, &dead_letters_table, &relay_state_table}) {
    if (t->size() < 3 || t->size() > 255) {
      return absl::InvalidArgumentError(
          fmt::format("engine options: table name '{}' must be 3–255 characters", *t));
    }
  }
  if (max_emit_retries < 0 || max_emit_retries > 1000) {
    return absl::InvalidArgumentError("engine options: max_emit_retries must be in [0, 1000]");
  }
  if (retry_base < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("engine options: retry_base must not be negative");
  }
  if (local_threads < 1 || local_threads > 256) {
    return absl::InvalidArgumentError("engine options: local_threads must be in [1, 256]");
  }
  if (max_combined_emits < 1) {
    return absl::InvalidArgumentError("engine options: max_combined_emits must be ≥ 1");
  }
  if (async_emit_threads < 1 || async_emit_threads > 256) {
    return absl::InvalidArgumentError(fmt::format(
        "engine options: async_emit_threads must be in [1, 256], got {}", async_emit_threads));
  }
  if (max_async_emits_in_flight < 1 || max_async_emits_in_flight > 1000000) {
    return absl::InvalidArgumentError(
        fmt::format("engine options: max_async_emits_in_flight must be in [1, 1000000], got {}",
                    max_async_emits_in_flight));
  }
  if (write_outbox_rows) {
    if (outbox_table.size() < 3 || outbox_table.size() > 255) {
      return absl::InvalidArgumentError(
          fmt::format("engine options: outbox_table '{}' must be 3–255 characters", outbox_table));
    }
    if (outbox_aggregate.empty() || outbox_aggregate.size() > 128 ||
        outbox_aggregate.find('#') != std::string::npos) {
      return absl::InvalidArgumentError(
          "engine options: outbox_aggregate must be 1–128 characters without '#'");
    }
    if (outbox_shards < 1 || outbox_shards > outbox_row::kMaxShards) {
      return absl::InvalidArgumentError(
          fmt::format("engine options: outbox_shards must be in [1, {}], got {}",
                      outbox_row::kMaxShards, outbox_shards));
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateTenant(std::string_view tenant) {
  if (tenant.empty() || tenant.size() > 128) {
    return absl::InvalidArgumentError(
        fmt::format("tenant: must be 1–128 characters (got {})", tenant.size()));
  }
  for (char c : tenant) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '.' || c == ':' || c == '-';
    if (!ok) return absl::InvalidArgumentError("tenant: allowed characters are [A-Za-z0-9_.:-]");
  }
  return absl::OkStatus();
}

std::string_view ChainBreakName(ChainBreak b) {
  switch (b) {
    case ChainBreak::kNone:
      return "none";
    case ChainBreak::kGap:
      return "gap";
    case ChainBreak::kEdited:
      return "edited";
    case ChainBreak::kReordered:
      return "reordered";
    case ChainBreak::kHeadMismatch:
      return "head_mismatch";
  }
  return "none";
}

absl::StatusOr<std::unique_ptr<Engine>> Engine::Open(Store* store, EngineOptions options) {
  if (store == nullptr) return absl::InvalidArgumentError("engine: store is null");
  if (auto s = options.Validate(); !s.ok()) return s;
  return std::unique_ptr<Engine>(new engine_internal::EngineImpl(store, std::move(options)));
}

std::future<absl::StatusOr<Envelope>> Engine::EmitAsync(const RequestContext& ctx, std::string type,
                                                        Value payload,
                                                        std::vector<TransactWriteItem> extra_writes,
                                                        EmitOptions options) {
  auto promise = std::make_shared<std::promise<absl::StatusOr<Envelope>>>();
  auto future = promise->get_future();
  EmitAsync(ctx, std::move(type), std::move(payload), std::move(extra_writes), std::move(options),
            [promise](absl::StatusOr<Envelope> r) { promise->set_value(std::move(r)); });
  return future;
}

namespace engine_internal {

EngineImpl::EngineImpl(Store* store, EngineOptions options)
    : store_(store),
      options_(std::move(options)),
      clock_(options_.clock ? options_.clock : Clock::Real()),
      pool_(std::make_unique<LocalPool>(options_.local_threads, "outbox-local")),
      async_pool_(std::make_unique<LocalPool>(options_.async_emit_threads, "outbox-emit")) {}

EngineImpl::~EngineImpl() {
  {
    // Every EmitAsync in flight finishes (and its callback runs) first.
    util::MutexLock l(async_mu_);
    while (async_in_flight_ > 0 || async_callbacks_ > 0) async_cv_.Wait(l);
  }
  async_pool_.reset();
  pool_.reset();
}

absl::Status EngineImpl::EnsureTables() {
  auto existing = store_->ListTables();
  if (!existing.ok()) return existing.status();
  auto spec = [](const std::string& name) {
    TableSpec s;
    s.name = name;
    s.hash_key = {"pk", Type::S};
    s.range_key = KeyAttribute{"sk", Type::S};
    return s;
  };
  std::vector<TableSpec> specs;
  TableSpec events = spec(options_.events_table);
  events.stream_enabled = true;
  events.stream_view_type = StreamViewType::kNewAndOldImages;
  specs.push_back(events);
  TableSpec inbox = spec(options_.inbox_table);
  inbox.ttl_attribute = "ttl";
  specs.push_back(inbox);
  TableSpec dead = spec(options_.dead_letters_table);
  dead.ttl_attribute = "ttl";
  specs.push_back(dead);
  specs.push_back(spec(options_.relay_state_table));
  if (options_.write_outbox_rows) specs.push_back(outbox_row::Spec(options_.outbox_table));
  for (const auto& s : specs) {
    if (std::find(existing->begin(), existing->end(), s.name) != existing->end()) continue;
    absl::Status st = store_->CreateTable(s);
    // Another process may have created it meanwhile.
    if (!st.ok() && st.code() != absl::StatusCode::kAlreadyExists) {
      return absl::Status(st.code(), fmt::format("engine: creating table {}: {}", s.name,
                                                 std::string(st.message())));
    }
  }
  return absl::OkStatus();
}

absl::Status EngineImpl::Subscribe(Subscription sub) {
  if (!sub.handler) {
    return absl::InvalidArgumentError(
        fmt::format("subscription {}: handler is required", sub.name));
  }
  // Each lane has exactly one dispatcher (DESIGN §4). The engine dispatches
  // INLINE (in the emit transaction) and LOCAL (after the commit); DURABLE
  // belongs to the DurableWorker and BEST_EFFORT to the RecordChangeConsumer,
  // each with its own router. Accepting them here would bind a subscription
  // that never runs.
  if (sub.lane == Lane::kDurable || sub.lane == Lane::kBestEffort) {
    const char* lane = sub.lane == Lane::kDurable ? "DURABLE" : "BEST_EFFORT";
    const char* dispatcher = sub.lane == Lane::kDurable ? "DurableWorker" : "RecordChangeConsumer";
    return absl::FailedPreconditionError(fmt::format(
        "subscription {}: lane {} has no dispatcher in the engine (emit runs INLINE and LOCAL "
        "only); register it with the {}'s router (outbox worker/serve: [[subscriptions]] in "
        "outbox.toml)",
        sub.name, lane, dispatcher));
  }
  std::unique_lock<std::shared_mutex> l(router_mu_);
  return router_.Add(std::move(sub));
}

}  // namespace engine_internal
}  // namespace outbox
