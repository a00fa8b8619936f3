// The ops endpoints of the daemon over the ops API (include/outbox/ops.h):
// GET /metrics, GET /ops/reconcile?tenant=, GET /ops/dead-letters,
// POST /ops/redrive (docs/SERVER.md).
#pragma once

#include <httplib.h>

#include "outbox/metrics.h"
#include "outbox/ops.h"

namespace outbox::server {

void AddOpsRoutes(httplib::Server& http, ops::Ops* ops, const metrics::Registry* registry);

}  // namespace outbox::server
