// The queue message of one event row, shared by the change-feed relay and the
// polling relay so that both produce byte-identical messages (SPEC §6).
#pragma once

#include <string>

#include "outbox/ddb_json.h"
#include "outbox/queue.h"
#include "outbox/value.h"

namespace outbox::relay_internal {

// The event row's whole image as DynamoDB JSON (never a per-field template).
inline std::string EventMessageBody(const Item& event_row) {
  return ddbjson::Encode(event_row).dump();
}

// group id = tenant, dedup id = event id.
inline SendMessageRequest EventMessage(std::string body, const std::string& tenant,
                                       const std::string& event_id) {
  SendMessageRequest m;
  m.body = std::move(body);
  m.group_id = tenant;
  m.dedup_id = event_id;
  return m;
}

}  // namespace outbox::relay_internal
