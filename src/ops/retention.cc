// Retention and archives (include/outbox/ops.h, docs/OPERATIONS.md
// "Retention"): removing a settled, old prefix of a tenant's log behind a
// chain anchor, exporting a range as JSON Lines, re-verifying such a file.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>

#include "fmt/format.h"
#include "model/retention_row.h"
#include "ops/ops_impl.h"
#include "outbox/ddb_json.h"
#include "outbox/envelope_codec.h"
#include "outbox/errors.h"
#include "outbox/subscription.h"

namespace outbox::ops {

namespace {

constexpr int kReadPage = 500;
constexpr size_t kDeleteChunk = 50;  // DynamoDB allows 100 actions per transaction

struct RetentionRow : retention_row::Row {
  bool exists = false;
};

absl::StatusOr<RetentionRow> ReadRetentionRow(Store* store, const std::string& table,
                                              const std::string& tenant) {
  GetRequest g;
  g.table = table;
  g.key = Item{{"pk", Value::S(HeadPk(tenant))}, {"sk", Value::S(kRetentionSortKey)}};
  g.consistent_read = true;
  auto r = store->GetItem(g);
  if (!r.ok()) return r.status();
  RetentionRow row;
  if (!r->has_value()) return row;
  auto decoded = retention_row::Decode(**r, tenant);
  if (!decoded.ok()) return decoded.status();
  static_cast<retention_row::Row&>(row) = *std::move(decoded);
  row.exists = true;
  return row;
}

// Writes `next` over `prev` only if nobody moved the row since it was read.
absl::Status WriteRetentionRow(Store* store, const std::string& table, const std::string& tenant,
                               const RetentionRow& prev, const RetentionRow& next, int64_t now_ms) {
  PutRequest p;
  p.table = table;
  p.item = Item{{"pk", Value::S(HeadPk(tenant))},
                {"sk", Value::S(kRetentionSortKey)},
                {"anchor_seq", Value::N(next.anchor_seq)},
                {"anchor_hash", Value::S(next.anchor_hash)},
                {"settled_seq", Value::N(next.settled_seq)},
                {"removed_total", Value::N(next.removed_total)},
                {"updated_at_ms", Value::N(now_ms)}};
  if (prev.exists) {
    p.condition = "anchor_seq = :a AND settled_seq = :s";
    p.args.values = {{":a", Value::N(prev.anchor_seq)}, {":s", Value::N(prev.settled_seq)}};
  } else {
    p.condition = "attribute_not_exists(pk)";
  }
  auto r = store->PutItem(p);
  if (!r.ok() && DdbErrorName(r.status()) == ddb_error::kConditionalCheckFailed) {
    return absl::AbortedError(fmt::format(
        "retention of tenant {}: another retention run moved the anchor meanwhile; run again",
        tenant));
  }
  return r.status();
}

// Writes `lines` to path.tmp, fsyncs it, renames it over `path` and fsyncs
// the folder: the file is complete or absent.
absl::Status WriteDurably(const std::string& path, const std::vector<std::string>& lines) {
  namespace fs = std::filesystem;
  const fs::path target(path);
  const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  std::error_code ec;
  fs::create_directories(dir, ec);
  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    return absl::UnavailableError(
        fmt::format("archive: cannot create {}: {}", tmp, strerror(errno)));
  }
  auto fail = [&](const char* what) {
    const int err = errno;
    ::close(fd);
    ::unlink(tmp.c_str());
    return absl::UnavailableError(fmt::format("archive: {} {}: {}", what, tmp, strerror(err)));
  };
  std::string buf;
  for (const std::string& l : lines) {
    buf += l;
    buf += '\n';
    if (buf.size() < (1 << 20)) continue;
    if (::write(fd, buf.data(), buf.size()) != static_cast<ssize_t>(buf.size()))
      return fail("cannot write");
    buf.clear();
  }
  if (!buf.empty() && ::write(fd, buf.data(), buf.size()) != static_cast<ssize_t>(buf.size()))
    return fail("cannot write");
  if (::fsync(fd) != 0) return fail("cannot fsync");
  ::close(fd);
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    return absl::UnavailableError(
        fmt::format("archive: cannot rename {} to {}: {}", tmp, path, strerror(err)));
  }
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    (void)::fsync(dfd);
    ::close(dfd);
  }
  return absl::OkStatus();
}

std::vector<std::string> ArchiveLines(const std::string& tenant, const std::vector<Envelope>& evs,
                                      absl::Time now) {
  std::vector<std::string> lines;
  lines.reserve(evs.size() + 1);
  nlohmann::json header = {{"outbox_archive", 1},          {"tenant", tenant},
                           {"from_seq", evs.front().seq},  {"to_seq", evs.back().seq},
                           {"events", evs.size()},         {"prev_hash", evs.front().prev_hash},
                           {"last_hash", evs.back().hash}, {"created_at", TimeText(now)}};
  lines.push_back(header.dump());
  for (const Envelope& e : evs) lines.push_back(ddbjson::Encode(EnvelopeToItem(e)).dump());
  return lines;
}

}  // namespace

absl::Status RetentionOptions::Validate() const {
  if (keep < absl::ZeroDuration())
    return absl::InvalidArgumentError(
        fmt::format("keep: must be >= 0, got {}", absl::FormatDuration(keep)));
  for (const std::string& t : tenants) {
    if (auto s = ValidateTenant(t); !s.ok())
      return absl::InvalidArgumentError(fmt::format("tenants: {}", std::string(s.message())));
  }
  if (max_events < 0)
    return absl::InvalidArgumentError(fmt::format("max_events: must be >= 0, got {}", max_events));
  return absl::OkStatus();
}

nlohmann::json RetentionTenantResult::ToJson() const {
  nlohmann::json j = {{"tenant", tenant},
                      {"removed", removed},
                      {"anchor_seq", anchor_seq},
                      {"settled_seq", settled_seq},
                      {"last_seq", last_seq},
                      {"kept_from", kept_from},
                      {"kept_because", kept_because}};
  if (!archive.empty()) j["archive"] = archive;
  return j;
}

nlohmann::json RetentionResult::ToJson() const {
  nlohmann::json arr = nlohmann::json::array();
  for (const auto& t : tenants) arr.push_back(t.ToJson());
  return {{"dry_run", dry_run}, {"removed", removed}, {"tenants", arr}};
}

absl::Status ArchiveRequest::Validate() const {
  if (auto s = ValidateTenant(tenant); !s.ok())
    return absl::InvalidArgumentError(fmt::format("tenant: {}", std::string(s.message())));
  if (from_seq < 0)
    return absl::InvalidArgumentError(fmt::format("from_seq: must be >= 0, got {}", from_seq));
  if (to_seq < 0)
    return absl::InvalidArgumentError(fmt::format("to_seq: must be >= 0, got {}", to_seq));
  if (to_seq > 0 && from_seq > to_seq)
    return absl::InvalidArgumentError(
        fmt::format("from_seq: must be <= to_seq ({}), got {}", to_seq, from_seq));
  if (path.empty()) return absl::InvalidArgumentError("path: required");
  return absl::OkStatus();
}

nlohmann::json ArchiveResult::ToJson() const {
  return {{"tenant", tenant}, {"path", path},           {"from_seq", from_seq},  {"to_seq", to_seq},
          {"events", events}, {"prev_hash", prev_hash}, {"last_hash", last_hash}};
}

nlohmann::json ArchiveVerifyResult::ToJson() const {
  nlohmann::json j = archive.ToJson();
  j["intact"] = intact;
  if (!intact) {
    j["first_broken_seq"] = first_broken_seq;
    j["line"] = line;
    j["detail"] = detail;
  }
  return j;
}

absl::StatusOr<RetentionResult> Ops::ApplyRetention(const RetentionOptions& o, Progress progress) {
  if (auto s = o.Validate(); !s.ok()) return s;
  Impl& d = *impl_;
  if (d.router == nullptr) {
    return absl::FailedPreconditionError(
        "retention needs the subscriptions (the config's [[subscriptions]]): an event is removed "
        "only once every DURABLE subscription it matches has completed or dead-lettered it");
  }
  std::vector<std::string> tenants = o.tenants;
  if (tenants.empty()) {
    auto t = d.engine->ListTenants();
    if (!t.ok()) return t.status();
    tenants = *std::move(t);
  }
  const std::string& table = d.eo().events_table;
  const absl::Time now = d.clock->Now();
  const int64_t cutoff_ms = o.keep == absl::InfiniteDuration() ? std::numeric_limits<int64_t>::min()
                                                               : absl::ToUnixMillis(now - o.keep);
  // Why `e` is not settled yet ("" when every matching DURABLE subscription's
  // inbox row is COMPLETED or DEAD).
  auto unsettled_reason = [&d](const Envelope& e) -> absl::StatusOr<std::string> {
    for (const Subscription* sub : d.router->Match(e, Lane::kDurable)) {
      auto row = d.inbox.Get(InboxKey{e.id, sub->name, e.tenant});
      if (!row.ok()) return row.status();
      if (!row->has_value()) {
        return fmt::format(
            "event {} ({}): subscription {} has no inbox row (not run yet, or its row expired by "
            "TTL before a retention run saw it settle)",
            e.seq, e.id, sub->name);
      }
      const InboxStatus st = (*row)->status;
      if (st != InboxStatus::kCompleted && st != InboxStatus::kDead) {
        return fmt::format("event {} ({}): subscription {} is {}", e.seq, e.id, sub->name,
                           InboxStatusName(st));
      }
    }
    return std::string();
  };
  RetentionResult out;
  out.dry_run = o.dry_run;
  int64_t done = 0;
  for (const std::string& tenant : tenants) {
    RetentionTenantResult tr;
    tr.tenant = tenant;
    auto head = d.engine->ReadHead(tenant);
    if (!head.ok()) return head.status();
    tr.last_seq = head->last_seq;
    auto row = ReadRetentionRow(d.store, table, tenant);
    if (!row.ok()) return row.status();
    RetentionRow next = *row;

    // 1. Advance the settled watermark over the events after it, and collect
    //    the removable prefix after the anchor: old enough, settled, and
    //    chained to the anchor (retention never removes what does not verify).
    std::vector<Envelope> removable;
    bool removal_open = true;
    std::string chain = row->anchor_hash;
    int64_t from = row->anchor_seq + 1;
    bool stop = false;
    while (!stop && from <= head->last_seq) {
      auto page = d.engine->ReadLog(tenant, from, kReadPage);
      if (!page.ok()) return page.status();
      if (page->empty()) break;
      for (Envelope& e : *page) {
        from = e.seq + 1;
        std::string unsettled;
        if (e.seq > next.settled_seq) {
          auto why = unsettled_reason(e);
          if (!why.ok()) return why.status();
          unsettled = *std::move(why);
          if (unsettled.empty()) next.settled_seq = e.seq;
        }
        if (removal_open) {
          std::string why = unsettled;
          if (why.empty() && e.occurred_at_ms > cutoff_ms) {
            why = o.keep == absl::InfiniteDuration()
                      ? "no retention window (events are kept forever)"
                      : fmt::format("event {} is younger than the retention window", e.seq);
          } else if (why.empty() && o.max_events > 0 &&
                     static_cast<int64_t>(removable.size()) >= o.max_events) {
            why = fmt::format("max_events {} reached in this run", o.max_events);
          }
          if (why.empty()) {
            const int64_t want = removable.empty() ? row->anchor_seq + 1 : removable.back().seq + 1;
            if (e.seq != want || e.prev_hash != chain || ComputeEventHash(e) != e.hash) {
              return absl::DataLossError(fmt::format(
                  "retention of tenant {}: the chain does not verify at event {}; nothing is "
                  "removed (run verify-chain)",
                  tenant, e.seq));
            }
            chain = e.hash;
            removable.push_back(std::move(e));
          } else {
            removal_open = false;
            tr.kept_from = e.seq;
            tr.kept_because = std::move(why);
          }
        }
        if (!unsettled.empty()) {
          stop = true;
          break;
        }
      }
      // Removal closed: skip to the events the watermark has not judged yet.
      if (!removal_open) from = std::max(from, next.settled_seq + 1);
    }
    tr.settled_seq = next.settled_seq;
    tr.anchor_seq = row->anchor_seq;
    if (o.dry_run) {
      tr.removed = static_cast<int64_t>(removable.size());
      out.removed += tr.removed;
      out.tenants.push_back(std::move(tr));
      if (progress) progress(++done, static_cast<int64_t>(tenants.size()));
      continue;
    }

    // 2. The archive, before anything is removed.
    if (!removable.empty() && !o.archive_dir.empty()) {
      const std::string path = (std::filesystem::path(o.archive_dir) /
                                fmt::format("{}.{:020d}-{:020d}.jsonl", tenant,
                                            removable.front().seq, removable.back().seq))
                                   .string();
      if (auto s = WriteDurably(path, ArchiveLines(tenant, removable, now)); !s.ok()) return s;
      tr.archive = path;
    }
    // 3. The anchor (and the watermark) in one conditional write.
    if (!removable.empty()) {
      next.anchor_seq = removable.back().seq;
      next.anchor_hash = removable.back().hash;
      next.removed_total += static_cast<int64_t>(removable.size());
    }
    if (next.settled_seq != row->settled_seq || next.anchor_seq != row->anchor_seq) {
      if (auto s = WriteRetentionRow(d.store, table, tenant, *row, next, absl::ToUnixMillis(now));
          !s.ok()) {
        return s;
      }
    }
    tr.anchor_seq = next.anchor_seq;
    // 4. The rows at or below the anchor: this run's, and any a cut-off run left.
    if (next.anchor_seq > 0) {
      QueryRequest q;
      q.table = table;
      q.key_condition = "pk = :p AND sk <= :a";
      q.args.values = {{":p", Value::S(EventPk(tenant))},
                       {":a", Value::S(SeqSortKey(next.anchor_seq))}};
      q.consistent_read = true;
      q.limit = kReadPage;
      while (true) {
        auto r = d.store->Query(q);
        if (!r.ok()) return r.status();
        for (size_t i = 0; i < r->items.size(); i += kDeleteChunk) {
          TransactWriteRequest t;
          for (size_t k = i; k < std::min(r->items.size(), i + kDeleteChunk); ++k) {
            TransactWriteItem w;
            w.kind = TransactWriteItem::Kind::kDelete;
            w.table = table;
            w.item = Item{{"pk", r->items[k].at("pk")}, {"sk", r->items[k].at("sk")}};
            t.items.push_back(std::move(w));
          }
          if (auto s = d.store->TransactWriteItems(t); !s.ok()) return s;
          tr.removed += static_cast<int64_t>(t.items.size());
        }
        if (!r->last_evaluated_key) break;
        q.exclusive_start_key = r->last_evaluated_key;
      }
    }
    out.removed += tr.removed;
    out.tenants.push_back(std::move(tr));
    if (progress) progress(++done, static_cast<int64_t>(tenants.size()));
  }
  return out;
}

absl::StatusOr<ArchiveResult> Ops::Archive(const ArchiveRequest& r) {
  if (auto s = r.Validate(); !s.ok()) return s;
  Impl& d = *impl_;
  auto head = d.engine->ReadHead(r.tenant);
  if (!head.ok()) return head.status();
  auto row = ReadRetentionRow(d.store, d.eo().events_table, r.tenant);
  if (!row.ok()) return row.status();
  const int64_t first = row->anchor_seq + 1;
  const int64_t from = r.from_seq == 0 ? first : r.from_seq;
  const int64_t to = r.to_seq == 0 ? head->last_seq : r.to_seq;
  if (head->last_seq == 0) {
    return absl::NotFoundError(fmt::format("tenant {} has no events", r.tenant));
  }
  if (from < first) {
    return absl::OutOfRangeError(
        fmt::format("from_seq: events 1..{} of tenant {} were removed by retention; the log starts "
                    "at {}",
                    row->anchor_seq, r.tenant, first));
  }
  if (to > head->last_seq || from > to) {
    return absl::OutOfRangeError(
        fmt::format("to_seq: the range {}..{} is outside the log of tenant {} ({}..{})", from, to,
                    r.tenant, first, head->last_seq));
  }
  std::vector<Envelope> evs;
  for (int64_t at = from; at <= to;) {
    auto page = d.engine->ReadLog(r.tenant, at, std::min<int64_t>(kReadPage, to - at + 1));
    if (!page.ok()) return page.status();
    if (page->empty()) break;
    for (Envelope& e : *page) {
      if (e.seq != at) {
        return absl::DataLossError(
            fmt::format("tenant {}: event {} is missing from the log (found {}); run verify-chain",
                        r.tenant, at, e.seq));
      }
      ++at;
      evs.push_back(std::move(e));
    }
  }
  if (static_cast<int64_t>(evs.size()) != to - from + 1) {
    return absl::DataLossError(fmt::format("tenant {}: the log ends before {}", r.tenant, to));
  }
  if (auto s = WriteDurably(r.path, ArchiveLines(r.tenant, evs, d.clock->Now())); !s.ok()) return s;
  ArchiveResult a;
  a.tenant = r.tenant;
  a.path = r.path;
  a.from_seq = from;
  a.to_seq = to;
  a.events = static_cast<int64_t>(evs.size());
  a.prev_hash = evs.front().prev_hash;
  a.last_hash = evs.back().hash;
  return a;
}

absl::StatusOr<ArchiveVerifyResult> VerifyArchive(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    return std::filesystem::exists(path)
               ? absl::UnavailableError(fmt::format("{}: cannot be read", path))
               : absl::NotFoundError(fmt::format("{}: no such file", path));
  }
  ArchiveVerifyResult v;
  v.archive.path = path;
  auto broken = [&](int64_t line, int64_t seq, std::string why) {
    v.intact = false;
    v.line = line;
    v.first_broken_seq = seq;
    v.detail = std::move(why);
    return v;
  };
  std::string text;
  if (!std::getline(in, text)) return broken(1, 0, "the file is empty (no header line)");
  nlohmann::json h = nlohmann::json::parse(text, nullptr, false);
  if (!h.is_object() || h.value("outbox_archive", 0) != 1) {
    return broken(1, 0, "line 1 is not an outbox archive header ({\"outbox_archive\":1,...})");
  }
  try {
    v.archive.tenant = h.at("tenant").get<std::string>();
    v.archive.from_seq = h.at("from_seq").get<int64_t>();
    v.archive.to_seq = h.at("to_seq").get<int64_t>();
    v.archive.prev_hash = h.at("prev_hash").get<std::string>();
    v.archive.last_hash = h.at("last_hash").get<std::string>();
  } catch (const nlohmann::json::exception& e) {
    return broken(1, 0, fmt::format("header: {}", e.what()));
  }
  const int64_t declared = h.value("events", int64_t{-1});
  std::string prev = v.archive.prev_hash;
  int64_t expected = v.archive.from_seq;
  int64_t line = 1;
  while (std::getline(in, text)) {
    ++line;
    if (text.empty()) continue;
    nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
    auto item = j.is_discarded() ? absl::InvalidArgumentError("not JSON") : ddbjson::DecodeItem(j);
    if (!item.ok()) {
      return broken(
          line, expected,
          fmt::format("line {}: not an event row: {}", line, std::string(item.status().message())));
    }
    auto e = EnvelopeFromItem(*item);
    if (!e.ok()) {
      return broken(
          line, expected,
          fmt::format("line {}: not an event: {}", line, std::string(e.status().message())));
    }
    if (e->tenant != v.archive.tenant) {
      return broken(line, e->seq,
                    fmt::format("line {}: event of tenant {} in an archive of tenant {}", line,
                                e->tenant, v.archive.tenant));
    }
    if (e->seq != expected) {
      return broken(
          line, expected,
          fmt::format("line {}: event {} where event {} belongs", line, e->seq, expected));
    }
    if (e->prev_hash != prev) {
      return broken(
          line, e->seq,
          fmt::format("line {}: prev_hash of event {} does not match the hash of {}", line, e->seq,
                      e->seq == v.archive.from_seq ? "the header's prev_hash"
                                                   : fmt::format("event {}", e->seq - 1)));
    }
    const std::string hash = ComputeEventHash(*e);
    if (hash != e->hash) {
      return broken(
          line, e->seq,
          fmt::format("line {}: event {} (id {}) does not match its hash", line, e->seq, e->id));
    }
    prev = hash;
    ++expected;
    ++v.archive.events;
  }
  if (expected - 1 != v.archive.to_seq || (declared >= 0 && declared != v.archive.events)) {
    return broken(line, expected,
                  fmt::format("the file holds events {}..{} but its header says {}..{} ({} events)",
                              v.archive.from_seq, expected - 1, v.archive.from_seq,
                              v.archive.to_seq, declared));
  }
  if (prev != v.archive.last_hash) {
    return broken(line, v.archive.to_seq,
                  "the header's last_hash does not match the hash of the last event");
  }
  return v;
}

}  // namespace outbox::ops
