// The subscription registry: which subscriptions of a lane an event reaches.
//
// Thread-safety: Add is for setup and not synchronized; once setup is done,
// Match/Find/All may be called concurrently (they only read).
#pragma once

#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "outbox/envelope.h"
#include "outbox/event_pattern.h"
#include "outbox/subscription.h"

namespace outbox::routing {

class Router {
 public:
  Router() = default;
  Router(const Router&) = delete;
  Router& operator=(const Router&) = delete;

  // InvalidArgument for an empty name or glob or an invalid pattern (the
  // pattern is compiled here, once); AlreadyExists for a duplicate name.
  absl::Status Add(Subscription sub);

  // Subscriptions on `lane` whose glob matches the event type and whose
  // pattern (if any) matches EnvelopeToPatternJson(event), in the order added.
  // The pointers stay valid for the router's lifetime.
  std::vector<const Subscription*> Match(const Envelope& event, Lane lane) const;

  const Subscription* Find(std::string_view name) const;  // nullptr if absent
  std::vector<const Subscription*> All() const;
  size_t size() const { return entries_.size(); }

 private:
  struct Entry {
    Subscription sub;
    std::optional<EventPattern> pattern;
  };
  std::vector<std::unique_ptr<Entry>> entries_;
};

}  // namespace outbox::routing
