// The queue message of one event row, shared by the change-feed, stream and
// polling relays so that all produce byte-identical messages (DESIGN §6).
#pragma once

#include <cstdint>
#include <string>

#include "model/ddb_text.h"
#include "outbox/ddb_json.h"
#include "outbox/envelope.h"
#include "outbox/queue.h"
#include "outbox/value.h"

namespace outbox::relay_internal {

// The event row's whole image as DynamoDB JSON (never a per-field template).
inline std::string EventMessageBody(const Item& event_row) {
  return ddbjson::EncodeText(event_row);  // the bytes of ddbjson::Encode(row).dump()
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

// The tenant of an event row key (pk "TENANT#<t>#EVENT"); false for any other
// row of the events table.
bool EventRowTenant(const Item& keys, std::string* tenant);

// One event row image planned as a queue message (feed and stream relays):
// `body` with the envelope's tenant/id/seq, or a `poison_reason` when the image
// is missing or malformed, its tenant is not its key's, or the message would
// exceed the queue's `max_message_size`.
struct PlannedEvent {
  std::string body;
  std::string poison_reason;
  std::string tenant;
  std::string event_id;
  int64_t seq = 0;
  Envelope envelope;  // the decoded event (for RelayOptions::route)
  bool poison() const { return !poison_reason.empty(); }
};
PlannedEvent PlanEventMessage(const Item* image, const std::string& key_tenant,
                              int64_t max_message_size);

}  // namespace outbox::relay_internal
