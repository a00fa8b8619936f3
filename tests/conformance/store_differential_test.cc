// Differential test: the same seeded random operations (puts, conditional
// updates, deletes, transactions with failing conditions, gets, paged
// queries, and some invalid requests) go to the embedded store and to
// DynamoDB Local; every result and every error (name, cancellation reasons,
// returned old items) must be identical. The seed is printed on failure;
// rerun one with OUTBOX_DIFF_SEED=<seed>.
#include <algorithm>
#include <functional>
#include <iostream>
#include <map>
#include <random>
#include <set>

#include "conformance/store_dynamodb_harness.h"
#include "fmt/format.h"
#include "outbox/ddb_json.h"
#include "store/common/capacity.h"
#include "store/sqlite/sqlite_store.h"
#include "support/temp_dir.h"

namespace outbox::conformance {
namespace {

std::string ItemText(const std::optional<Item>& i) {
  return i ? ddbjson::Encode(*i).dump() : std::string("<none>");
}

// `t` without the messages OUTBOX_DIFF_MESSAGES added.
std::string WithoutMessages(std::string t) {
  for (size_t a; (a = t.find(" <<")) != std::string::npos;) {
    const size_t b = t.find(">>", a);
    if (b == std::string::npos) break;
    t.erase(a, b + 2 - a);
  }
  return t;
}

// A comparable description of an outcome: error name + reasons + item, or the value.
std::string ErrorText(const absl::Status& s) {
  std::string out = "ERROR " + DdbErrorName(s);
  if (DdbErrorName(s) == ddb_error::kTransactionCanceled) {
    for (const auto& r : CancellationReasons(s))
      out += " [" + r.code + " " + ItemText(r.item) + "]";
  }
  if (DdbErrorName(s) == ddb_error::kConditionalCheckFailed)
    out += " " + ItemText(ConditionFailedItem(s));
  // OUTBOX_DIFF_MESSAGES=1: the messages too (to see why; they are worded differently).
  static const bool messages = std::getenv("OUTBOX_DIFF_MESSAGES") != nullptr;
  if (messages) out += " <<" + std::string(s.message()) + ">>";
  return out;
}

template <typename T, typename F>
std::string Outcome(const absl::StatusOr<T>& r, F show) {
  return r.ok() ? show(*r) : ErrorText(r.status());
}

// When Limit stops a page exactly at the last matching item, DynamoDB (and the
// embedded store) return a LastEvaluatedKey and the next page is empty;
// DynamoDB Local looks ahead and omits the key (docs/DYNAMODB-COMPATIBILITY.md).
// Both transcripts are normalised the same way: a final empty page is dropped
// and the key that led to it cleared. Items, counts and every other key still
// have to match exactly.
std::string WithoutEmptyLastPage(std::string t) {
  const std::string empty_last = "page count=0 scanned=0 lek=<none>\n";
  if (t.size() > empty_last.size() && t.ends_with(empty_last)) {
    t.resize(t.size() - empty_last.size());
    size_t lek = t.rfind(" lek=");
    if (lek != std::string::npos) t = t.substr(0, lek) + " lek=<none>\n";
  }
  return t;
}

// What a request consumed, comparable: every figure (`exact`), or only the tables and the
// members of their totals (DynamoDB Local's figures for batch writes and transactions do not
// follow DynamoDB's documented rules, and a parallel scan's segments hold other items in each
// store; docs/DYNAMODB-COMPATIBILITY.md, "Consumed capacity").
std::string CapacityText(std::vector<ConsumedCapacity> caps, bool exact) {
  std::sort(caps.begin(), caps.end(),
            [](const ConsumedCapacity& x, const ConsumedCapacity& y) { return x.table < y.table; });
  auto one = [&](const Capacity& c) {
    std::string out = exact ? fmt::format("{}", c.units) : std::string("u");
    if (c.read_units) out += exact ? fmt::format(" r{}", *c.read_units) : " r";
    if (c.write_units) out += exact ? fmt::format(" w{}", *c.write_units) : " w";
    return out;
  };
  std::string out = "capacity";
  for (const auto& c : caps) {
    out += " [" + c.table + " " + one(c.total);
    if (exact) {
      out += " table " + one(c.table_part);
      for (const auto& [name, cap] : c.indexes) out += " " + name + " " + one(cap);
    }
    out += "]";
  }
  return out;
}

// A whole read (every page) compared without its order: items sorted, counts summed; with
// `ask`, the capacity of every page summed (its figures compared only for a read of one page:
// each page is rounded up on its own, and the two stores order a scan, a parallel scan's
// segments and equal index keys differently).
struct Unordered {
  std::vector<std::string> items;
  int64_t count = 0, scanned = 0;
  std::string error;
  bool ask = false;
  int pages = 0;  // read; over several, the stores' pages hold items in other orders
  std::vector<ConsumedCapacity> capacity;
  std::string Text() {
    if (!error.empty()) return error;
    std::sort(items.begin(), items.end());
    std::string out = "OK count=" + std::to_string(count) + " scanned=" + std::to_string(scanned);
    for (const auto& it : items) out += " " + it;
    if (ask) out += " " + CapacityText(capacity, /*exact=*/pages <= 1);
    return out;
  }
};

// Runs `read` (one Query or Scan page) from `page` on, following LastEvaluatedKey.
template <typename Request, typename Read>
void AllPages(Request page, Read read, Unordered* u) {
  std::vector<ConsumedCapacity> sink;
  if (u->ask) page.consumed_capacity = &sink;
  for (int guard = 0; guard < 100; ++guard) {
    auto r = read(page);
    if (!r.ok()) {
      u->error = ErrorText(r.status());
      return;
    }
    ++u->pages;
    for (auto& c : sink) store::AddByTable(&u->capacity, c);
    u->count += r->count;
    u->scanned += r->scanned_count;
    for (const auto& it : r->items) u->items.push_back(ddbjson::Encode(it).dump());
    if (!r->last_evaluated_key) return;
    page.exclusive_start_key = r->last_evaluated_key;
  }
}

class Differ {
 public:
  // `index`: the table has the GSI `gsi` ("by-s" on s, n) that index queries and scans use;
  // UpdateTable steps delete it and create it again (backfilled from the items there).
  Differ(uint64_t seed, bool index, GlobalSecondaryIndex gsi)
      : rng_(seed),
        capacity_rng_(seed ^ 0x9e3779b97f4a7c15ULL),
        wide_rng_(seed ^ 0x5851f42d4c957f2dULL),
        index_(index),
        gsi_(std::move(gsi)) {}

  // One request in four asks for its consumed capacity (ReturnConsumedCapacity), decided by a
  // generator of its own so that the requests of a seed stay those of earlier versions.
  bool AskCapacity() {
    const bool ask = capacity_rng_() % 4 == 0;
    if (ask) ++counts_["with ReturnConsumedCapacity"];
    return ask;
  }

  // `call(store, request)` on both stores (a first); when asked, each with its own capacity sink
  // and what it reports after a successful outcome.
  // `exact_after`, when set, decides `exact` once both calls have run.
  template <typename Request, typename Call>
  std::pair<std::string, std::string> Both(Store& a, Store& b, Request r, Call call,
                                           bool exact = true,
                                           const std::function<bool()>& exact_after = nullptr) {
    const bool ask = AskCapacity();
    std::vector<ConsumedCapacity> got[2];
    std::string out[2];
    Store* stores[2] = {&a, &b};
    for (int i = 0; i < 2; ++i) {
      if (ask) r.consumed_capacity = &got[i];
      out[i] = call(*stores[i], r);
    }
    if (ask && exact_after) exact = exact_after();
    for (int i = 0; i < 2; ++i) {
      if (ask && out[i].starts_with("OK")) out[i] += " " + CapacityText(got[i], exact);
    }
    return {out[0], out[1]};
  }

  // The item at `key` in `s` (none when absent or when the key is not valid).
  static std::optional<Item> Current(Store& s, const std::string& table, const Item& key) {
    GetRequest g;
    g.table = table;
    g.key = key;
    g.consistent_read = true;
    auto r = s.GetItem(g);
    return r.ok() ? *r : std::nullopt;
  }

  // DynamoDB Local charges the index one unit for a write that takes an item from having only
  // one of the index's two key attributes to having only the other, though neither image is in
  // the index; DynamoDB documents that an item without the whole index key is not written to it
  // (docs/DYNAMODB-COMPATIBILITY.md, "Consumed capacity"). Such a write's figures are compared
  // by shape only.
  bool LocalChargesAPartialKeySwap(const std::optional<Item>& before,
                                   const std::optional<Item>& after) const {
    if (!index_ || !before || !after) return false;
    auto partial = [&](const Item& i) {
      const bool h = i.contains(gsi_.hash_key.name);
      const bool r = gsi_.range_key && i.contains(gsi_.range_key->name);
      return h != r ? (h ? 1 : 2) : 0;  // 0: none or both
    };
    const int x = partial(*before), y = partial(*after);
    return x != 0 && y != 0 && x != y;
  }

  Value Pk() { return Value::S("p" + std::to_string(Pick(3))); }
  Value Sk() { return Value::S(std::to_string(Pick(6))); }
  Item Key() { return Item{{"pk", Pk()}, {"sk", Sk()}}; }
  int Pick(int n) { return static_cast<int>(rng_() % n); }
  bool Coin(int percent = 50) { return Pick(100) < percent; }

  // A random condition with its values (may fail, may be absent).
  void Condition(std::optional<std::string>* cond, ExpressionArgs* args) {
    switch (Pick(6)) {
      case 0:
        *cond = "attribute_not_exists(pk)";
        break;
      case 1:
        *cond = "attribute_exists(pk)";
        break;
      case 2:
        *cond = "n < :lim";
        args->values[":lim"] = Value::N(Pick(8));
        break;
      case 3:
        *cond = "attribute_not_exists(s) OR s = :sv";
        args->values[":sv"] = Value::S("v" + std::to_string(Pick(3)));
        break;
      default:
        break;  // unconditional
    }
  }

  // About a quarter of the requests are invalid on purpose, one kind of problem each: a table
  // that does not exist, a key with a missing, extra or wrong-typed attribute, an unused or a
  // missing placeholder. Both stores must give the same error (docs/DYNAMODB-COMPATIBILITY.md,
  // "Order of checks").
  enum class Spoil { kNone, kNoTable, kMissingKey, kExtraKey, kKeyType, kUnused, kUndefined };
  Spoil PickSpoil() {
    if (!Coin(25)) return Spoil::kNone;
    return static_cast<Spoil>(1 + Pick(6));
  }
  // Applies `sp` to a request's parts; `is_item` for a Put's item (extra attributes are fine).
  void Apply(Spoil sp, std::string* table, Item* key, bool is_item, ExpressionArgs* args,
             std::optional<std::string>* expression) {
    switch (sp) {
      case Spoil::kNone:
        break;
      case Spoil::kNoTable:
        *table = "nosuchtable";
        break;
      case Spoil::kMissingKey:
        key->erase("sk");
        break;
      case Spoil::kExtraKey:
        if (!is_item) (*key)["extra"] = Value::S("x");
        break;
      case Spoil::kKeyType:
        (*key)["sk"] = Value::N(Pick(6));
        break;
      case Spoil::kUnused:
        args->values[":unused"] = Value::N(1);
        break;
      case Spoil::kUndefined:
        if (expression)
          *expression = expression->value_or("attribute_exists(pk)") + " AND n <> :undefined";
        break;
    }
  }

  Item RandomItem() {
    Item it = Key();
    it["n"] = Value::N(Pick(10));
    if (Coin()) it["s"] = Value::S("v" + std::to_string(Pick(3)));
    if (Coin(20)) it["tags"] = Value::SS({"a", std::to_string(Pick(3))});
    if (Coin(30)) it["m"] = Nested();
    if (Coin(25)) it["l"] = Value::L({Value::N(Pick(3)), Value::S("e"), Nested()});
    return it;
  }
  // A map with a number, sometimes a string and a list (for nested updates and ReturnValues).
  Value Nested() {
    Item m{{"x", Value::N(Pick(5))}};
    if (Coin()) m["y"] = Value::S("w" + std::to_string(Pick(2)));
    if (Coin(40)) m["l"] = Value::L({Value::N(1), Value::N(Pick(4))});
    return Value::M(std::move(m));
  }

  // One random operation, applied to both stores; returns the two outcomes.
  std::pair<std::string, std::string> Step(Store& a, Store& b, std::string* what) {
    if (static_cast<int>(wide_rng_() % 100) < WidePercent()) return WideStep(a, b, what);
    if (Pick(1000) < 15) return UpdateTableStep(a, b, what);
    switch (Pick(10)) {
      case 0: {
        PutRequest r;
        r.table = "tbl";
        r.item = RandomItem();
        if (Coin(3)) {
          // Near the 400 KB item limit (409,600 bytes of names and values), on either side:
          // sized with the embedded store's ItemSize, so DynamoDB Local checks its count.
          r.item["big"] = Value::S("");
          const int64_t want = kMaxItemSize - 5 + Pick(11);  // 409,595 .. 409,605
          r.item["big"] = Value::S(std::string(static_cast<size_t>(want - ItemSize(r.item)), 'b'));
          ++counts_[want > kMaxItemSize ? "puts over 400 KB" : "puts at 400 KB"];
        } else if (Coin(2)) {
          // A partition key over 2,048 bytes or a sort key over 1,024: VE.
          if (Coin()) {
            r.item["pk"] = Value::S(std::string(2048 + Pick(2), 'k'));
          } else {
            r.item["sk"] = Value::S(std::string(1024 + Pick(2), 'k'));
          }
        }
        Condition(&r.condition, &r.args);
        Apply(PickSpoil(), &r.table, &r.item, true, &r.args, &r.condition);
        if (Coin()) r.return_values = ReturnValues::kAllOld;
        r.return_old_on_condition_failure = Coin();
        *what = "PutItem " + r.table + " " + ddbjson::Encode(r.item).dump() + " if " +
                r.condition.value_or("-");
        auto show = [](const WriteResult& w) { return "OK " + ItemText(w.attributes); };
        Item key;
        for (const char* k : {"pk", "sk"}) {
          if (auto it = r.item.find(k); it != r.item.end()) key[k] = it->second;
        }
        const std::optional<Item> before = Current(a, r.table, key);
        return Both(
            a, b, r, [&](Store& s, const PutRequest& q) { return Outcome(s.PutItem(q), show); },
            true, [&] { return !LocalChargesAPartialKeySwap(before, Current(a, r.table, key)); });
      }
      case 1:
      case 2: {
        UpdateRequest r;
        r.table = "tbl";
        r.key = Key();
        switch (Pick(6)) {
          case 0:
            r.update = "SET n = n + :d";
            r.args.values[":d"] = Value::N(Pick(3));
            break;  // VE when n absent
          case 1:
            r.update = "ADD n :d";
            r.args.values[":d"] = Value::N(Pick(5) - 2);
            break;
          case 2:
            r.update = "SET s = :s";
            r.args.values[":s"] = Value::S("v" + std::to_string(Pick(3)));
            break;
          case 3:
            r.update = "REMOVE s";
            break;
          case 4:
            r.update = "SET pk = :s";
            r.args.values[":s"] = Value::S("x");
            break;  // key change: VE
          default:
            r.update = "ADD tags :t";
            r.args.values[":t"] = Value::SS({std::to_string(Pick(4))});
            break;
        }
        // Documents (a third of the updates): nested paths — absent parents and list indexes
        // past the end are VE or appends — list_append, a reserved word behind #name.
        bool nested = false;
        if (Coin(35)) {
          nested = true;
          ++counts_["document updates"];
          r.args = {};
          switch (Pick(8)) {
            case 0:
              r.update = "SET m.x = :d";
              r.args.values[":d"] = Value::N(Pick(9));
              break;  // VE when m is absent
            case 1:
              r.update = "SET m.l[" + std::to_string(Pick(4)) + "] = :d";
              r.args.values[":d"] = Value::N(Pick(9));
              break;
            case 2:
              r.update = "REMOVE m.y, l[" + std::to_string(Pick(4)) + "]";
              break;
            case 3:
              r.update = "SET l = list_append(l, :more)";
              r.args.values[":more"] = Value::L({Value::N(Pick(3))});
              break;  // VE when l is absent
            case 4:
              r.update = "SET l = list_append(if_not_exists(l, :empty), :more)";
              r.args.values[":empty"] = Value::L({});
              r.args.values[":more"] = Value::L({Value::S("z")});
              break;
            case 5:
              r.update = "SET m = :m";
              r.args.values[":m"] = Nested();
              break;
            case 6:
              r.update = "SET #size = :s, #data.#x = :d";  // reserved words, named
              r.args.names["#size"] = "size";
              r.args.names["#data"] = "m";
              r.args.names["#x"] = "x";
              r.args.values[":s"] = Value::S("big");
              r.args.values[":d"] = Value::N(Pick(4));
              if (Coin(20)) r.args.names["#unused"] = "n";  // VE: a name no expression uses
              break;
            default:
              r.update = "ADD m.x :d";
              r.args.values[":d"] = Value::N(1);
              break;  // VE when m is absent; else ADD to a nested number
          }
        }
        // A key change is VE on both; with a condition, DynamoDB Local checks the
        // condition first (docs/DYNAMODB-COMPATIBILITY.md, known divergences).
        if (*r.update != "SET pk = :s") {
          Condition(&r.condition, &r.args);
          Apply(PickSpoil(), &r.table, &r.key, false, &r.args, &r.condition);
        }
        r.return_values = static_cast<ReturnValues>(Pick(5));
        // UPDATED_OLD/UPDATED_NEW of a nested path: DynamoDB Local returns the whole top-level
        // attribute, DynamoDB the paths written (docs/DYNAMODB-COMPATIBILITY.md).
        if (nested && (r.return_values == ReturnValues::kUpdatedOld ||
                       r.return_values == ReturnValues::kUpdatedNew))
          r.return_values = Coin() ? ReturnValues::kAllOld : ReturnValues::kAllNew;
        r.return_old_on_condition_failure = Coin();
        *what = "UpdateItem " + r.table + " " + ddbjson::Encode(r.key).dump() + " " + *r.update +
                " if " + r.condition.value_or("-");
        auto show = [](const WriteResult& w) { return "OK " + ItemText(w.attributes); };
        const std::optional<Item> before = Current(a, r.table, r.key);
        return Both(
            a, b, r,
            [&](Store& s, const UpdateRequest& q) { return Outcome(s.UpdateItem(q), show); }, true,
            [&] { return !LocalChargesAPartialKeySwap(before, Current(a, r.table, r.key)); });
      }
      case 3: {
        DeleteRequest r;
        r.table = "tbl";
        r.key = Key();
        Condition(&r.condition, &r.args);
        Apply(PickSpoil(), &r.table, &r.key, false, &r.args, &r.condition);
        if (Coin()) r.return_values = ReturnValues::kAllOld;
        r.return_old_on_condition_failure = Coin();
        *what = "DeleteItem " + r.table + " " + ddbjson::Encode(r.key).dump() + " if " +
                r.condition.value_or("-");
        auto show = [](const WriteResult& w) { return "OK " + ItemText(w.attributes); };
        return Both(a, b, r, [&](Store& s, const DeleteRequest& q) {
          return Outcome(s.DeleteItem(q), show);
        });
      }
      case 4: {
        TransactWriteRequest req;
        std::string what_items;
        int n = 1 + Pick(4);
        std::set<std::string> used;
        for (int i = 0; i < n; ++i) {
          TransactWriteItem w;
          w.table = "tbl";
          w.kind = static_cast<TransactWriteItem::Kind>(Pick(4));
          w.item = w.kind == TransactWriteItem::Kind::kPut ? RandomItem() : Key();
          std::string k = w.item.at("pk").s() + "/" + w.item.at("sk").s();
          if (used.count(k) && !Coin(10)) continue;  // sometimes keep a duplicate: VE
          used.insert(k);
          if (w.kind == TransactWriteItem::Kind::kUpdate) {
            // SET n = n + :one cannot apply where n is absent: a whole-request error.
            w.update = Coin(70) ? "ADD n :one" : "SET n = n + :one";
            w.args.values[":one"] = Value::N(1);
          }
          Condition(&w.condition, &w.args);
          if (w.kind == TransactWriteItem::Kind::kConditionCheck && !w.condition)
            w.condition = "attribute_exists(pk)";
          Spoil sp = Coin(40) ? PickSpoil() : Spoil::kNone;
          Apply(sp, &w.table, &w.item, w.kind == TransactWriteItem::Kind::kPut, &w.args,
                &w.condition);
          w.return_old_on_condition_failure = Coin();
          what_items += " " + std::to_string(static_cast<int>(w.kind)) + ":" + w.table + ":" +
                        ddbjson::Encode(w.item).dump() + ":" + w.update.value_or("") + ":" +
                        w.condition.value_or("");
          req.items.push_back(std::move(w));
        }
        // ClientRequestToken (one transaction in five): a fresh token; a token that succeeded,
        // with its own request again (success, no new effect) or with this one (mismatch).
        std::string token_use;
        if (Coin(20)) {
          const int use = tokens_.empty() ? 0 : Pick(3);
          auto it = tokens_.begin();
          if (use > 0) std::advance(it, Pick(static_cast<int>(tokens_.size())));
          if (use == 0) {
            req.client_request_token = "tok-" + std::to_string(next_token_++);
            token_use = " token new";
            ++counts_["new tokens"];
          } else if (use == 1) {
            req = it->second;
            token_use = " token replay " + it->first;
            ++counts_["token replays"];
          } else {
            req.client_request_token = it->first;
            token_use = " token reused " + it->first;
            ++counts_["tokens reused with another request"];
          }
        }
        *what =
            "TransactWriteItems of " + std::to_string(req.items.size()) + token_use + what_items;
        bool ok[2] = {false, false};
        int run = 0;
        auto result = Both(
            a, b, req,
            [&](Store& s, const TransactWriteRequest& q) {
              absl::Status st = s.TransactWriteItems(q);
              ok[run++] = st.ok();
              return st.ok() ? std::string("OK") : ErrorText(st);
            },
            /*exact=*/false);
        if (ok[0] && ok[1] && req.client_request_token)
          tokens_.emplace(*req.client_request_token, req);
        return result;
      }
      case 5: {
        GetRequest r;
        r.table = "tbl";
        r.key = Key();
        r.consistent_read = true;
        if (Coin(30)) r.projection = "n, s";
        Spoil sp = PickSpoil();
        if (sp != Spoil::kUnused && sp != Spoil::kUndefined)  // GetItem has no values
          Apply(sp, &r.table, &r.key, false, nullptr, nullptr);
        *what = "GetItem " + r.table + " " + ddbjson::Encode(r.key).dump();
        auto show = [](const std::optional<Item>& i) { return "OK " + ItemText(i); };
        return Both(a, b, r,
                    [&](Store& s, const GetRequest& q) { return Outcome(s.GetItem(q), show); });
      }
      case 7:
        return ScanStep(a, b, what);
      case 8:
        return BatchWriteStep(a, b, what);
      case 9:
        return BatchGetStep(a, b, what);
      default: {
        if (index_ && Coin(30)) return IndexQueryStep(a, b, what);
        QueryRequest q;
        q.table = "tbl";
        q.key_condition = "pk = :p";
        q.args.values[":p"] = Pk();
        if (Coin()) {
          q.key_condition += " AND sk BETWEEN :lo AND :hi";
          int lo = Pick(6);
          q.args.values[":lo"] = Value::S(std::to_string(lo));
          q.args.values[":hi"] = Value::S(std::to_string(lo + Pick(4)));
        }
        if (Coin(40)) {
          q.filter = "n >= :f";
          q.args.values[":f"] = Value::N(Pick(6));
        }
        switch (Pick(12)) {  // an invalid query now and then
          case 0:
            q.table = "nosuchtable";
            break;
          case 1:
            q.args.values[":unused"] = Value::N(1);
            break;
          case 2:
            q.args.values[":p"] = Value::N(1);  // the partition key is S
            break;
          case 3:
            q.filter = "sk = :p";  // a key attribute in the filter
            break;
          default:
            break;
        }
        q.scan_forward = Coin();
        if (Coin(60)) q.limit = 1 + Pick(3);
        q.consistent_read = true;
        *what = "Query " + q.table + " " + q.key_condition + " filter " + q.filter.value_or("-");
        return QueryPages(a, b, q);
      }
    }
  }

  // A query of the table on both stores, every page recorded in order.
  std::pair<std::string, std::string> QueryPages(Store& a, Store& b, const QueryRequest& q) {
    std::string out[2];
    Store* stores[2] = {&a, &b};
    const bool ask = AskCapacity();
    std::vector<ConsumedCapacity> used[2];  // summed over the pages
    for (int s = 0; s < 2; ++s) {
      QueryRequest page = q;
      std::vector<ConsumedCapacity> sink;
      if (ask) page.consumed_capacity = &sink;
      for (int guard = 0; guard < 50; ++guard) {
        auto r = stores[s]->Query(page);
        if (!r.ok()) {
          out[s] += ErrorText(r.status());
          break;
        }
        for (auto& c : sink) store::AddByTable(&used[s], c);
        out[s] += "page count=" + std::to_string(r->count) +
                  " scanned=" + std::to_string(r->scanned_count);
        for (const auto& it : r->items) out[s] += " " + ddbjson::Encode(it).dump();
        out[s] += " lek=" + ItemText(r->last_evaluated_key) + "\n";
        if (!r->last_evaluated_key) break;
        page.exclusive_start_key = r->last_evaluated_key;
      }
    }
    std::string shown[2] = {WithoutEmptyLastPage(out[0]), WithoutEmptyLastPage(out[1])};
    for (int s = 0; s < 2 && ask; ++s) {
      // Only a read that succeeded throughout reports what it consumed.
      if (shown[s].find("ERROR") == std::string::npos)
        shown[s] += " " + CapacityText(used[s], true);
    }
    return {shown[0], shown[1]};
  }

  // A whole scan (every segment of a random total, every page): the items as a sorted
  // multiset plus the summed counts, since the two stores order a scan differently.
  std::pair<std::string, std::string> ScanStep(Store& a, Store& b, std::string* what) {
    ScanRequest q;
    q.table = "tbl";
    if (Coin(40)) {
      q.filter = Coin() ? "n >= :f" : "pk = :f OR attribute_exists(s)";
      q.args.values[":f"] = Coin() ? Value::N(Pick(6)) : Pk();
    }
    if (Coin(25)) q.projection = Coin() ? "n, s" : "pk, tags";
    if (!q.projection && Coin(15)) q.select = Select::kCount;
    if (Coin(60)) q.limit = 1 + Pick(4);
    q.consistent_read = Coin();
    if (index_ && Coin(30)) q.index = "by-s";  // ConsistentRead on it: VE on both
    int total = Coin() ? 1 + Pick(3) : 0;
    switch (PickSpoil()) {
      case Spoil::kNone:
        break;
      case Spoil::kNoTable:
        q.table = "nosuchtable";
        break;
      case Spoil::kMissingKey:
        q.exclusive_start_key = Item{{"pk", Pk()}};
        break;
      case Spoil::kExtraKey:
        q.exclusive_start_key = Key();
        (*q.exclusive_start_key)["extra"] = Value::S("x");
        break;
      case Spoil::kKeyType:
        q.exclusive_start_key = Item{{"pk", Pk()}, {"sk", Value::N(1)}};
        break;
      case Spoil::kUnused:
        q.args.values[":unused"] = Value::N(1);
        break;
      case Spoil::kUndefined:
        q.filter = q.filter.value_or("attribute_exists(pk)") + " AND n <> :undefined";
        break;
    }
    int bad_segment = total && Coin(10) ? total + Pick(2) : -1;  // out of range: VE
    *what = "Scan " + q.table + " filter " + q.filter.value_or("-") + " projection " +
            q.projection.value_or("-") + " segments " + std::to_string(total);
    std::string out[2];
    Store* stores[2] = {&a, &b};
    const bool ask = AskCapacity();
    for (int s = 0; s < 2; ++s) {
      Unordered u;
      u.ask = ask;
      for (int seg = 0; seg < std::max(total, 1) && u.error.empty(); ++seg) {
        ScanRequest page = q;
        if (total) {
          page.total_segments = total;
          page.segment = bad_segment >= 0 ? bad_segment : seg;
        }
        AllPages(
            page, [&](const ScanRequest& p) { return stores[s]->Scan(p); }, &u);
      }
      out[s] = u.Text();
    }
    return {out[0], out[1]};
  }

  // 1–4 writes on distinct items (or, now and then, the same item twice: VE), with at most one
  // other problem: a missing table, or one write's key missing, extra or of the wrong type.
  std::pair<std::string, std::string> BatchWriteStep(Store& a, Store& b, std::string* what) {
    BatchWriteRequest req;
    auto& writes = req.items["tbl"];
    std::set<std::string> used;
    const bool dup = Coin(8);
    for (int i = 0, n = 1 + Pick(4); i < n; ++i) {
      BatchWrite w;
      w.kind = Coin(60) ? BatchWrite::Kind::kPut : BatchWrite::Kind::kDelete;
      w.item = w.kind == BatchWrite::Kind::kPut ? RandomItem() : Key();
      if (!used.insert(w.item.at("pk").s() + "/" + w.item.at("sk").s()).second) continue;
      writes.push_back(std::move(w));
    }
    Spoil sp = dup ? Spoil::kNone : PickSpoil();
    if (dup) {
      const Item& first = writes[0].item;
      BatchWrite again{BatchWrite::Kind::kDelete,
                       Item{{"pk", first.at("pk")}, {"sk", first.at("sk")}}};
      writes.push_back(std::move(again));
    } else if (sp == Spoil::kNoTable) {
      req.items["nosuchtable"] = {BatchWrite{BatchWrite::Kind::kPut, RandomItem()}};
    } else if (sp == Spoil::kMissingKey || sp == Spoil::kExtraKey || sp == Spoil::kKeyType) {
      auto& w = writes[Pick(static_cast<int>(writes.size()))];
      Apply(sp, nullptr, &w.item, w.kind == BatchWrite::Kind::kPut, nullptr, nullptr);
    }
    *what = "BatchWriteItem";
    for (const auto& [t, ws] : req.items) {
      for (const auto& w : ws) {
        *what += std::string(w.kind == BatchWrite::Kind::kPut ? " put " : " delete ") + t + ":" +
                 ddbjson::Encode(w.item).dump();
      }
    }
    auto show = [](const BatchWriteResult& r) {
      size_t n = 0;
      for (const auto& [t, ws] : r.unprocessed) n += ws.size();
      return "OK unprocessed=" + std::to_string(n);
    };
    return Both(
        a, b, req,
        [&](Store& s, const BatchWriteRequest& q) { return Outcome(s.BatchWriteItem(q), show); },
        /*exact=*/false);
  }

  // 1–5 keys (sometimes one twice: VE), an optional projection, at most one other problem.
  std::pair<std::string, std::string> BatchGetStep(Store& a, Store& b, std::string* what) {
    BatchGetRequest req;
    KeysAndAttributes ka;
    std::set<std::string> used;
    for (int i = 0, n = 1 + Pick(5); i < n; ++i) {
      Item k = Key();
      if (!used.insert(k.at("pk").s() + "/" + k.at("sk").s()).second) continue;
      ka.keys.push_back(std::move(k));
    }
    if (Coin(8)) ka.keys.push_back(ka.keys[0]);
    if (Coin(30)) {
      ka.projection = Coin() ? "n, #s" : "pk, #s, tags";
      ka.names = {{"#s", "s"}};
    }
    ka.consistent_read = Coin();
    std::string table = "tbl";
    switch (PickSpoil()) {
      case Spoil::kNone:
        break;
      case Spoil::kNoTable:
        table = "nosuchtable";
        break;
      case Spoil::kMissingKey:
      case Spoil::kExtraKey:
      case Spoil::kKeyType: {
        Spoil sp = static_cast<Spoil>(2 + Pick(3));  // missing, extra or wrong-typed
        Apply(sp, nullptr, &ka.keys[Pick(static_cast<int>(ka.keys.size()))], false, nullptr,
              nullptr);
        break;
      }
      case Spoil::kUnused:
        ka.names["#unused"] = "u";
        if (!ka.projection) ka.projection = "n";
        break;
      case Spoil::kUndefined:
        ka.projection = ka.projection.value_or("n") + ", #undefined";
        break;
    }
    req.items[table] = ka;
    *what = "BatchGetItem " + table + " projection " + ka.projection.value_or("-");
    for (const auto& k : ka.keys) *what += " " + ddbjson::Encode(k).dump();
    auto show = [](const BatchGetResult& r) {
      std::vector<std::string> items;
      for (const auto& [t, list] : r.responses)
        for (const auto& it : list) items.push_back(t + ":" + ddbjson::Encode(it).dump());
      std::sort(items.begin(), items.end());
      std::string out = "OK unprocessed=" + std::to_string(r.unprocessed.size());
      for (const auto& it : items) out += " " + it;
      return out;
    };
    return Both(a, b, req, [&](Store& s, const BatchGetRequest& q) {
      return Outcome(s.BatchGetItem(q), show);
    });
  }

  // A query of the GSI, every page. Items with equal index keys have no defined order in
  // DynamoDB, so the items are compared as a sorted multiset with the summed counts.
  std::pair<std::string, std::string> IndexQueryStep(Store& a, Store& b, std::string* what) {
    QueryRequest q;
    q.table = "tbl";
    q.index = "by-s";
    q.key_condition = "s = :sv";
    q.args.values[":sv"] = Value::S("v" + std::to_string(Pick(3)));
    if (Coin()) {
      q.key_condition += " AND n BETWEEN :lo AND :hi";
      int lo = Pick(6);
      q.args.values[":lo"] = Value::N(lo);
      q.args.values[":hi"] = Value::N(lo + Pick(5));
    }
    if (Coin(30)) {
      q.filter = "pk = :p";  // a table key is fine in an index query's filter
      q.args.values[":p"] = Pk();
    }
    switch (Pick(10)) {  // an invalid query now and then
      case 0:
        q.consistent_read = true;  // not on a GSI
        break;
      case 1:
        q.filter = "n > :sv";  // an index key attribute in the filter
        break;
      case 2:
        q.select = Select::kAllAttributes;  // VE when the index projects keys only
        break;
      case 3:
        q.index = "nosuchindex";
        break;
      default:
        break;
    }
    q.scan_forward = Coin();
    if (Coin(60)) q.limit = 1 + Pick(3);
    *what = "Query index " + q.index.value_or("-") + " " + q.key_condition + " filter " +
            q.filter.value_or("-");
    std::string out[2];
    Store* stores[2] = {&a, &b};
    const bool ask = AskCapacity();
    for (int s = 0; s < 2; ++s) {
      Unordered u;
      u.ask = ask;
      AllPages(
          q, [&](const QueryRequest& p) { return stores[s]->Query(p); }, &u);
      out[s] = u.Text();
    }
    return {out[0], out[1]};
  }

  // UpdateTable: mostly deleting or creating the index (queries after it compare the
  // backfill); invalid on purpose otherwise: the index exists / does not, nothing to update, a
  // table that does not exist, no stream to disable, a key attribute redefined.
  std::pair<std::string, std::string> UpdateTableStep(Store& a, Store& b, std::string* what) {
    TableUpdate u;
    u.table = "tbl";
    const int kind = Pick(7);
    // While the billing mode is not the seed's, the index (with the seed's units) stays away.
    const bool toggle = kind < 3 && !(billing_switched_ && !index_);
    switch (kind) {
      case 0:
      case 1:
      case 2:
      case 3:
        if (index_ == toggle) {
          u.delete_indexes.push_back(gsi_.name);
        } else {
          u.create_indexes.push_back(gsi_);
        }
        break;
      case 4:
        if (Coin()) {
          u.table = "nosuchtable";
          u.stream = StreamChange{true, StreamViewType::kKeysOnly};
        }
        break;
      case 5:
        u.stream = StreamChange{false, std::nullopt};
        break;
      default: {
        GlobalSecondaryIndex g = gsi_;
        g.name = "by-pk";
        g.hash_key = {"pk", Type::N};
        g.range_key.reset();
        u.create_indexes.push_back(g);
      }
    }
    *what = "UpdateTable " + u.table + " create " + std::to_string(u.create_indexes.size()) +
            " delete " + std::to_string(u.delete_indexes.size()) + (u.stream ? " stream" : "");
    auto show = [](const TableDescription& d) {
      std::string out = "OK items=" + std::to_string(d.item_count) +
                        " stream=" + std::to_string(d.spec.stream_enabled);
      for (const auto& g : d.spec.global_secondary_indexes) {
        out += " index " + g.name + "/" + std::to_string(static_cast<int>(g.projection)) +
               (g.provisioned ? "/provisioned" : "");
      }
      return out;
    };
    auto ra = a.UpdateTable(u);
    auto rb = b.UpdateTable(u);
    if (toggle && ra.ok() && rb.ok()) {
      index_ = !index_;
      ++index_changes_;
    }
    return {Outcome(ra, show), Outcome(rb, show)};
  }

  // The share of issue 54's kinds of request, in percent: 20, or OUTBOX_DIFF_WIDE (0: the
  // generator of before them, e.g. to compare run times).
  static int WidePercent() {
    static const int percent = [] {
      const char* s = std::getenv("OUTBOX_DIFF_WIDE");
      return s ? std::stoi(s) : 20;
    }();
    return percent;
  }

  // Issue 54's kinds of request, one step in five: Query start keys inside and outside the key
  // condition, placeholders without any expression in every operation that takes them,
  // TransactGetItems (with keys that do not match the schema), table descriptions after the
  // writes, batch limits, Scan's Select/projection rules, ListTables, billing switches and TTL.
  std::pair<std::string, std::string> WideStep(Store& a, Store& b, std::string* what) {
    switch (wide_rng_() % 12) {
      case 0:
      case 1:
      case 2:
        return StartKeyQueryStep(a, b, what);
      case 3:
      case 4:
        return PlaceholderStep(a, b, what);
      case 5:
      case 6:
        return TransactGetStep(a, b, what);
      case 7:
        return DescribeStep(a, b, what);
      case 8:
        return BatchLimitStep(a, b, what);
      case 9:
        return ScanShapeStep(a, b, what);
      case 10:
        return ListTablesStep(a, b, what);
      default:  // the slowest on DynamoDB Local (UpdateTable waits for ACTIVE)
        return BillingOrTtlStep(a, b, what);
    }
  }

  // A query whose start key's sort key is one of the condition's bounds, or any other, in either
  // direction (DynamoDB: outside the condition, or the bound the read ends at, is a VE).
  std::pair<std::string, std::string> StartKeyQueryStep(Store& a, Store& b, std::string* what) {
    static const char* const kOps[] = {"sk = :a",
                                       "sk < :a",
                                       "sk <= :a",
                                       "sk > :a",
                                       "sk >= :a",
                                       "sk BETWEEN :a AND :b",
                                       "begins_with(sk, :a)"};
    QueryRequest q;
    q.table = "tbl";
    q.key_condition = "pk = :p";
    q.args.values[":p"] = Pk();
    const int op = Pick(8);  // 7: the partition key only
    std::vector<std::string> bounds;
    if (op < 7) {
      q.key_condition += std::string(" AND ") + kOps[op];
      const int lo = Pick(6);
      bounds.push_back(std::to_string(lo));
      q.args.values[":a"] = Value::S(bounds[0]);
      if (op == 5) {
        bounds.push_back(std::to_string(lo + Pick(3)));
        q.args.values[":b"] = Value::S(bounds[1]);
      }
    }
    std::string sk = !bounds.empty() && Coin(50) ? bounds[Pick(static_cast<int>(bounds.size()))]
                                                 : std::to_string(Pick(7));
    q.scan_forward = Coin();
    // Not the inclusive bound the read ends at: DynamoDB Local refuses it, DynamoDB pages on
    // from it (known divergence; the paging of the other query steps reaches it as a
    // LastEvaluatedKey and compares the empty page that follows).
    const bool end_bound = q.scan_forward
                               ? (op == 2 && sk == bounds[0]) || (op == 5 && sk == bounds[1])
                               : (op == 4 && sk == bounds[0]) || (op == 5 && sk == bounds[0]);
    if (end_bound) sk = "9";  // outside the condition instead
    q.exclusive_start_key =
        Item{{"pk", Coin(10) ? Pk() : q.args.values[":p"]}, {"sk", Value::S(sk)}};
    if (Coin(50)) q.limit = 1 + Pick(3);
    q.consistent_read = true;
    ++counts_["queries from a start key"];
    *what = "Query " + q.key_condition + " from " + ddbjson::Encode(*q.exclusive_start_key).dump() +
            (q.scan_forward ? " forward" : " backward");
    return QueryPages(a, b, q);
  }

  // ExpressionAttributeNames or ExpressionAttributeValues with no expression, in one of the
  // operations that take them; sometimes with a missing table or a wrong-typed key as well.
  std::pair<std::string, std::string> PlaceholderStep(Store& a, Store& b, std::string* what) {
    ExpressionArgs args;
    const int which = Pick(3);  // names, values, both
    if (which != 1) args.names = {{"#a", "n"}};
    if (which != 0) args.values = {{":a", Value::N(1)}};
    const std::string table = Coin(15) ? "nosuchtable" : "tbl";
    Item key = Key();
    if (Coin(20)) key["sk"] = Value::N(Pick(6));
    ++counts_["placeholders without an expression"];
    auto show_write = [](const WriteResult& w) { return "OK " + ItemText(w.attributes); };
    const int op = Pick(8);
    *what = "placeholders without an expression, op " + std::to_string(op) + " " + table + " " +
            ddbjson::Encode(key).dump();
    switch (op) {
      case 0: {
        PutRequest r;
        r.table = table;
        r.item = RandomItem();
        r.item["sk"] = key["sk"];
        r.args = args;
        return Both(a, b, r, [&](Store& s, const PutRequest& q) {
          return Outcome(s.PutItem(q), show_write);
        });
      }
      case 1: {
        UpdateRequest r;
        r.table = table;
        r.key = key;
        r.args = args;
        return Both(a, b, r, [&](Store& s, const UpdateRequest& q) {
          return Outcome(s.UpdateItem(q), show_write);
        });
      }
      case 2: {
        DeleteRequest r;
        r.table = table;
        r.key = key;
        r.args = args;
        return Both(a, b, r, [&](Store& s, const DeleteRequest& q) {
          return Outcome(s.DeleteItem(q), show_write);
        });
      }
      case 3: {
        ScanRequest r;
        r.table = table;
        r.args = args;
        if (Coin(30)) r.projection = "pk, n";  // names could be used by one; values not
        auto show = [](const QueryResult& x) { return "OK count=" + std::to_string(x.count); };
        return Both(a, b, r,
                    [&](Store& s, const ScanRequest& q) { return Outcome(s.Scan(q), show); });
      }
      case 4: {
        GetRequest r;
        r.table = table;
        r.key = key;
        r.names = {{"#a", "n"}};
        auto show = [](const std::optional<Item>& i) { return "OK " + ItemText(i); };
        return Both(a, b, r,
                    [&](Store& s, const GetRequest& q) { return Outcome(s.GetItem(q), show); });
      }
      case 5: {
        BatchGetRequest r;
        r.items[table].keys = {key};
        r.items[table].names = {{"#a", "n"}};
        auto show = [](const BatchGetResult&) { return std::string("OK"); };
        return Both(a, b, r, [&](Store& s, const BatchGetRequest& q) {
          return Outcome(s.BatchGetItem(q), show);
        });
      }
      case 6: {
        GetRequest g;
        g.table = table;
        g.key = key;
        g.names = {{"#a", "n"}};
        TransactGetRequest r{g};
        auto show = [](const std::vector<std::optional<Item>>&) { return std::string("OK"); };
        return Both(a, b, r, [&](Store& s, const TransactGetRequest& q) {
          return TransactGetOutcome(s.TransactGetItems(q), show);
        });
      }
      default: {
        TransactWriteItem w;
        w.kind = Coin() ? TransactWriteItem::Kind::kDelete : TransactWriteItem::Kind::kPut;
        w.table = table;
        w.item = key;
        w.args = args;
        TransactWriteRequest r;
        if (Coin(30)) r.items.push_back(TransactWriteItem::Put("tbl", RandomItem()));
        r.items.push_back(std::move(w));
        return Both(
            a, b, r,
            [&](Store& s, const TransactWriteRequest& q) {
              absl::Status st = s.TransactWriteItems(q);
              return st.ok() ? std::string("OK") : ErrorText(st);
            },
            /*exact=*/false);
      }
    }
  }

  // TransactGetItems' cancellation is compared by name: DynamoDB Local sends no
  // CancellationReasons for it (docs/DYNAMODB-COMPATIBILITY.md, known divergences).
  template <typename F>
  static std::string TransactGetOutcome(const absl::StatusOr<std::vector<std::optional<Item>>>& r,
                                        F show) {
    if (!r.ok() && DdbErrorName(r.status()) == ddb_error::kTransactionCanceled)
      return "ERROR " + DdbErrorName(r.status());
    return Outcome(r, show);
  }

  // 1–4 gets, sometimes with a projection, at most one problem: a missing table, a key missing,
  // extra or of the wrong type, one item twice, a name unused or without a projection.
  std::pair<std::string, std::string> TransactGetStep(Store& a, Store& b, std::string* what) {
    TransactGetRequest req;
    for (int i = 0, n = 1 + Pick(4); i < n; ++i) {
      GetRequest g;
      g.table = "tbl";
      g.key = Key();
      if (Coin(30)) {
        g.projection = "n, #s";
        g.names = {{"#s", "s"}};
      }
      req.gets.push_back(std::move(g));
    }
    std::set<std::string> seen;
    std::vector<GetRequest> distinct;
    for (auto& g : req.gets) {
      if (seen.insert(g.key.at("pk").s() + "/" + g.key.at("sk").s()).second)
        distinct.push_back(std::move(g));
    }
    req.gets = std::move(distinct);
    GetRequest& victim = req.gets[Pick(static_cast<int>(req.gets.size()))];
    const int spoil = Coin(40) ? Pick(7) : -1;
    switch (spoil) {
      case 0:
        victim.table = "nosuchtable";
        break;
      case 1:
        victim.key["sk"] = Value::N(Pick(6));
        ++counts_["transact gets with a wrong-typed key"];
        break;
      case 2:
        victim.key.erase("sk");
        break;
      case 3:
        victim.key["extra"] = Value::S("x");
        break;
      case 4:
        req.gets.push_back(req.gets[0]);
        break;
      case 5:
        victim.names["#unused"] = "u";
        if (!victim.projection) victim.projection = "n";
        break;
      case 6:
        victim.projection.reset();
        victim.names = {{"#s", "s"}};
        break;
      default:
        break;
    }
    *what = "TransactGetItems spoil " + std::to_string(spoil);
    for (const auto& g : req.gets) *what += " " + g.table + ":" + ddbjson::Encode(g.key).dump();
    auto show = [](const std::vector<std::optional<Item>>& items) {
      std::string out = "OK";
      for (const auto& i : items) out += " " + ItemText(i);
      return out;
    };
    return Both(a, b, req, [&](Store& s, const TransactGetRequest& q) {
      return TransactGetOutcome(s.TransactGetItems(q), show);
    });
  }

  // Every field of the description both report alike: status, keys, billing, units, the
  // indexes with their sizes and counts, the table's size and count, whether a switch to
  // PAY_PER_REQUEST is dated. (Dates themselves are on each server's clock.)
  static std::string DescriptionText(const TableDescription& d) {
    auto key = [](const KeyAttribute& k) {
      return k.name + ":" + std::to_string(static_cast<int>(k.type));
    };
    auto units = [](const std::optional<ProvisionedThroughput>& p) {
      return p ? fmt::format("{}/{}", p->read_capacity_units, p->write_capacity_units)
               : std::string("on-demand");
    };
    std::string out =
        fmt::format("OK {} {} hash {} range {} {} items={} bytes={} ppr={} stream={}", d.spec.name,
                    d.status, key(d.spec.hash_key), d.spec.range_key ? key(*d.spec.range_key) : "-",
                    units(d.spec.provisioned), d.item_count, d.table_size_bytes,
                    d.last_pay_per_request_ms != 0, d.spec.stream_enabled);
    for (size_t i = 0; i < d.spec.global_secondary_indexes.size(); ++i) {
      const auto& g = d.spec.global_secondary_indexes[i];
      out += fmt::format(" index {} {} {} {} {}", g.name, key(g.hash_key),
                         g.range_key ? key(*g.range_key) : "-", static_cast<int>(g.projection),
                         units(g.provisioned));
      // The count only: DynamoDB Local sizes an index by whole items, counting those that
      // carry only part of its key too (known divergences).
      if (i < d.indexes.size()) out += fmt::format(" items={}", d.indexes[i].item_count);
    }
    return out;
  }

  std::pair<std::string, std::string> DescribeStep(Store& a, Store& b, std::string* what) {
    const std::string table = Coin(10) ? "nosuchtable" : "tbl";
    *what = "DescribeTable " + table;
    ++counts_["descriptions"];
    auto show = [](const TableDescription& d) { return DescriptionText(d); };
    return {Outcome(a.DescribeTable(table), show), Outcome(b.DescribeTable(table), show)};
  }

  // Over the limits of a batch: 26 writes, 101 keys, an empty list, a put and a delete of one
  // key (VE on both), or a batch with one missing table.
  std::pair<std::string, std::string> BatchLimitStep(Store& a, Store& b, std::string* what) {
    const int kind = Pick(5);
    *what = "batch limit " + std::to_string(kind);
    if (kind < 2 || kind == 4) {
      BatchWriteRequest req;
      auto& writes = req.items["tbl"];
      if (kind == 0) {
        for (int i = 0; i < kMaxBatchWriteItems + 1; ++i) {
          Item it{{"pk", Value::S("b" + std::to_string(i))}, {"sk", Value::S("0")}};
          writes.push_back(BatchWrite{BatchWrite::Kind::kPut, it});
        }
      } else if (kind == 1) {
        Item it = RandomItem();
        writes.push_back(BatchWrite{BatchWrite::Kind::kPut, it});
        writes.push_back(
            BatchWrite{BatchWrite::Kind::kDelete, Item{{"pk", it.at("pk")}, {"sk", it.at("sk")}}});
      } else {
        writes.push_back(BatchWrite{BatchWrite::Kind::kPut, RandomItem()});
        req.items["nosuchtable"] = {BatchWrite{BatchWrite::Kind::kDelete, Key()}};
      }
      auto show = [](const BatchWriteResult& r) {
        return "OK unprocessed=" + std::to_string(r.unprocessed.size());
      };
      return Both(
          a, b, req,
          [&](Store& s, const BatchWriteRequest& q) { return Outcome(s.BatchWriteItem(q), show); },
          /*exact=*/false);
    }
    BatchGetRequest req;
    auto& ka = req.items["tbl"];
    if (kind == 2) {
      for (int i = 0; i < 101; ++i)
        ka.keys.push_back(Item{{"pk", Value::S("g" + std::to_string(i))}, {"sk", Value::S("0")}});
    }  // kind 3: no keys at all
    auto show = [](const BatchGetResult&) { return std::string("OK"); };
    return Both(a, b, req, [&](Store& s, const BatchGetRequest& q) {
      return Outcome(s.BatchGetItem(q), show);
    });
  }

  // Scan's request rules: Select COUNT or ALL_ATTRIBUTES with a projection, SPECIFIC_ATTRIBUTES
  // without one, ALL_PROJECTED_ATTRIBUTES without an index, a filter on the keys with COUNT.
  std::pair<std::string, std::string> ScanShapeStep(Store& a, Store& b, std::string* what) {
    ScanRequest q;
    q.table = "tbl";
    const int kind = Pick(5);
    switch (kind) {
      case 0:
        q.select = Select::kCount;
        q.projection = "pk";
        break;
      case 1:
        q.select = Select::kAllAttributes;
        q.projection = "n";
        break;
      case 2:
        q.select = Select::kSpecificAttributes;
        break;
      case 3:
        q.select = Select::kAllProjectedAttributes;
        break;
      default:
        q.select = Select::kCount;
        q.filter = "pk = :p AND sk >= :s";
        q.args.values = {{":p", Pk()}, {":s", Sk()}};
        if (Coin()) q.limit = 1 + Pick(4);
        break;
    }
    *what = "Scan shape " + std::to_string(kind);
    std::string out[2];
    Store* stores[2] = {&a, &b};
    for (int s = 0; s < 2; ++s) {
      Unordered u;
      AllPages(
          q, [&](const ScanRequest& p) { return stores[s]->Scan(p); }, &u);
      out[s] = u.Text();
    }
    return {out[0], out[1]};
  }

  // Creates or deletes one of three extra tables now and then, then lists the tables.
  std::pair<std::string, std::string> ListTablesStep(Store& a, Store& b, std::string* what) {
    const std::string name = "extra-" + std::to_string(Pick(3));
    std::string change[2];
    if (Coin(30)) {
      Store* stores[2] = {&a, &b};
      const bool exists = extra_tables_.count(name) > 0;
      for (int s = 0; s < 2; ++s) {
        absl::Status st;
        if (exists) {
          st = stores[s]->DeleteTable(name);
        } else {
          TableSpec t;
          t.name = name;
          t.hash_key = {"id", Type::S};
          st = stores[s]->CreateTable(t);
        }
        change[s] = st.ok() ? "changed " : ErrorText(st) + " ";
      }
      if (exists)
        extra_tables_.erase(name);
      else
        extra_tables_.insert(name);
    }
    *what = "ListTables after a change of " + name;
    auto show = [](const std::vector<std::string>& names) {
      std::string out = "OK";
      for (const auto& n : names) out += " " + n;
      return out;
    };
    return {change[0] + Outcome(a.ListTables(), show), change[1] + Outcome(b.ListTables(), show)};
  }

  // UpdateTimeToLive: enable (twice now and then), disable, another attribute while enabled;
  // or, on a table without its index, a switch of billing mode and back.
  std::pair<std::string, std::string> BillingOrTtlStep(Store& a, Store& b, std::string* what) {
    TableUpdate u;
    u.table = "tbl";
    const bool billing = !index_ && Coin(40);
    if (billing) {
      const bool to_provisioned = gsi_.provisioned.has_value() == billing_switched_;
      u.billing_mode = to_provisioned ? BillingMode::kProvisioned : BillingMode::kPayPerRequest;
      if (to_provisioned) u.provisioned = ProvisionedThroughput{5, 5};
      *what = std::string("UpdateTable billing ") +
              (to_provisioned ? "PROVISIONED" : "PAY_PER_REQUEST");
      ++counts_["billing switches"];
    } else {
      const int kind = Pick(4);
      u.ttl = TtlChange{kind != 2, kind == 3 ? "other" : "exp"};
      *what = "UpdateTimeToLive " + u.ttl->attribute + (u.ttl->enabled ? " on" : " off") +
              (ttl_on_ ? " (on)" : " (off)");
      ++counts_["TTL changes"];
    }
    auto ra = a.UpdateTable(u);
    auto rb = b.UpdateTable(u);
    if (ra.ok() && rb.ok()) {
      if (billing) billing_switched_ = !billing_switched_;
      if (u.ttl) ttl_on_ = u.ttl->enabled;
    }
    auto show = [](const TableDescription& d) {
      return DescriptionText(d) + " ttl=" + d.spec.ttl_attribute.value_or("-");
    };
    return {Outcome(ra, show), Outcome(rb, show)};
  }

  int index_changes() const { return index_changes_; }
  // How often each of the rarer kinds of request was sent (printed with the rate).
  const std::map<std::string, int>& counts() const { return counts_; }

 private:
  std::mt19937_64 rng_;
  std::mt19937_64 capacity_rng_;
  std::mt19937_64 wide_rng_;  // decides when a step of issue 54's kinds is sent
  bool index_ = false;
  bool ttl_on_ = false;            // TTL enabled on "exp"
  bool billing_switched_ = false;  // the table's billing mode is not the seed's
  std::set<std::string> extra_tables_;
  GlobalSecondaryIndex gsi_;
  int index_changes_ = 0;  // indexes created or deleted by UpdateTable steps
  std::map<std::string, TransactWriteRequest> tokens_;  // tokens whose first call succeeded
  int next_token_ = 0;
  std::map<std::string, int> counts_;
};

// 5 seeds x 500 requests by default (4 fixed, 1 fresh); OUTBOX_DIFF_SEED=<seed> reruns one,
// OUTBOX_DIFF_SEEDS=<n> runs n fresh seeds and OUTBOX_DIFF_STEPS=<n> sets the length (`make
// ddb-diff`). Every response must match: the rate is printed, and any difference fails.
TEST(StoreDifferential, EmbeddedAndDynamoDbLocalAgree) {
  std::vector<uint64_t> seeds = {1, 2, 3, 4, std::random_device{}()};
  if (const char* s = std::getenv("OUTBOX_DIFF_SEEDS")) {
    seeds.clear();
    std::random_device rd;
    for (int i = 0, n = std::stoi(s); i < n; ++i) seeds.push_back(rd());
  }
  if (const char* s = std::getenv("OUTBOX_DIFF_SEED")) seeds = {std::stoull(s)};
  int steps = 500;
  if (const char* s = std::getenv("OUTBOX_DIFF_STEPS")) steps = std::stoi(s);
  // OUTBOX_DIFF_TRACE=1: every step's request and both responses on stderr.
  const bool trace = std::getenv("OUTBOX_DIFF_TRACE") != nullptr;
  int64_t compared = 0, identical = 0, errors = 0, index_changes = 0;
  std::map<std::string, int> counts;
  for (uint64_t seed : seeds) {
    SCOPED_TRACE("seed " + std::to_string(seed) +
                 " (rerun: OUTBOX_DIFF_SEED=" + std::to_string(seed) + ")");
    testing_support::TempDir dir;
    sqlite::DatabaseOptions o;
    o.path = dir.file("store.db");
    auto db = sqlite::Database::Open(o);
    ASSERT_TRUE(db.ok()) << db.status();
    ManualClock clock;
    SqliteStoreOptions so;
    so.sweep_interval = absl::ZeroDuration();
    auto embedded = SqliteStore::Open(*db, &clock, so);
    ASSERT_TRUE(embedded.ok()) << embedded.status();
    auto remote = DynamoDbStore::Open(DynamoDbLocalOptions());
    ASSERT_TRUE(remote.ok()) << remote.status();
    TableSpec spec;
    spec.name = "tbl";
    spec.hash_key = {"pk", Type::S};
    spec.range_key = KeyAttribute{"sk", Type::S};
    // Two seeds in three have a GSI (keys only or all), every other one is provisioned.
    const bool index = seed % 3 != 0;
    GlobalSecondaryIndex g;
    g.name = "by-s";
    g.hash_key = {"s", Type::S};
    g.range_key = KeyAttribute{"n", Type::N};
    g.projection = seed % 2 ? ProjectionType::kKeysOnly : ProjectionType::kAll;
    if (seed % 2) {
      spec.provisioned = ProvisionedThroughput{5, 5};
      g.provisioned = ProvisionedThroughput{5, 5};
    }
    if (index) spec.global_secondary_indexes.push_back(g);
    ASSERT_TRUE((*embedded)->CreateTable(spec).ok());
    ASSERT_TRUE((*remote)->CreateTable(spec).ok());
    Differ d(seed, index, g);
    int diffs = 0;
    for (int step = 0; step < steps && diffs < 5; ++step) {
      std::string what;
      auto [x, y] = d.Step(**embedded, **remote, &what);
      ++compared;
      if (y.find("ERROR ") != std::string::npos) ++errors;
      if (trace)
        std::cerr << "step " << step << ": " << what << "\n  embedded: " << x
                  << "\n  dynamodb: " << y << "\n";
      if (WithoutMessages(x) == WithoutMessages(y)) {
        ++identical;
      } else {
        ++diffs;
        ADD_FAILURE() << "step " << step << ": " << what << "\n  embedded: " << x
                      << "\n  dynamodb: " << y;
      }
    }
    index_changes += d.index_changes();
    for (const auto& [k, v] : d.counts()) counts[k] += v;
  }
  std::printf(
      "differential: %lld of %lld responses identical (%.2f %%) over %zu seeds; %lld errors; "
      "%lld indexes created or deleted\n",
      static_cast<long long>(identical), static_cast<long long>(compared),
      compared ? 100.0 * static_cast<double>(identical) / static_cast<double>(compared) : 0.0,
      seeds.size(), static_cast<long long>(errors), static_cast<long long>(index_changes));
  for (const auto& [k, v] : counts) std::printf("  %s: %d\n", k.c_str(), v);
}

}  // namespace
}  // namespace outbox::conformance
