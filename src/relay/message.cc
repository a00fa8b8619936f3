#include "relay/message.h"

#include <string_view>

#include "fmt/format.h"
#include "outbox/envelope_codec.h"

namespace outbox::relay_internal {

bool EventRowTenant(const Item& keys, std::string* tenant) {
  auto it = keys.find("pk");
  if (it == keys.end() || !it->second.is(Type::S)) return false;
  const std::string& pk = it->second.s();
  constexpr std::string_view kPrefix = "TENANT#", kSuffix = "#EVENT";
  if (pk.size() <= kPrefix.size() + kSuffix.size() || pk.compare(0, kPrefix.size(), kPrefix) != 0 ||
      pk.compare(pk.size() - kSuffix.size(), kSuffix.size(), kSuffix) != 0) {
    return false;
  }
  *tenant = pk.substr(kPrefix.size(), pk.size() - kPrefix.size() - kSuffix.size());
  return true;
}

PlannedEvent PlanEventMessage(const Item* image, const std::string& key_tenant,
                              int64_t max_message_size) {
  PlannedEvent p;
  if (image == nullptr) {
    p.poison_reason = "INSERT record without a new image";
    return p;
  }
  auto env = EnvelopeFromItem(*image);
  if (!env.ok()) {
    p.poison_reason = fmt::format("malformed event image: {}", std::string(env.status().message()));
    return p;
  }
  if (env->tenant != key_tenant) {
    p.poison_reason = fmt::format("event tenant \"{}\" does not match its key tenant \"{}\"",
                                  env->tenant, key_tenant);
    return p;
  }
  p.body = EventMessageBody(*image);
  if (static_cast<int64_t>(p.body.size()) > max_message_size) {
    p.poison_reason =
        fmt::format("message of {} bytes exceeds the queue's maximum message size of {} bytes",
                    p.body.size(), max_message_size);
    p.body.clear();
    return p;
  }
  p.tenant = key_tenant;
  p.event_id = env->id;
  p.seq = env->seq;
  p.envelope = *std::move(env);
  return p;
}

}  // namespace outbox::relay_internal
