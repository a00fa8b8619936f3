// The JSON of the ops results (the ToJson of Status, DeadLetterRecord, PoisonPill, ...).
#include "nlohmann/json.hpp"

#include <string>
#include <vector>

#include "ops/ops_impl.h"
#include "outbox/ddb_json.h"
#include "outbox/envelope_codec.h"

namespace outbox::ops {

namespace {
nlohmann::json QueueJson(const QueueStatus& q) {
  return {{"name", q.name},       {"exists", q.exists},
          {"visible", q.visible}, {"in_flight", q.in_flight},
          {"delayed", q.delayed}, {"oldest_age_seconds", q.oldest_age_seconds}};
}
nlohmann::json ConsumerQueuesJson(const std::vector<Status::ConsumerQueue>& qs) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& c : qs) {
    nlohmann::json j = QueueJson(c.queue);
    j["dlq"] = QueueJson(c.dlq);
    out.push_back(std::move(j));
  }
  return out;
}
}  // namespace

nlohmann::json Status::ToJson() const {
  nlohmann::json ts = nlohmann::json::array();
  for (const auto& t : tenants) {
    nlohmann::json j = {{"tenant", t.tenant},
                        {"events", t.events},
                        {"last_seq", t.last_seq},
                        {"dead_letters", t.dead_letters},
                        {"out_of_order", t.out_of_order},
                        {"relay_last_seq", t.relay_last_seq},
                        {"relay_lag_events", t.relay_lag_events},
                        {"relay_lag_seconds", t.relay_lag_seconds}};
    if (t.verified) {
      j["chain_intact"] = t.chain_intact;
      if (!t.chain_intact) {
        j["chain_break"] = t.chain_break;
        j["first_broken_seq"] = t.first_broken_seq;
      }
    }
    ts.push_back(std::move(j));
  }
  nlohmann::json inbox_j = nlohmann::json::array();
  for (const auto& c : inbox) {
    inbox_j.push_back({{"subscription", c.subscription},
                       {"absent", c.absent},
                       {"pending", c.pending},
                       {"completed", c.completed},
                       {"retry", c.retry},
                       {"dead", c.dead}});
  }
  return {{"at", TimeText(at)},
          {"healthy", healthy()},
          {"chain_intact", chain_intact},
          {"events", events},
          {"dead_letters", dead_letters},
          {"dead_letters_redriven", dead_letters_redriven},
          {"poison_pills", poison_pills},
          {"out_of_order", out_of_order},
          {"queue", QueueJson(queue)},
          {"dlq", QueueJson(dlq)},
          {"consumer_queues", ConsumerQueuesJson(consumer_queues)},
          {"relay",
           {{"name", relay.name},
            {"mode", relay.mode},
            {"checkpoint", relay.checkpoint},
            {"lag_events", relay.lag_events},
            {"lag_seconds", relay.lag_seconds},
            {"errors", relay.errors}}},
          {"tenants", ts},
          {"inbox", inbox_j}};
}

nlohmann::json DeadLetterRecord::ToJson(bool full) const {
  nlohmann::json j = {{"id", id},
                      {"tenant", tenant},
                      {"event_id", event_id},
                      {"subscription", subscription},
                      {"queue", queue},
                      {"event_type", event_type},
                      {"seq", seq},
                      {"correlation_id", correlation_id},
                      {"error", error},
                      {"attempts", attempts},
                      {"terminal", terminal},
                      {"dead_at", TimeText(dead_at)},
                      {"state", state},
                      {"redrives", redrives}};
  if (redriven_at) j["redriven_at"] = TimeText(*redriven_at);
  if (full) {
    j["occurred_at"] = TimeText(occurred_at);
    auto e = EnvelopeFromItemUnkeyed(envelope);
    j["envelope"] = e.ok() ? EnvelopeToJson(*e) : ddbjson::Encode(envelope);
    if (inbox) {
      j["inbox"] = {{"status", std::string(InboxStatusName(inbox->status))},
                    {"attempts", inbox->attempts},
                    {"token", inbox->token},
                    {"owner", inbox->owner},
                    {"last_error", inbox->last_error},
                    {"updated_at", TimeText(inbox->updated_at)}};
    } else {
      j["inbox"] = nullptr;
    }
  }
  return j;
}

nlohmann::json PoisonPill::ToJson() const {
  return {{"source", source},
          {"id", id},
          {"error", error},
          {"body", body},
          {"body_bytes", body_bytes},
          {"queue", queue},
          {"group_id", group_id},
          {"receive_count", receive_count},
          {"recorded_at", TimeText(recorded_at)}};
}

nlohmann::json InboxEntry::ToJson() const {
  if (!found) return {{"found", false}};
  return {{"found", true},
          {"key", row.key.idempotency_key()},
          {"event_id", row.key.event_id},
          {"subscription", row.key.subscription},
          {"tenant", row.key.tenant},
          {"status", std::string(InboxStatusName(row.status))},
          {"attempts", row.attempts},
          {"token", row.token},
          {"owner", row.owner},
          {"last_error", row.last_error},
          {"lease_expires_at",
           row.status == InboxStatus::kPending ? TimeText(row.lease_expires_at) : ""},
          {"updated_at", TimeText(row.updated_at)},
          {"redrives", redrives},
          {"history", history},
          {"dead_letter", dead_letter},
          {"dead_letter_state", dead_letter_state}};
}

nlohmann::json RedriveResult::ToJson() const {
  nlohmann::json items_j = nlohmann::json::array();
  for (const auto& i : items) {
    items_j.push_back(
        {{"id", i.id}, {"action", i.action}, {"source", i.source}, {"detail", i.detail}});
  }
  return {{"dry_run", dry_run},   {"selected", selected}, {"reset", reset},
          {"resumed", resumed},   {"events", events},     {"from_dlq", from_dlq},
          {"from_log", from_log}, {"skipped", skipped},   {"failed", failed},
          {"items", items_j}};
}

nlohmann::json ReplayResult::ToJson() const {
  return {{"dry_run", dry_run},
          {"events", events},
          {"enqueued", enqueued},
          {"to_run", to_run},
          {"skipped_completed", skipped_completed},
          {"reset_completed", reset_completed},
          {"dead", dead},
          {"busy", busy},
          {"not_matched", not_matched}};
}

}  // namespace outbox::ops
