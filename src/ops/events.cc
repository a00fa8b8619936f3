// The event log as the console reads it (include/outbox/ops.h "the event
// log"): pages in either direction, searches by event id or correlation id,
// and one event with the inbox row of every matching subscription.
#include <algorithm>

#include "fmt/format.h"
#include "ops/ops_impl.h"
#include "outbox/envelope_codec.h"
#include "outbox/subscription.h"

namespace outbox::ops {

namespace {
constexpr int64_t kMaxPage = 1000;
constexpr int kReadPage = 500;
}  // namespace

absl::Status EventQuery::Validate() const {
  if (auto s = ValidateTenant(tenant); !s.ok())
    return absl::InvalidArgumentError(fmt::format("tenant: {}", std::string(s.message())));
  if (limit < 1 || limit > kMaxPage)
    return absl::InvalidArgumentError(
        fmt::format("limit: must be between 1 and {}, got {}", kMaxPage, limit));
  if (from_seq < 0)
    return absl::InvalidArgumentError(fmt::format("from: must be >= 0, got {}", from_seq));
  if (event_id.size() > 128) return absl::InvalidArgumentError("event_id: 1..128 characters");
  if (correlation_id.size() > 128)
    return absl::InvalidArgumentError("correlation_id: 1..128 characters");
  if (scan_limit < 1) return absl::InvalidArgumentError("scan_limit: must be >= 1");
  return absl::OkStatus();
}

nlohmann::json EventPage::ToJson() const {
  nlohmann::json arr = nlohmann::json::array();
  for (const Envelope& e : events) arr.push_back(EnvelopeToJson(e));
  nlohmann::json j = {{"events", arr},
                      {"count", arr.size()},
                      {"scanned", scanned},
                      {"scan_truncated", scan_truncated}};
  j["next_from"] = next_from ? nlohmann::json(*next_from) : nlohmann::json(nullptr);
  return j;
}

nlohmann::json EventDetail::ToJson() const {
  nlohmann::json subs = nlohmann::json::array();
  for (const auto& s : subscriptions) {
    nlohmann::json j = {{"subscription", s.subscription}, {"lane", s.lane}};
    if (s.lane == "DURABLE") j["inbox"] = s.inbox.ToJson();
    subs.push_back(std::move(j));
  }
  return {{"event", EnvelopeToJson(event)}, {"subscriptions", subs}};
}

absl::StatusOr<EventPage> Ops::ListEvents(const EventQuery& q) {
  if (auto s = q.Validate(); !s.ok()) return s;
  const bool search = !q.event_id.empty() || !q.correlation_id.empty();
  EventPage page;
  QueryRequest r;
  r.table = impl_->eo().events_table;
  r.scan_forward = !q.newest_first;
  r.consistent_read = true;
  if (q.newest_first && q.from_seq > 0) {
    r.key_condition = "pk = :p AND sk <= :from";
  } else if (!q.newest_first) {
    r.key_condition = "pk = :p AND sk >= :from";
  } else {
    r.key_condition = "pk = :p";
  }
  r.args.values = {{":p", Value::S(EventPk(q.tenant))}};
  if (r.key_condition != "pk = :p")
    r.args.values[":from"] = Value::S(SeqSortKey(std::max<int64_t>(q.from_seq, 1)));
  int64_t last_seq = 0;
  bool more = true;
  while (more && static_cast<int64_t>(page.events.size()) < q.limit) {
    if (search && page.scanned >= q.scan_limit) {
      page.scan_truncated = true;
      break;
    }
    int64_t want = search ? kReadPage : q.limit - static_cast<int64_t>(page.events.size());
    if (search) want = std::min<int64_t>(want, q.scan_limit - page.scanned);
    r.limit = static_cast<int>(std::min<int64_t>(want, kReadPage));
    auto got = impl_->store->Query(r);
    if (!got.ok()) return got.status();
    for (const Item& item : got->items) {
      auto e = EnvelopeFromItem(item);
      if (!e.ok()) {
        return absl::DataLossError(fmt::format("event row {} of tenant {}: {}", StrAttr(item, "sk"),
                                               q.tenant, std::string(e.status().message())));
      }
      ++page.scanned;
      last_seq = e->seq;
      if (!q.event_id.empty() && e->id != q.event_id) continue;
      if (!q.correlation_id.empty() && e->correlation_id != q.correlation_id) continue;
      page.events.push_back(*std::move(e));
      if (static_cast<int64_t>(page.events.size()) >= q.limit) break;
    }
    more = got->last_evaluated_key.has_value();
    r.exclusive_start_key = got->last_evaluated_key;
    if (!q.event_id.empty() && !page.events.empty()) more = false;  // ids are unique
  }
  if ((more || page.scan_truncated) && last_seq > 0) {
    const int64_t next = q.newest_first ? last_seq - 1 : last_seq + 1;
    if (next >= 1) page.next_from = next;
  }
  return page;
}

absl::StatusOr<EventDetail> Ops::GetEvent(const std::string& tenant, const std::string& event_id) {
  EventQuery q;
  q.tenant = tenant;
  q.event_id = event_id;
  q.limit = 1;
  q.newest_first = true;
  q.scan_limit = INT64_MAX;
  if (event_id.empty()) return absl::InvalidArgumentError("event_id: must not be empty");
  auto page = ListEvents(q);
  if (!page.ok()) return page.status();
  if (page->events.empty())
    return absl::NotFoundError(fmt::format("event {} of tenant {}: not found", event_id, tenant));
  EventDetail d;
  d.event = std::move(page->events.front());
  if (impl_->router == nullptr) return d;
  for (Lane lane : {Lane::kInline, Lane::kLocal, Lane::kDurable, Lane::kBestEffort}) {
    for (const Subscription* s : impl_->router->Match(d.event, lane)) {
      EventSubscriptionState st;
      st.subscription = s->name;
      st.lane = std::string(LaneName(lane));
      if (lane == Lane::kDurable) {
        auto inbox = InboxShow(d.event.id + ":" + s->name);
        if (!inbox.ok()) return inbox.status();
        st.inbox = *std::move(inbox);
      }
      d.subscriptions.push_back(std::move(st));
    }
  }
  return d;
}

}  // namespace outbox::ops
