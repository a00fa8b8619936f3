#include "cli/queue_cmd.h"

#include <iostream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "fmt/format.h"
#include "nlohmann/json.hpp"
#include "outbox/clock.h"
#include "outbox/queue.h"
#include "queue/sqlite/sqlite_queue.h"
#include "sqlite/database.h"

namespace outbox::cli {
namespace {

struct Common {
  std::string db;
  std::string output = "table";
};

void AddCommon(CLI::App* sub, Common* c) {
  sub->add_option("--db", c->db, "SQLite database file")->required();
  sub->add_option("-o,--output", c->output, "Output format")
      ->check(CLI::IsMember({"json", "table"}))
      ->capture_default_str();
}

[[noreturn]] void Fail(const absl::Status& s) {
  std::cerr << "error: " << std::string(s.message()) << "\n";
  throw CLI::RuntimeError(1);
}

std::unique_ptr<SqliteQueue> OpenQueue(const Common& c) {
  sqlite::DatabaseOptions o;
  o.path = c.db;
  auto db = sqlite::Database::Open(o);
  if (!db.ok()) Fail(db.status());
  auto q = SqliteQueue::Open(*std::move(db), Clock::Real());
  if (!q.ok()) Fail(q.status());
  return *std::move(q);
}

absl::Duration Secs(double s) { return absl::Milliseconds(static_cast<int64_t>(s * 1000)); }
double ToSecs(absl::Duration d) { return absl::ToDoubleSeconds(d); }

nlohmann::json AttrsJson(const QueueAttributes& a) {
  nlohmann::json j = {{"name", a.name},
                      {"fifo", a.options.fifo},
                      {"visible", a.visible},
                      {"in_flight", a.in_flight},
                      {"delayed", a.delayed},
                      {"age_of_oldest_s", ToSecs(a.age_of_oldest)},
                      {"visibility_timeout_s", ToSecs(a.options.visibility_timeout)},
                      {"retention_s", ToSecs(a.options.retention)},
                      {"max_message_size", a.options.max_message_size},
                      {"created_ms", absl::ToUnixMillis(a.created)}};
  if (a.options.redrive) {
    j["redrive"] = {{"dead_letter_queue", a.options.redrive->dead_letter_queue},
                    {"max_receive_count", a.options.redrive->max_receive_count}};
  }
  return j;
}

void AddCreate(CLI::App* q) {
  auto* sub = q->add_subcommand("create", "Create a queue (FIFO names end in .fifo)");
  auto c = std::make_shared<Common>();
  auto name = std::make_shared<std::string>();
  auto o = std::make_shared<QueueOptions>();
  auto vis = std::make_shared<double>(30), ret = std::make_shared<double>(345600),
       delay = std::make_shared<double>(0);
  auto dlq = std::make_shared<std::string>();
  auto max_receive = std::make_shared<int>(10);
  AddCommon(sub, c.get());
  sub->add_option("name", *name, "Queue name")->required();
  sub->add_flag("--fifo", o->fifo, "FIFO queue (default: from the .fifo suffix)");
  sub->add_option("--visibility-timeout", *vis, "Seconds")->capture_default_str();
  sub->add_option("--retention", *ret, "Seconds")->capture_default_str();
  sub->add_option("--delay", *delay, "Seconds")->capture_default_str();
  sub->add_option("--max-message-size", o->max_message_size, "Bytes")->capture_default_str();
  sub->add_flag("--content-based-dedup", o->content_based_dedup,
                "FIFO: dedup id = SHA-256 of the body");
  sub->add_option("--dlq", *dlq, "Dead-letter queue name (enables redrive)");
  sub->add_option("--max-receive-count", *max_receive, "Receives before a message goes to the DLQ")
      ->capture_default_str();
  sub->callback([=] {
    QueueOptions opts = *o;
    if (name->size() > 5 && name->substr(name->size() - 5) == ".fifo") opts.fifo = true;
    opts.visibility_timeout = Secs(*vis);
    opts.retention = Secs(*ret);
    opts.delay = Secs(*delay);
    if (!dlq->empty()) opts.redrive = RedrivePolicy{*dlq, *max_receive};
    auto queue = OpenQueue(*c);
    if (auto s = queue->CreateQueue(*name, opts); !s.ok()) Fail(s);
    auto a = queue->GetAttributes(*name);
    if (!a.ok()) Fail(a.status());
    if (c->output == "json") {
      std::cout << AttrsJson(*a).dump() << "\n";
    } else {
      std::cout << "created " << *name << (opts.fifo ? " (FIFO)" : " (standard)") << "\n";
    }
  });
}

void AddSend(CLI::App* q) {
  auto* sub = q->add_subcommand("send", "Send a message");
  auto c = std::make_shared<Common>();
  auto name = std::make_shared<std::string>();
  auto m = std::make_shared<SendMessageRequest>();
  auto delay = std::make_shared<double>(-1);
  AddCommon(sub, c.get());
  sub->add_option("queue", *name, "Queue name")->required();
  sub->add_option("body", m->body, "Message body; \"-\" reads standard input")->required();
  sub->add_option("-g,--group", m->group_id, "MessageGroupId (FIFO)");
  sub->add_option("-d,--dedup", m->dedup_id, "MessageDeduplicationId (FIFO)");
  sub->add_option("--delay", *delay, "Seconds (standard queues)");
  sub->callback([=] {
    SendMessageRequest req = *m;
    if (req.body == "-") req.body.assign(std::istreambuf_iterator<char>(std::cin), {});
    if (*delay >= 0) req.delay = Secs(*delay);
    auto queue = OpenQueue(*c);
    auto r = queue->Send(*name, req);
    if (!r.ok()) Fail(r.status());
    if (c->output == "json") {
      std::cout << nlohmann::json{{"message_id", r->message_id},
                                  {"sequence_number", r->sequence_number},
                                  {"duplicate", r->duplicate}}
                       .dump()
                << "\n";
    } else {
      std::cout << r->message_id << (r->sequence_number.empty() ? "" : " seq " + r->sequence_number)
                << (r->duplicate ? " (duplicate)" : "") << "\n";
    }
  });
}

void AddReceive(CLI::App* q) {
  auto* sub = q->add_subcommand("receive", "Receive messages (and optionally delete them)");
  auto c = std::make_shared<Common>();
  auto name = std::make_shared<std::string>();
  auto n = std::make_shared<int>(1);
  auto wait = std::make_shared<double>(0);
  auto vis = std::make_shared<double>(-1);
  auto del = std::make_shared<bool>(false);
  AddCommon(sub, c.get());
  sub->add_option("queue", *name, "Queue name")->required();
  sub->add_option("-n,--max", *n, "Messages, 1..10")->capture_default_str();
  sub->add_option("--wait", *wait, "Long-poll seconds, 0..20")->capture_default_str();
  sub->add_option("--visibility-timeout", *vis, "Seconds (default: the queue's)");
  sub->add_flag("--delete", *del, "Delete the received messages");
  sub->callback([=] {
    ReceiveOptions ro;
    ro.max_messages = *n;
    ro.wait_time = Secs(*wait);
    if (*vis >= 0) ro.visibility_timeout = Secs(*vis);
    if (auto s = ro.Validate(); !s.ok()) {
      std::cerr << "error: " << std::string(s.message()) << "\n";
      throw CLI::RuntimeError(2);
    }
    auto queue = OpenQueue(*c);
    auto got = queue->Receive(*name, ro);
    if (!got.ok()) Fail(got.status());
    nlohmann::json arr = nlohmann::json::array();
    for (const auto& m : *got) {
      if (*del) {
        if (auto s = queue->Delete(*name, m.receipt_handle); !s.ok()) Fail(s);
      }
      if (c->output == "json") {
        arr.push_back({{"message_id", m.message_id},
                       {"body", m.body},
                       {"receipt_handle", m.receipt_handle},
                       {"receive_count", m.receive_count},
                       {"sent_ms", absl::ToUnixMillis(m.sent_time)},
                       {"first_receive_ms", absl::ToUnixMillis(m.first_receive_time)},
                       {"group_id", m.group_id},
                       {"dedup_id", m.dedup_id},
                       {"sequence_number", m.sequence_number}});
      } else {
        std::cout << fmt::format("{}  count={}  group={}  {}\n", m.message_id, m.receive_count,
                                 m.group_id.empty() ? "-" : m.group_id, m.body);
      }
    }
    if (c->output == "json") std::cout << arr.dump() << "\n";
  });
}

void AddStats(CLI::App* q) {
  auto* sub = q->add_subcommand("stats", "Queue depth, in flight, delayed, age of oldest");
  auto c = std::make_shared<Common>();
  auto names = std::make_shared<std::vector<std::string>>();
  AddCommon(sub, c.get());
  sub->add_option("queue", *names, "Queue names (default: all)");
  sub->callback([=] {
    auto queue = OpenQueue(*c);
    std::vector<std::string> list = *names;
    if (list.empty()) {
      auto all = queue->ListQueues("");
      if (!all.ok()) Fail(all.status());
      list = *all;
    }
    nlohmann::json arr = nlohmann::json::array();
    if (c->output == "table") {
      std::cout << fmt::format("{:<40} {:>10} {:>10} {:>10} {:>12}\n", "QUEUE", "VISIBLE",
                               "IN_FLIGHT", "DELAYED", "OLDEST_S");
    }
    for (const auto& n : list) {
      auto a = queue->GetAttributes(n);
      if (!a.ok()) Fail(a.status());
      if (c->output == "json") {
        arr.push_back(AttrsJson(*a));
      } else {
        std::cout << fmt::format("{:<40} {:>10} {:>10} {:>10} {:>12.0f}\n", a->name, a->visible,
                                 a->in_flight, a->delayed, ToSecs(a->age_of_oldest));
      }
    }
    if (c->output == "json") std::cout << arr.dump() << "\n";
  });
}

void AddMove(CLI::App* q) {
  auto* sub = q->add_subcommand(
      "move", "Move messages from a dead-letter queue back to their source queue");
  auto c = std::make_shared<Common>();
  auto dlq = std::make_shared<std::string>();
  auto o = std::make_shared<MoveOptions>();
  AddCommon(sub, c.get());
  sub->add_option("dlq", *dlq, "Dead-letter queue name")->required();
  sub->add_option("--to", o->destination, "Destination queue (default: each message's source)");
  sub->add_option("--id", o->message_ids, "Only these message ids (repeatable)");
  sub->add_option("--max", o->max_messages, "At most this many (0 = all)")->capture_default_str();
  sub->add_option("--rate", o->max_per_second, "Messages per second (0 = unlimited)")
      ->capture_default_str();
  sub->callback([=] {
    if (auto s = o->Validate(); !s.ok()) {
      std::cerr << "error: " << std::string(s.message()) << "\n";
      throw CLI::RuntimeError(2);
    }
    auto queue = OpenQueue(*c);
    auto r = queue->MoveMessages(*dlq, *o);
    if (!r.ok()) Fail(r.status());
    if (c->output == "json") {
      std::cout << nlohmann::json{{"moved", r->moved}, {"failed", r->failed}}.dump() << "\n";
    } else {
      std::cout << "moved " << r->moved << ", failed " << r->failed << "\n";
    }
    if (r->failed > 0) throw CLI::RuntimeError(1);
  });
}

}  // namespace

void AddQueueCommands(CLI::App& app) {
  auto* q = app.add_subcommand("queue", "Embedded SQS-style queues");
  q->require_subcommand(1);
  AddCreate(q);
  AddSend(q);
  AddReceive(q);
  AddStats(q);
  AddMove(q);
}

}  // namespace outbox::cli
