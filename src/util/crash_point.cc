#include "util/crash_point.h"

#include <iterator>
#include <utility>

// Test builds only (OUTBOX_CRASH_POINTS): a release library has no hook, no
// mutation switch and no symbol of either (tests/package/run checks).
#ifdef OUTBOX_CRASH_POINTS

namespace outbox::crash {
namespace {
Hook& TheHook() {
  static Hook hook;
  return hook;
}
std::atomic<bool> g_installed{false};
}  // namespace

void SetHook(Hook hook) {
  g_installed = static_cast<bool>(hook);
  TheHook() = std::move(hook);
}

bool ShouldCrash(std::string_view point) { return g_installed.load() && TheHook()(point); }

void Hit(std::string_view point) {
  if (ShouldCrash(point)) throw SimulatedCrash(point);
}

}  // namespace outbox::crash

namespace outbox::testing {
namespace {
std::atomic<Mutation> g_mutation{Mutation::kNone};
constexpr std::string_view kNames[] = {"none", "claim_only_if_absent", "dead_on_first_failure",
                                       "ack_failed_commit"};
}  // namespace

void SetMutation(Mutation m) { g_mutation = m; }
Mutation ActiveMutation() { return g_mutation.load(); }
std::string_view MutationName(Mutation m) { return kNames[static_cast<int>(m)]; }
bool ParseMutation(std::string_view s, Mutation* out) {
  for (int i = 0; i < static_cast<int>(std::size(kNames)); ++i) {
    if (kNames[i] == s) {
      *out = static_cast<Mutation>(i);
      return true;
    }
  }
  return false;
}

}  // namespace outbox::testing

#endif  // OUTBOX_CRASH_POINTS
