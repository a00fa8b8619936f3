// Bounded, thread-safe cache of parsed expressions keyed by (kind, text).
// Parse errors are not cached. When full the cache is cleared (simple and
// good enough: applications use a small fixed set of expressions).
#include <memory>
#include <mutex>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "expr/ast.h"
#include "util/mutex.h"

namespace outbox::expr {
namespace {

constexpr size_t kMaxEntries = 4096;

// Cache kinds: the five condition kinds, then update/projection/key condition.
enum Slot : char { kUpdateSlot = 16, kProjectionSlot, kKeyConditionSlot };

std::string CacheKey(char slot, std::string_view text) {
  std::string k;
  k.reserve(text.size() + 1);
  k.push_back(slot);
  k.append(text);
  return k;
}

}  // namespace

// util::Mutex (std::mutex underneath), not absl::Mutex: Debian's abseil is not
// built with ThreadSanitizer, so TSan cannot see absl::Mutex's lock and unlock
// and reports every access to `map` as a race (docs/TESTING.md "Sanitizers and
// fuzzing").
struct Cache::Impl {
  util::Mutex mu;
  absl::flat_hash_map<std::string, std::shared_ptr<const void>> map ABSL_GUARDED_BY(mu);

  template <typename T, typename ParseFn>
  absl::StatusOr<std::shared_ptr<const T>> Get(char slot, std::string_view text, ParseFn parse) {
    std::string key = CacheKey(slot, text);
    {
      util::MutexLock l(mu);
      auto it = map.find(key);
      if (it != map.end()) return std::static_pointer_cast<const T>(it->second);
    }
    absl::StatusOr<std::shared_ptr<const T>> parsed = parse();
    if (!parsed.ok()) return parsed.status();
    util::MutexLock l(mu);
    if (map.size() >= kMaxEntries) map.clear();
    map.emplace(std::move(key), std::static_pointer_cast<const void>(*parsed));
    return parsed;
  }
};

Cache& Cache::Global() {
  static Cache* c = new Cache();
  return *c;
}

Cache::Impl* Cache::impl() {
  static Impl* i = new Impl();
  return i;
}

absl::StatusOr<std::shared_ptr<const Condition>> Cache::GetCondition(std::string_view text,
                                                                     Kind kind) {
  return impl()->Get<Condition>(static_cast<char>(kind), text,
                                [&] { return Condition::Parse(text, kind); });
}

absl::StatusOr<std::shared_ptr<const Update>> Cache::GetUpdate(std::string_view text) {
  return impl()->Get<Update>(kUpdateSlot, text, [&] { return Update::Parse(text); });
}

absl::StatusOr<std::shared_ptr<const Projection>> Cache::GetProjection(std::string_view text) {
  return impl()->Get<Projection>(kProjectionSlot, text, [&] { return Projection::Parse(text); });
}

absl::StatusOr<std::shared_ptr<const KeyCondition>> Cache::GetKeyCondition(std::string_view text) {
  return impl()->Get<KeyCondition>(kKeyConditionSlot, text,
                                   [&] { return KeyCondition::Parse(text); });
}

}  // namespace outbox::expr
