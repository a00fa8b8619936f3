// routing::CallHandler (src/routing/call_handler.h).
#include "routing/call_handler.h"

#include <exception>

#include "fmt/format.h"

namespace outbox::routing {

absl::Status CallHandler(const Handler& h, HandlerContext& ctx, const Envelope& e) {
  if (!h) return absl::UnimplementedError("no handler is bound to this subscription");
  try {
    return h(ctx, e);
  } catch (const std::exception& ex) {
    return absl::InternalError(fmt::format("handler threw: {}", ex.what()));
  } catch (...) {
    return absl::InternalError("handler threw an unknown exception");
  }
}

}  // namespace outbox::routing
