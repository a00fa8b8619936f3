// Reading event messages back from a relay's queue in the relay tests.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "outbox/ddb_json.h"
#include "outbox/envelope_codec.h"
#include "outbox/queue.h"

namespace outbox::testing_support {

inline constexpr char kEventsQueue[] = "outbox-events.fifo";

struct EventMessage {
  Envelope env;
  std::string body;
};

// Receives and deletes every message of `queue` in order. Each must be an
// event message (DESIGN §6): the event row's image as DynamoDB JSON, group id =
// its tenant, dedup id = its event id (checked with EXPECTs).
inline std::vector<EventMessage> DrainEventMessages(Queue& q,
                                                    const std::string& queue = kEventsQueue) {
  std::vector<EventMessage> out;
  while (true) {
    ReceiveOptions ro;
    ro.max_messages = 10;
    auto msgs = q.Receive(queue, ro);
    EXPECT_TRUE(msgs.ok()) << msgs.status();
    if (!msgs.ok() || msgs->empty()) return out;
    for (const auto& m : *msgs) {
      auto item = ddbjson::DecodeItem(nlohmann::json::parse(m.body));
      EXPECT_TRUE(item.ok()) << item.status();
      if (!item.ok()) return out;
      auto env = EnvelopeFromItem(*item);
      EXPECT_TRUE(env.ok()) << env.status();
      if (!env.ok()) return out;
      EXPECT_EQ(m.group_id, env->tenant);
      EXPECT_EQ(m.dedup_id, env->id);
      out.push_back({*env, m.body});
      EXPECT_TRUE(q.Delete(queue, m.receipt_handle).ok());
    }
  }
}

// The envelopes of DrainEventMessages.
inline std::vector<Envelope> DrainEvents(Queue& q, const std::string& queue = kEventsQueue) {
  std::vector<Envelope> out;
  for (auto& m : DrainEventMessages(q, queue)) out.push_back(std::move(m.env));
  return out;
}

}  // namespace outbox::testing_support
