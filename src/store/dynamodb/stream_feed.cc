#include "store/dynamodb/stream_feed.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <set>

#include "ddbapi/ddbapi.h"
#include "fmt/format.h"
#include "outbox/ddb_json.h"
#include "outbox/errors.h"
#include "spdlog/spdlog.h"

namespace outbox {
namespace {

using nlohmann::json;

constexpr std::string_view kStreamsPrefix = "DynamoDBStreams_20120810";

std::string_view StripZeros(std::string_view s) {
  size_t i = 0;
  while (i + 1 < s.size() && s[i] == '0') ++i;
  return s.substr(i);
}

absl::Status Malformed(std::string_view field, std::string_view why) {
  return absl::InvalidArgumentError(fmt::format("stream record: {} {}", field, why));
}

absl::StatusOr<Item> ImageField(const json& d, const char* name) {
  auto it = d.find(name);
  if (it == d.end() || !it->is_object())
    return Malformed(fmt::format("dynamodb.{}", name), "is not a map");
  auto item = ddbjson::DecodeItem(*it);
  if (!item.ok())
    return Malformed(fmt::format("dynamodb.{}", name), std::string(item.status().message()));
  return item;
}

}  // namespace

int CompareSequenceNumbers(std::string_view a, std::string_view b) {
  a = StripZeros(a);
  b = StripZeros(b);
  if (a.size() != b.size()) return a.size() < b.size() ? -1 : 1;
  int c = a.compare(b);
  return c < 0 ? -1 : (c > 0 ? 1 : 0);
}

absl::StatusOr<ChangeRecord> ChangeRecordFromStreamJson(const json& rec) {
  if (!rec.is_object()) return Malformed("record", "is not an object");
  ChangeRecord r;
  std::string name = rec.value("eventName", "");
  if (name == "INSERT") {
    r.type = ChangeType::kInsert;
  } else if (name == "MODIFY") {
    r.type = ChangeType::kModify;
  } else if (name == "REMOVE") {
    r.type = ChangeType::kRemove;
  } else {
    return Malformed("eventName", fmt::format("must be INSERT, MODIFY or REMOVE, got '{}'", name));
  }
  auto dit = rec.find("dynamodb");
  if (dit == rec.end() || !dit->is_object()) return Malformed("dynamodb", "is missing");
  const json& d = *dit;
  auto seq = d.find("SequenceNumber");
  if (seq == d.end() || !seq->is_string() || seq->get<std::string>().empty() ||
      seq->get<std::string>().size() > 40 ||
      !std::all_of(seq->get_ref<const std::string&>().begin(),
                   seq->get_ref<const std::string&>().end(),
                   [](char c) { return c >= '0' && c <= '9'; })) {
    return Malformed("dynamodb.SequenceNumber", "must be a string of 1-40 decimal digits");
  }
  r.sequence_number = seq->get<std::string>();
  auto keys = ImageField(d, "Keys");
  if (!keys.ok()) return keys.status();
  r.keys = *std::move(keys);
  if (d.contains("NewImage")) {
    auto img = ImageField(d, "NewImage");
    if (!img.ok()) return img.status();
    r.new_image = *std::move(img);
  }
  if (d.contains("OldImage")) {
    auto img = ImageField(d, "OldImage");
    if (!img.ok()) return img.status();
    r.old_image = *std::move(img);
  }
  if (auto t = d.find("ApproximateCreationDateTime"); t != d.end()) {
    if (!t->is_number())
      return Malformed("dynamodb.ApproximateCreationDateTime", "is not a number");
    if (t->is_number_integer()) {
      r.creation_time_ms = t->get<int64_t>() * 1000;
    } else {
      r.creation_time_ms = static_cast<int64_t>(std::floor(t->get<double>() * 1000.0 + 1e-6));
    }
  }
  if (auto u = rec.find("userIdentity"); u != rec.end() && u->is_object()) {
    r.ttl_delete = r.type == ChangeType::kRemove && u->value("type", "") == "Service" &&
                   u->value("principalId", "") == "dynamodb.amazonaws.com";
  }
  return r;
}

absl::StatusOr<std::unique_ptr<StreamFeed>> StreamFeed::Create(const aws::JsonClientOptions& ddb,
                                                               StreamFeedOptions options,
                                                               std::string streams_endpoint) {
  if (options.poll_min <= absl::ZeroDuration() || options.poll_max < options.poll_min) {
    return absl::InvalidArgumentError(
        "StreamFeedOptions.poll_min must be > 0 and poll_max >= poll_min");
  }
  if (options.max_cached_iterators < 1) {
    return absl::InvalidArgumentError("StreamFeedOptions.max_cached_iterators must be >= 1");
  }
  if (options.empty_pages_per_read < 0 || options.empty_pages_per_read > 100) {
    return absl::InvalidArgumentError("StreamFeedOptions.empty_pages_per_read must be 0..100");
  }
  auto d = aws::JsonClient::Create(ddb);
  if (!d.ok()) return d.status();
  aws::JsonClientOptions so = ddb;
  so.target_prefix = std::string(kStreamsPrefix);
  if (!streams_endpoint.empty()) {
    so.endpoint = streams_endpoint;
  } else if (auto p = so.endpoint.find("//dynamodb."); p != std::string::npos) {
    so.endpoint.replace(p, 11, "//streams.dynamodb.");
  }
  auto s = aws::JsonClient::Create(so);
  if (!s.ok()) return s.status();
  return std::unique_ptr<StreamFeed>(
      new StreamFeed(*std::move(d), *std::move(s), std::move(options)));
}

StreamFeed::StreamFeed(std::unique_ptr<aws::JsonClient> ddb,
                       std::unique_ptr<aws::JsonClient> streams, StreamFeedOptions options)
    : ddb_(std::move(ddb)),
      streams_(std::move(streams)),
      options_(std::move(options)),
      clock_(options_.clock ? options_.clock : Clock::Real()) {
  if (!options_.sleeper) options_.sleeper = [](absl::Duration d) { absl::SleepFor(d); };
}

absl::StatusOr<std::string> StreamFeed::StreamArn(std::string_view table, bool refresh) {
  absl::Time now = clock_->Now();
  {
    util::MutexLock l(mu_);
    auto it = arns_.find(std::string(table));
    if (!refresh && it != arns_.end() && now - it->second.second < options_.arn_cache_ttl) {
      return it->second.first;
    }
  }
  auto r = ddb_->Call("DescribeTable", ddbapi::TableNameJson(table));
  if (!r.ok()) return r.status();
  const json& t = (*r)["Table"];
  bool enabled =
      t.contains("StreamSpecification") && t["StreamSpecification"].value("StreamEnabled", false);
  if (!enabled || !t.contains("LatestStreamArn") || !t["LatestStreamArn"].is_string()) {
    return ValidationError(
        fmt::format("Table {} has no change feed (StreamSpecification disabled)", table));
  }
  std::string arn = t["LatestStreamArn"].get<std::string>();
  util::MutexLock l(mu_);
  arns_[std::string(table)] = {arn, now};
  return arn;
}

absl::StatusOr<std::vector<StreamFeed::ShardInfo>> StreamFeed::DescribeShards(
    std::string_view table) {
  std::vector<ShardInfo> all;
  for (int attempt = 0; attempt < 2; ++attempt) {
    auto arn = StreamArn(table, attempt > 0);
    if (!arn.ok()) return arn.status();
    all.clear();
    json body = {{"StreamArn", *arn}};
    absl::Status failed;
    while (true) {
      metrics_.describe_stream++;
      auto r = streams_->Call("DescribeStream", body);
      if (!r.ok()) {
        failed = r.status();
        break;
      }
      const json& sd = (*r)["StreamDescription"];
      for (const auto& sj : sd.value("Shards", json::array())) {
        ShardInfo si;
        si.shard.id = sj.value("ShardId", "");
        if (sj.contains("ParentShardId") && sj["ParentShardId"].is_string()) {
          si.shard.parent_id = sj["ParentShardId"].get<std::string>();
        }
        const json range = sj.value("SequenceNumberRange", json::object());
        si.start_seq = range.value("StartingSequenceNumber", "");
        si.end_seq = range.value("EndingSequenceNumber", "");
        si.shard.closed = !si.end_seq.empty();
        if (!si.shard.id.empty()) all.push_back(std::move(si));
      }
      if (!sd.contains("LastEvaluatedShardId") || !sd["LastEvaluatedShardId"].is_string()) break;
      body["ExclusiveStartShardId"] = sd["LastEvaluatedShardId"];
    }
    if (failed.ok()) break;
    // The stream was replaced (disabled and re-enabled): ask the table again.
    if (attempt == 0 && DdbErrorName(failed) == ddb_error::kResourceNotFound) continue;
    return failed;
  }
  // Lineage order: parents before children; a parent that is not listed
  // (trimmed after 24 h) counts as finished. Stable otherwise.
  std::set<std::string> ids;
  for (const auto& s : all) ids.insert(s.shard.id);
  std::map<std::string, std::vector<size_t>> children;
  std::deque<size_t> ready;
  for (size_t i = 0; i < all.size(); ++i) {
    const auto& p = all[i].shard.parent_id;
    if (p && ids.count(*p) && *p != all[i].shard.id) {
      children[*p].push_back(i);
    } else {
      ready.push_back(i);
    }
  }
  std::vector<ShardInfo> ordered;
  std::vector<bool> done(all.size(), false);
  while (!ready.empty()) {
    size_t i = ready.front();
    ready.pop_front();
    if (done[i]) continue;
    done[i] = true;
    ordered.push_back(all[i]);
    for (size_t c : children[all[i].shard.id]) ready.push_back(c);
  }
  for (size_t i = 0; i < all.size(); ++i) {
    if (!done[i]) ordered.push_back(all[i]);  // a cycle (never from AWS): keep it visible
  }
  return ordered;
}

absl::StatusOr<std::vector<Shard>> StreamFeed::ListShards(std::string_view table) {
  auto infos = DescribeShards(table);
  if (!infos.ok()) return infos.status();
  std::vector<Shard> out;
  out.reserve(infos->size());
  for (auto& i : *infos) out.push_back(std::move(i.shard));
  return out;
}

std::optional<StreamFeed::CachedIterator> StreamFeed::TakeCached(const CacheKey& key) {
  util::MutexLock l(mu_);
  auto it = iterators_.find(key);
  if (it == iterators_.end()) return std::nullopt;
  CachedIterator c = std::move(it->second);
  iterators_.erase(it);
  return c;
}

void StreamFeed::PutCached(const CacheKey& key, std::string iterator, absl::Time obtained) {
  util::MutexLock l(mu_);
  if (static_cast<int>(iterators_.size()) >= options_.max_cached_iterators &&
      !iterators_.count(key)) {
    auto oldest = iterators_.begin();
    for (auto it = iterators_.begin(); it != iterators_.end(); ++it) {
      if (it->second.obtained < oldest->second.obtained) oldest = it;
    }
    iterators_.erase(oldest);
  }
  iterators_[key] = CachedIterator{std::move(iterator), obtained};
}

absl::StatusOr<std::string> StreamFeed::Iterator(const std::string& arn, const CacheKey& key) {
  absl::Time now = clock_->Now();
  if (auto c = TakeCached(key); c && now - c->obtained < options_.iterator_max_age) {
    metrics_.iterator_cache_hits++;
    PutCached(key, c->iterator, c->obtained);  // stays until a GetRecords answer replaces it
    return c->iterator;
  }
  const auto& [table, shard, position] = key;
  json body = {{"StreamArn", arn}, {"ShardId", shard}};
  if (position.empty()) {
    body["ShardIteratorType"] = "TRIM_HORIZON";
  } else {
    body["ShardIteratorType"] = "AFTER_SEQUENCE_NUMBER";
    body["SequenceNumber"] = position;
  }
  metrics_.get_shard_iterator++;
  auto r = streams_->Call("GetShardIterator", body);
  if (!r.ok()) return r.status();
  if (!r->contains("ShardIterator") || !(*r)["ShardIterator"].is_string()) {
    return absl::InternalError(
        fmt::format("GetShardIterator for shard {} returned no ShardIterator", shard));
  }
  std::string it = (*r)["ShardIterator"].get<std::string>();
  PutCached(key, it, now);
  return it;
}

absl::StatusOr<ChangeBatch> StreamFeed::Read(std::string_view table, std::string_view shard_id,
                                             std::string_view after_sequence, int limit) {
  if (limit < 1 || limit > 1000) {
    return ValidationError(fmt::format("Limit: must be between 1 and 1000, got {}", limit));
  }
  if (!after_sequence.empty() &&
      (after_sequence.size() > 40 || !std::all_of(after_sequence.begin(), after_sequence.end(),
                                                  [](char c) { return c >= '0' && c <= '9'; }))) {
    return ValidationError(fmt::format("Invalid SequenceNumber: {}", after_sequence));
  }
  auto arn = StreamArn(table, false);
  if (!arn.ok()) return arn.status();
  CacheKey key{std::string(table), std::string(shard_id), std::string(after_sequence)};
  ChangeBatch batch;
  bool re_got = false;
  for (int page = 0; page <= options_.empty_pages_per_read;) {
    auto it = Iterator(*arn, key);
    if (!it.ok()) return it.status();
    metrics_.get_records++;
    auto r = streams_->Call("GetRecords", json{{"ShardIterator", *it}, {"Limit", limit}});
    if (!r.ok()) {
      TakeCached(key);
      if (DdbErrorName(r.status()) == "ExpiredIteratorException" && !re_got) {
        metrics_.expired_iterators++;
        re_got = true;
        continue;  // Iterator() gets a fresh one from the same position
      }
      return r.status();
    }
    for (const auto& rj : r->value("Records", json::array())) {
      auto rec = ChangeRecordFromStreamJson(rj);
      if (!rec.ok()) {
        return absl::DataLossError(fmt::format("table {} shard {}: {}", table, shard_id,
                                               std::string(rec.status().message())));
      }
      if (!after_sequence.empty() &&
          CompareSequenceNumbers(rec->sequence_number, after_sequence) <= 0) {
        continue;
      }
      rec->table = std::string(table);
      rec->shard_id = std::string(shard_id);
      batch.records.push_back(*std::move(rec));
    }
    bool has_next = r->contains("NextShardIterator") && (*r)["NextShardIterator"].is_string();
    batch.shard_end = !has_next;
    TakeCached(key);
    if (!batch.records.empty()) {
      if (has_next) {
        PutCached({std::get<0>(key), std::get<1>(key), batch.records.back().sequence_number},
                  (*r)["NextShardIterator"].get<std::string>(), clock_->Now());
      }
      return batch;
    }
    if (!has_next) return batch;
    PutCached(key, (*r)["NextShardIterator"].get<std::string>(), clock_->Now());
    ++page;
  }
  return batch;
}

bool StreamFeed::WaitForChanges(std::string_view table, std::string_view after_sequence,
                                absl::Duration timeout) {
  absl::Time deadline = clock_->Now() + timeout;
  absl::Duration delay = options_.poll_min;
  std::vector<ShardInfo> shards;
  for (int poll = 0;; ++poll) {
    if (shards.empty() || poll % 10 == 0) {
      auto s = DescribeShards(table);
      if (s.ok()) {
        shards = *std::move(s);
      } else {
        spdlog::debug("WaitForChanges({}): {}", table, s.status().ToString());
      }
    }
    for (const auto& sh : shards) {
      std::string pos;
      if (!after_sequence.empty()) {
        if (!sh.end_seq.empty() && CompareSequenceNumbers(sh.end_seq, after_sequence) <= 0)
          continue;
        if (sh.start_seq.empty() || CompareSequenceNumbers(sh.start_seq, after_sequence) <= 0) {
          pos = std::string(after_sequence);
        }
      }
      auto b = Read(table, sh.shard.id, pos, 1);
      if (b.ok() && !b->records.empty()) return true;
      if (!b.ok()) spdlog::debug("WaitForChanges({}): {}", table, b.status().ToString());
    }
    absl::Duration left = deadline - clock_->Now();
    if (left <= absl::ZeroDuration()) return false;
    options_.sleeper(std::min(delay, left));
    delay = std::min(delay * 2, options_.poll_max);
  }
}

}  // namespace outbox
