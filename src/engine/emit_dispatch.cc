// The handlers an emit runs itself (src/engine/emit.cc): INLINE inside the
// emit's transaction, LOCAL after it commits, and the replay of an emit
// whose idempotency token was seen before.
#include <memory>
#include <random>
#include <thread>

#include "engine/emit_internal.h"
#include "engine/engine_impl.h"
#include "fmt/format.h"
#include "outbox/ddb_json.h"
#include "outbox/outbox_row.h"
#include "routing/call_handler.h"
#include "spdlog/spdlog.h"

namespace outbox::engine_internal {
namespace {

class InlineContext final : public HandlerContext {
 public:
  InlineContext(const RequestContext& req, std::string key, int attempt, absl::Time deadline,
                const std::string& events_table, std::vector<TransactWriteItem>* writes,
                std::vector<std::string>* owners, std::string owner)
      : req_(req),
        key_(std::move(key)),
        attempt_(attempt),
        deadline_(deadline),
        events_table_(events_table),
        writes_(writes),
        owners_(owners),
        owner_(std::move(owner)) {}
  const RequestContext& request() const override { return req_; }
  const std::string& idempotency_key() const override { return key_; }
  int attempt() const override { return attempt_; }
  absl::Time deadline() const override { return deadline_; }
  absl::Status AddWrite(TransactWriteItem write) override {
    if (write.table == events_table_) {
      return absl::InvalidArgumentError(
          fmt::format("subscription {}: AddWrite: writes to the events table '{}' are not allowed",
                      owner_, events_table_));
    }
    writes_->push_back(std::move(write));
    owners_->push_back(owner_);
    return absl::OkStatus();
  }

 private:
  const RequestContext& req_;
  std::string key_;
  int attempt_;
  absl::Time deadline_;
  const std::string& events_table_;
  std::vector<TransactWriteItem>* writes_;
  std::vector<std::string>* owners_;
  std::string owner_;
};

class LocalContext final : public HandlerContext {
 public:
  LocalContext(RequestContext req, std::string key, absl::Time deadline)
      : req_(std::move(req)), key_(std::move(key)), deadline_(deadline) {}
  const RequestContext& request() const override { return req_; }
  const std::string& idempotency_key() const override { return key_; }
  int attempt() const override { return 1; }
  absl::Time deadline() const override { return deadline_; }
  absl::Status AddWrite(TransactWriteItem) override {
    return absl::FailedPreconditionError(
        "AddWrite is not allowed on the LOCAL lane (it runs after commit)");
  }

 private:
  RequestContext req_;
  std::string key_;
  absl::Time deadline_;
};

}  // namespace

using emit_detail::IdempPk;
using emit_detail::WithPrefix;
using routing::CallHandler;

absl::Status EngineImpl::RunInline(EmitJob& job, const Envelope& e, int attempt) {
  std::shared_lock<std::shared_mutex> l(router_mu_);
  for (const Subscription* sub : router_.Match(e, Lane::kInline)) {
    InlineContext ctx(job.ctx, e.id + ":" + sub->name, attempt,
                      clock_->Now() + sub->options.handler_timeout, options_.events_table,
                      &job.inline_writes, &job.inline_write_owner, sub->name);
    absl::Status s = CallHandler(sub->handler, ctx, e);
    if (!s.ok()) {
      metrics_.inline_errors++;
      return WithPrefix(
          s, fmt::format("emit aborted: INLINE subscription {} failed on {} (tenant {}): ",
                         sub->name, e.type, e.tenant));
    }
  }
  return absl::OkStatus();
}

void EngineImpl::DispatchLocal(const Envelope& e) {
  std::shared_lock<std::shared_mutex> l(router_mu_);
  auto subs = router_.Match(e, Lane::kLocal);
  if (subs.empty()) return;
  auto shared = std::make_shared<const Envelope>(e);
  for (const Subscription* sub : subs) {
    pool_->Submit([this, shared, name = sub->name, handler = sub->handler,
                   timeout = sub->options.handler_timeout] {
      const Envelope& ev = *shared;
      LocalContext ctx(RequestContext{ev.tenant, ev.correlation_id, ev.actor}, ev.id + ":" + name,
                       clock_->Now() + timeout);
      absl::Status s = CallHandler(handler, ctx, ev);
      if (!s.ok()) {
        metrics_.local_errors++;
        spdlog::warn(
            "LOCAL subscription {} failed: tenant={} event_id={} seq={} type={} correlation_id={}: "
            "{}",
            name, ev.tenant, ev.id, ev.seq, ev.type, ev.correlation_id, std::string(s.message()));
      }
      metrics_.local_runs++;
    });
  }
}

void EngineImpl::ReplayIdempotent(EmitJob& job) {
  const std::string& tenant = job.ctx.tenant;
  GetRequest g;
  g.table = options_.events_table;
  g.key = Item{{"pk", Value::S(IdempPk(tenant))}, {"sk", Value::S(*job.options.idempotency_token)}};
  g.consistent_read = true;
  auto r = store_->GetItem(g);
  if (!r.ok() || !r->has_value()) {
    job.status = absl::InternalError(fmt::format(
        "emit: idempotency row of token {} could not be read: {}", *job.options.idempotency_token,
        r.ok() ? "absent" : std::string(r.status().message())));
    return;
  }
  const Item& it = **r;
  int64_t first = 0, count = 0;
  auto f = it.find("first_seq");
  auto c = it.find("count");
  if (f == it.end() || c == it.end() || !f->second.n().ToInt64(&first) ||
      !c->second.n().ToInt64(&count)) {
    job.status = absl::InternalError("emit: idempotency row is malformed");
    return;
  }
  auto log = ReadLog(tenant, first, count);
  if (!log.ok()) {
    job.status = log.status();
    return;
  }
  if (static_cast<int64_t>(log->size()) != count) {
    job.status =
        absl::InternalError(fmt::format("emit: events {}..{} of idempotency token {} are missing",
                                        first, first + count - 1, *job.options.idempotency_token));
    return;
  }
  if (count != static_cast<int64_t>(job.events.size()) || (*log)[0].type != job.events[0].type) {
    job.status = absl::InvalidArgumentError(
        fmt::format("idempotency_token: '{}' was already used for a different emit ({} event(s) of "
                    "type {} at seq {})",
                    *job.options.idempotency_token, count, (*log)[0].type, first));
    return;
  }
  metrics_.idempotent_replays++;
  job.result = *std::move(log);
}

}  // namespace outbox::engine_internal
