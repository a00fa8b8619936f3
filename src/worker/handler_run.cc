#include "worker/handler_run.h"

#include <chrono>
#include <exception>
#include <future>

#include "fmt/format.h"
#include "routing/call_handler.h"
#include "worker/handler_pool.h"

namespace outbox::worker {

absl::Status DurableContext::AddWrite(TransactWriteItem write) {
  if (!writes_allowed_) {
    return absl::FailedPreconditionError(fmt::format(
        "{}: AddWrite is not allowed on the BEST_EFFORT lane (no transaction to join)", key_));
  }
  util::MutexLock lock(mu_);
  if (closed_) {
    return absl::FailedPreconditionError(
        fmt::format("{}: AddWrite after the run ended (timed out); the write is discarded", key_));
  }
  writes_.push_back(std::move(write));
  return absl::OkStatus();
}

std::vector<TransactWriteItem> DurableContext::Close() {
  util::MutexLock lock(mu_);
  closed_ = true;
  return std::move(writes_);
}

using routing::CallHandler;

HandlerRun RunHandler(const Handler& handler, std::shared_ptr<DurableContext> ctx,
                      const Envelope& event, absl::Duration timeout) {
  auto result = std::make_shared<std::promise<absl::Status>>();
  std::future<absl::Status> done = result->get_future();
  HandlerPool::Global().Run(
      [handler, ctx, event, result] { result->set_value(CallHandler(handler, *ctx, event)); });
  auto wait = std::chrono::microseconds(absl::ToInt64Microseconds(timeout));
  HandlerRun run;
  if (done.wait_for(wait) != std::future_status::ready) {
    // The handler keeps its pool thread until it returns; the next run gets another one.
    (void)ctx->Close();
    run.status = absl::DeadlineExceededError(
        fmt::format("handler timed out after {}", absl::FormatDuration(timeout)));
    return run;
  }
  run.status = done.get();
  std::vector<TransactWriteItem> writes = ctx->Close();
  if (run.status.ok()) run.writes = std::move(writes);
  return run;
}

}  // namespace outbox::worker
