#include "outbox/inbox.h"

#include <algorithm>

#include "fmt/format.h"
#include "model/item_attrs.h"
#include "util/crash_point.h"

namespace outbox {
namespace {

constexpr std::string_view kStatusNames[] = {"PENDING", "COMPLETED", "RETRY", "DEAD"};

Value S(std::string s) { return Value::S(std::move(s)); }
Value N(int64_t n) { return Value::N(n); }

constexpr auto ToInt = item_attrs::Int;
constexpr auto ToStr = item_attrs::Str;

InboxRow RowFromItem(const Item& item) {
  InboxRow r;
  r.key.event_id = ToStr(item, "event_id");
  r.key.subscription = ToStr(item, "subscription");
  r.key.tenant = ToStr(item, "tenant");
  (void)ParseInboxStatus(ToStr(item, "status"), &r.status);
  r.attempts = static_cast<int>(ToInt(item, "attempts"));
  r.token = ToInt(item, "token");
  r.owner = ToStr(item, "owner");
  r.last_error = ToStr(item, "last_error");
  r.lease_expires_at = absl::FromUnixMillis(ToInt(item, "lease_expires_at"));
  r.updated_at = absl::FromUnixMillis(ToInt(item, "updated_at"));
  r.dead_letter_open = item_attrs::Bool(item, "dead_letter_open");
  return r;
}

// Names used by every inbox expression (several are DynamoDB reserved words).
AttrNames Names() {
  return {{"#st", "status"}, {"#tok", "token"}, {"#own", "owner"}, {"#ttl", "ttl"}};
}

}  // namespace

std::string_view InboxStatusName(InboxStatus s) { return kStatusNames[static_cast<int>(s)]; }

bool ParseInboxStatus(std::string_view s, InboxStatus* out) {
  for (int i = 0; i < 4; ++i) {
    if (kStatusNames[i] == s) {
      *out = static_cast<InboxStatus>(i);
      return true;
    }
  }
  return false;
}

Inbox::Inbox(Store* store, Clock* clock, InboxOptions options)
    : store_(store), clock_(clock ? clock : Clock::Real()), options_(std::move(options)) {}

Item Inbox::RowKey(const InboxKey& key) {
  return Item{{"pk", S("IDEMP#" + key.idempotency_key())}, {"sk", S("INBOX")}};
}

Item Inbox::DeadLetterKey(const InboxKey& key) {
  return Item{{"pk", S("TENANT#" + key.tenant + "#DEAD")}, {"sk", S(key.idempotency_key())}};
}

absl::Status Inbox::EnsureTables() {
  for (const auto& name : {options_.table, options_.dead_letters_table}) {
    TableSpec spec;
    spec.name = name;
    spec.hash_key = {"pk", Type::S};
    spec.range_key = KeyAttribute{"sk", Type::S};
    spec.ttl_attribute = "ttl";
    absl::Status s = store_->CreateTable(spec);
    if (!s.ok() && DdbErrorName(s) != ddb_error::kResourceInUse) return s;
  }
  return absl::OkStatus();
}

absl::StatusOr<Claim> Inbox::TryClaim(const InboxKey& key, const std::string& owner,
                                      absl::Duration lease, int max_attempts) {
  if (max_attempts < 1) return absl::InvalidArgumentError("max_attempts: must be >= 1");
  if (lease <= absl::ZeroDuration()) return absl::InvalidArgumentError("lease: must be positive");
  absl::Time now = clock_->Now();
  UpdateRequest u;
  u.table = options_.table;
  u.key = RowKey(key);
  u.update =
      "SET #st = :pending, lease_expires_at = :lease, attempts = if_not_exists(attempts, :zero) + "
      ":one, "
      "#tok = if_not_exists(#tok, :zero) + :one, #own = :owner, #ttl = :ttl, updated_at = :now_ms, "
      "event_id = :eid, subscription = :sub, tenant = :tenant";
  u.condition =
      "attribute_not_exists(pk) OR (#st = :pending AND lease_expires_at < :now_ms) OR #st = :retry "
      "OR "
      "(#st = :dead AND attempts < :max)";
  u.args.names = Names();
  u.args.values = {{":pending", S("PENDING")},
                   {":retry", S("RETRY")},
                   {":dead", S("DEAD")},
                   {":lease", N(absl::ToUnixMillis(now + lease))},
                   {":zero", N(0)},
                   {":one", N(1)},
                   {":owner", S(owner)},
                   {":ttl", N(absl::ToUnixSeconds(now + options_.row_ttl))},
                   {":now_ms", N(absl::ToUnixMillis(now))},
                   {":max", N(max_attempts)},
                   {":eid", S(key.event_id)},
                   {":sub", S(key.subscription)},
                   {":tenant", S(key.tenant)}};
  if (OUTBOX_MUTATION(kClaimOnlyIfAbsent)) {  // the reference system's bug (test builds only)
    u.condition = "attribute_not_exists(pk)";
    for (const char* unused : {":retry", ":dead", ":max"}) u.args.values.erase(unused);
  }
  u.return_values = ReturnValues::kAllNew;
  u.return_old_on_condition_failure = true;
  auto r = store_->UpdateItem(u);
  Claim c;
  if (r.ok()) {
    c.outcome = Claim::Outcome::kClaimed;
    c.token = ToInt(*r->attributes, "token");
    c.attempt = static_cast<int>(ToInt(*r->attributes, "attempts"));
    c.lease_expires_at = now + lease;
    c.dead_letter_open = RowFromItem(*r->attributes).dead_letter_open;
    OUTBOX_CRASH_POINT("worker.after_claim");
    return c;
  }
  if (DdbErrorName(r.status()) != ddb_error::kConditionalCheckFailed) return r.status();
  auto old = ConditionFailedItem(r.status());
  if (!old) return absl::InternalError("claim failed without the current row");
  InboxRow row = RowFromItem(*old);
  c.token = row.token;
  c.attempt = row.attempts;
  c.lease_expires_at = row.lease_expires_at;
  switch (row.status) {
    case InboxStatus::kCompleted:
      c.outcome = Claim::Outcome::kCompleted;
      break;
    case InboxStatus::kPending:
      c.outcome = Claim::Outcome::kBusy;
      break;
    default:
      c.outcome = Claim::Outcome::kExhausted;
      break;
  }
  return c;
}

absl::Status Inbox::Complete(const InboxKey& key, int64_t token,
                             std::vector<TransactWriteItem> writes, bool resolve_dead_letter) {
  return Complete(key, token, std::move(writes), resolve_dead_letter,
                  [this](const TransactWriteRequest& r) { return store_->TransactWriteItems(r); });
}

absl::Status Inbox::Complete(const InboxKey& key, int64_t token,
                             std::vector<TransactWriteItem> writes, bool resolve_dead_letter,
                             const CommitFn& commit) {
  const size_t max_writes = static_cast<size_t>(kMaxTransactItems) - (resolve_dead_letter ? 2 : 1);
  if (writes.size() > max_writes) {
    return absl::InvalidArgumentError(fmt::format(
        "handler writes: at most {} per completion, got {}", max_writes, writes.size()));
  }
  const int64_t now_ms = clock_->NowMillis();
  TransactWriteRequest req;
  TransactWriteItem done;
  done.kind = TransactWriteItem::Kind::kUpdate;
  done.table = options_.table;
  done.item = RowKey(key);
  done.update =
      resolve_dead_letter
          ? "SET #st = :completed, updated_at = :now_ms REMOVE lease_expires_at, dead_letter_open"
          : "SET #st = :completed, updated_at = :now_ms REMOVE lease_expires_at";
  done.condition = "#tok = :mine AND #st = :pending";
  done.args.names = {{"#st", "status"}, {"#tok", "token"}};
  done.args.values = {{":completed", S("COMPLETED")},
                      {":pending", S("PENDING")},
                      {":mine", N(token)},
                      {":now_ms", N(now_ms)}};
  req.items.push_back(std::move(done));
  for (auto& w : writes) req.items.push_back(std::move(w));
  const size_t letter_index = req.items.size();
  if (resolve_dead_letter) {
    // The revived row's dead letter: DEAD -> RESOLVED, last so the handler's
    // writes keep their indexes in cancellation reasons.
    TransactWriteItem letter;
    letter.kind = TransactWriteItem::Kind::kUpdate;
    letter.table = options_.dead_letters_table;
    letter.item = DeadLetterKey(key);
    letter.update = "SET #state = :resolved, resolved_at = :now_ms";
    letter.condition = "#state = :dead";
    letter.args.names = {{"#state", "state"}};
    letter.args.values = {
        {":resolved", S("RESOLVED")}, {":dead", S("DEAD")}, {":now_ms", N(now_ms)}};
    req.items.push_back(std::move(letter));
  }
  OUTBOX_CRASH_POINT("worker.after_handler_before_complete");
  absl::Status s = commit(req);
  auto reasons = s.ok() || DdbErrorName(s) != ddb_error::kTransactionCanceled
                     ? std::vector<CancellationReason>{}
                     : CancellationReasons(s);
  if (resolve_dead_letter && reasons.size() > letter_index &&
      reasons[letter_index].code == "ConditionalCheckFailed" &&
      std::all_of(reasons.begin(), reasons.begin() + static_cast<std::ptrdiff_t>(letter_index),
                  [](const CancellationReason& r) { return r.code == "None"; })) {
    // Only the letter failed: it is gone or no longer DEAD (an operator acted
    // on it). The work still completes; the row's marker is cleared.
    req.items.pop_back();
    s = commit(req);
    reasons = s.ok() || DdbErrorName(s) != ddb_error::kTransactionCanceled
                  ? std::vector<CancellationReason>{}
                  : CancellationReasons(s);
  }
  if (s.ok()) OUTBOX_CRASH_POINT("worker.after_complete_before_delete");
  if (s.ok() || DdbErrorName(s) != ddb_error::kTransactionCanceled) return s;
  if (!reasons.empty() && reasons[0].code == "ConditionalCheckFailed") {
    return absl::FailedPreconditionError(
        fmt::format("lease lost: inbox row {} no longer holds token {}; nothing was committed",
                    key.idempotency_key(), token));
  }
  for (size_t i = 1; i < letter_index && i < reasons.size(); ++i) {
    if (reasons[i].code != "None") {
      const auto& w = req.items[i];
      return absl::FailedPreconditionError(
          fmt::format("handler write {} (table {}) failed: {} {}; nothing was committed", i - 1,
                      w.table, reasons[i].code, reasons[i].message));
    }
  }
  return s;
}

absl::Status Inbox::Release(const InboxKey& key, int64_t token, const std::string& error) {
  UpdateRequest u;
  u.table = options_.table;
  u.key = RowKey(key);
  u.update = "SET #st = :retry, last_error = :err, updated_at = :now_ms REMOVE lease_expires_at";
  u.condition = "#tok = :mine AND #st = :pending";
  u.args.names = {{"#st", "status"}, {"#tok", "token"}};
  u.args.values = {{":retry", S("RETRY")},
                   {":pending", S("PENDING")},
                   {":err", S(error.substr(0, 4096))},
                   {":mine", N(token)},
                   {":now_ms", N(clock_->NowMillis())}};
  auto r = store_->UpdateItem(u);
  if (!r.ok() && DdbErrorName(r.status()) == ddb_error::kConditionalCheckFailed) {
    return absl::FailedPreconditionError(fmt::format(
        "lease lost: inbox row {} no longer holds token {}", key.idempotency_key(), token));
  }
  return r.status();
}

absl::Status Inbox::MarkDead(const InboxKey& key, int64_t token, const std::string& error,
                             bool terminal, int max_attempts, const Item& envelope_item,
                             const std::string& queue) {
  absl::Time now = clock_->Now();
  TransactWriteRequest req;
  TransactWriteItem dead;
  dead.kind = TransactWriteItem::Kind::kUpdate;
  dead.table = options_.table;
  dead.item = RowKey(key);
  dead.update =
      terminal
          ? "SET #st = :dead, last_error = :err, updated_at = :now_ms, attempts = :max, "
            "dead_letter_open = :true REMOVE lease_expires_at"
          : "SET #st = :dead, last_error = :err, updated_at = :now_ms, dead_letter_open = :true "
            "REMOVE lease_expires_at";
  dead.condition = "#tok = :mine AND #st = :pending";
  dead.args.names = {{"#st", "status"}, {"#tok", "token"}};
  dead.args.values = {{":dead", S("DEAD")},
                      {":pending", S("PENDING")},
                      {":err", S(error.substr(0, 4096))},
                      {":mine", N(token)},
                      {":now_ms", N(absl::ToUnixMillis(now))},
                      {":true", Value::Bool(true)}};
  if (terminal) dead.args.values[":max"] = N(max_attempts);
  req.items.push_back(std::move(dead));
  auto current = Get(key);
  if (!current.ok()) return current.status();
  int attempts = terminal ? max_attempts : (*current ? (*current)->attempts : 0);
  Item row = DeadLetterKey(key);
  row["event_id"] = S(key.event_id);
  row["subscription"] = S(key.subscription);
  row["tenant"] = S(key.tenant);
  row["envelope"] = Value::M(envelope_item);
  row["error"] = S(error.substr(0, 4096));
  row["attempts"] = N(attempts);
  row["terminal"] = Value::Bool(terminal);
  row["dead_at"] = N(absl::ToUnixMillis(now));
  row["state"] = S("DEAD");
  if (!queue.empty()) row["queue"] = S(queue);
  req.items.push_back(TransactWriteItem::Put(options_.dead_letters_table, std::move(row)));
  absl::Status s = store_->TransactWriteItems(req);
  if (!s.ok() && DdbErrorName(s) == ddb_error::kTransactionCanceled) {
    auto reasons = CancellationReasons(s);
    if (!reasons.empty() && reasons[0].code == "ConditionalCheckFailed") {
      return absl::FailedPreconditionError(fmt::format(
          "lease lost: inbox row {} no longer holds token {}", key.idempotency_key(), token));
    }
  }
  return s;
}

absl::StatusOr<std::optional<InboxRow>> Inbox::Get(const InboxKey& key) {
  GetRequest g;
  g.table = options_.table;
  g.key = RowKey(key);
  g.consistent_read = true;
  auto r = store_->GetItem(g);
  if (!r.ok()) return r.status();
  if (!*r) return std::optional<InboxRow>();
  return std::optional<InboxRow>(RowFromItem(**r));
}

}  // namespace outbox
