// Calling a subscription's handler: what it throws becomes an Internal error
// (a handler never takes a thread of the engine or the worker down with it).
#pragma once

#include "absl/status/status.h"
#include "outbox/envelope.h"
#include "outbox/subscription.h"

namespace outbox::routing {

// h(ctx, e); Unimplemented when no handler is bound; Internal ("handler
// threw: <what>") for an exception.
absl::Status CallHandler(const Handler& h, HandlerContext& ctx, const Envelope& e);

}  // namespace outbox::routing
