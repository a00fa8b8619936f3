#include "testhooks/test_hooks.h"

#include <atomic>
#include <iterator>
#include <utility>

namespace outbox {
namespace {

// The one TestHooks object of a test program, installed into the library's
// seam the first time a test sets a hook or a mutation.
class Hooks final : public hooks::TestHooks {
 public:
  void CrashPoint(std::string_view point) override { crash::Hit(point); }
  hooks::Mutation mutation() const override { return mutation_.load(); }

  crash::Hook hook;
  std::atomic<bool> hook_installed{false};
  std::atomic<hooks::Mutation> mutation_{hooks::Mutation::kNone};
};

Hooks& TheHooks() {
  static Hooks* h = [] {
    auto* p = new Hooks();  // never destroyed: crash points may run at exit
    hooks::Install(p);
    return p;
  }();
  return *h;
}

constexpr std::string_view kNames[] = {"none", "claim_only_if_absent", "dead_on_first_failure",
                                       "ack_failed_commit"};

}  // namespace

namespace crash {

void SetHook(Hook hook) {
  Hooks& h = TheHooks();
  h.hook_installed = static_cast<bool>(hook);
  h.hook = std::move(hook);
}

bool ShouldCrash(std::string_view point) {
  Hooks& h = TheHooks();
  return h.hook_installed.load() && h.hook(point);
}

void Hit(std::string_view point) {
  if (ShouldCrash(point)) throw SimulatedCrash(point);
}

}  // namespace crash

namespace testing {

void SetMutation(Mutation m) { TheHooks().mutation_ = m; }
Mutation ActiveMutation() { return TheHooks().mutation_.load(); }
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

}  // namespace testing
}  // namespace outbox
