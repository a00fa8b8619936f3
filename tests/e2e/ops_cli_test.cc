// The operator's runbook with the CLI alone (docs/OPERATIONS.md): a handler
// dead-letters events; find the dead letter, read why it died, redrive it
// after the fix, and see it complete. Real processes (OUTBOX_BIN) on one
// SQLite file.
#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "support/command.h"

namespace {

using outbox::testing_support::CmdResult;

CmdResult Outbox(const std::string& args) { return outbox::testing_support::RunOutbox(args); }

nlohmann::json Json(const CmdResult& r) {
  nlohmann::json j = nlohmann::json::parse(r.out, nullptr, false);
  EXPECT_FALSE(j.is_discarded()) << r.out;
  return j;
}

class OpsCli : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/outbox-ops-cli-XXXXXX";
    dir_ = mkdtemp(tmpl);
    db_ = dir_ + "/o.db";
    config_ = dir_ + "/outbox.toml";
    std::ofstream(config_) << outbox::testing_support::kOrderPlacedConfig;
  }
  void TearDown() override { (void)std::system(("rm -rf " + dir_).c_str()); }
  std::string Db() const { return " --db " + db_; }
  std::string dir_, db_, config_;
};

TEST_F(OpsCli, FindReadRedriveAndSeeItComplete) {
  ASSERT_EQ(Outbox("emit" + Db() + " --tenant t1 --type order.placed").code, 0);
  ASSERT_EQ(Outbox("emit" + Db() + " --tenant t1 --type order.placed").code, 0);
  ASSERT_EQ(Outbox("relay" + Db() + " --once").code, 0);
  // The bug: the handler fails terminally.
  ASSERT_EQ(Outbox("worker" + Db() + " --config " + config_ +
                   " --once --handler notify-buyer=fail-terminal")
                .code,
            0);

  // status says something is wrong.
  CmdResult st = Outbox("status" + Db() + " --config " + config_ + " -o json");
  EXPECT_EQ(st.code, 1) << st.out;
  nlohmann::json sj = Json(st);
  EXPECT_EQ(sj["dead_letters"], 2);
  EXPECT_EQ(sj["healthy"], false);
  EXPECT_EQ(sj["chain_intact"], true);
  ASSERT_EQ(sj["inbox"].size(), 1u);
  EXPECT_EQ(sj["inbox"][0]["dead"], 2);

  // Find the dead letters.
  CmdResult list = Outbox("dead-letters list" + Db() + " -o json");
  ASSERT_EQ(list.code, 0);
  nlohmann::json lj = Json(list);
  ASSERT_EQ(lj.size(), 2u);
  const std::string id = lj[0]["id"];
  const std::string event_id = lj[0]["event_id"];
  EXPECT_EQ(lj[0]["subscription"], "notify-buyer");
  CmdResult count = Outbox("dead-letters count" + Db());
  EXPECT_EQ(count.code, 0);
  EXPECT_EQ(count.out, "2\n");
  CmdResult table = Outbox("dead-letters list" + Db());
  EXPECT_NE(table.out.find(id), std::string::npos) << table.out;

  // Read why it died.
  CmdResult show = Outbox("dead-letters show " + id + Db() + " -o json");
  ASSERT_EQ(show.code, 0) << show.out;
  nlohmann::json dj = Json(show);
  EXPECT_NE(dj["error"].get<std::string>().find("fail-terminal handler of notify-buyer"),
            std::string::npos)
      << dj;
  EXPECT_EQ(dj["terminal"], true);
  EXPECT_EQ(dj["inbox"]["status"], "DEAD");
  EXPECT_EQ(dj["envelope"]["id"], event_id);

  // Redrive needs a selection (or --all); the dry run changes nothing.
  EXPECT_EQ(Outbox("redrive" + Db()).code, 2);
  CmdResult dry = Outbox("redrive --all --dry-run" + Db() + " -o json");
  ASSERT_EQ(dry.code, 0);
  EXPECT_EQ(Json(dry)["selected"], 2);
  EXPECT_EQ(Json(dry)["reset"], 0);
  EXPECT_EQ(Outbox("dead-letters count" + Db()).out, "2\n");

  // The fix is deployed (the log handler); redrive one event.
  CmdResult rd = Outbox("redrive --event-id " + event_id + Db() + " -o json");
  ASSERT_EQ(rd.code, 0) << rd.out;
  nlohmann::json rj = Json(rd);
  EXPECT_EQ(rj["reset"], 1);
  EXPECT_EQ(rj["from_log"], 1);
  CmdResult w = Outbox("worker" + Db() + " --config " + config_ + " --once");
  ASSERT_EQ(w.code, 0);

  // See it complete.
  CmdResult in = Outbox("inbox show " + event_id + ":notify-buyer" + Db() + " -o json");
  ASSERT_EQ(in.code, 0) << in.out;
  nlohmann::json ij = Json(in);
  EXPECT_EQ(ij["status"], "COMPLETED");
  EXPECT_EQ(ij["redrives"], 1);
  EXPECT_EQ(ij["history"][0]["status"], "DEAD");
  nlohmann::json after = Json(Outbox("dead-letters show " + id + Db() + " -o json"));
  EXPECT_EQ(after["state"], "REDRIVEN");
  EXPECT_EQ(after["inbox"]["status"], "COMPLETED");
  EXPECT_EQ(Outbox("dead-letters count" + Db()).out, "1\n");
  EXPECT_EQ(Outbox("dead-letters count --state redriven" + Db()).out, "1\n");

  // Replay of the range: the completed row skips, the dead one is left to redrive.
  CmdResult rp = Outbox("replay --tenant t1 --subscription notify-buyer --config " + config_ +
                        Db() + " -o json");
  ASSERT_EQ(rp.code, 0) << rp.out;
  nlohmann::json pj = Json(rp);
  EXPECT_EQ(pj["events"], 2);
  EXPECT_EQ(pj["skipped_completed"], 1);
  EXPECT_EQ(pj["dead"], 1);
  EXPECT_EQ(pj["enqueued"], 0);

  // Redrive the rest; then everything is healthy.
  ASSERT_EQ(Outbox("redrive --all" + Db()).code, 0);
  ASSERT_EQ(Outbox("worker" + Db() + " --config " + config_ + " --once").code, 0);
  CmdResult healthy = Outbox("status" + Db() + " --config " + config_ + " -o json");
  EXPECT_EQ(healthy.code, 0) << healthy.out;
  EXPECT_EQ(Json(healthy)["inbox"][0]["completed"], 2);
  EXPECT_EQ(Json(Outbox("poison list" + Db() + " -o json")).size(), 0u);
}

// Consumer queues (docs/ROUTING.md §6a): --queue selects what is routed to it. Two
// subscriptions die on the same event, one on the event queue, one on shipping.fifo;
// dead-letters and redrive --queue shipping.fifo touch only ship's letter and send it to
// shipping.fifo, where the shipping worker completes it; replay --queue backfills only there.
TEST_F(OpsCli, QueueSelectsDeadLettersRedriveAndReplayOfAConsumerQueue) {
  std::ofstream(config_) << outbox::testing_support::kOrderPlacedConfig
                         << "\n[[subscriptions]]\nname = \"ship\"\nglob = \"order.*\"\n"
                            "lane = \"DURABLE\"\nqueue = \"shipping.fifo\"\n\n"
                            "[[queues]]\nname = \"shipping.fifo\"\n";
  const std::string cfg = " --config " + config_;
  // The same config gives the AWS template its queue, DLQ and alarm (deploy/aws/README.md).
  CmdResult tpl = Outbox("deploy aws-template" + cfg);
  ASSERT_EQ(tpl.code, 0);
  nlohmann::json tj = Json(tpl);
  EXPECT_EQ(tj["Resources"]["ConsumerQueueShipping"]["Properties"]["QueueName"], "shipping.fifo");
  EXPECT_TRUE(tj["Resources"].contains("ConsumerQueueShippingDlqAlarm"));
  // ... and, for UsePipe=true, the managed fan-out: bus, a rule and a Pipe per queue in use.
  for (const char* id : {"EventBus", "ConsumerQueueShippingRule", "ConsumerQueueShippingPipe",
                         "EventQueueRule", "EventQueuePipe"}) {
    EXPECT_TRUE(tj["Resources"].contains(id)) << id;
  }
  EXPECT_FALSE(tj.contains("Rules")) << "UsePipe=true is not refused";
  ASSERT_EQ(Outbox("emit" + Db() + " --tenant t1 --type order.placed").code, 0);
  ASSERT_EQ(Outbox("relay" + Db() + cfg + " --once").code, 0);
  ASSERT_EQ(Outbox("worker" + Db() + cfg + " --once --handler notify-buyer=fail-terminal").code, 0);
  ASSERT_EQ(
      Outbox("worker" + Db() + cfg + " --queue shipping.fifo --once --handler ship=fail-terminal")
          .code,
      0);
  EXPECT_EQ(Outbox("dead-letters count" + Db()).out, "2\n");

  CmdResult list = Outbox("dead-letters list --queue shipping.fifo" + Db() + cfg + " -o json");
  ASSERT_EQ(list.code, 0) << list.out;
  nlohmann::json lj = Json(list);
  ASSERT_EQ(lj.size(), 1u) << lj;
  EXPECT_EQ(lj[0]["subscription"], "ship");
  EXPECT_EQ(lj[0]["queue"], "shipping.fifo");
  const std::string event_id = lj[0]["event_id"];
  // Without --config the letter's own queue (the one it died on) selects it.
  EXPECT_EQ(Outbox("dead-letters count --queue shipping.fifo" + Db()).out, "1\n");
  EXPECT_EQ(Outbox("dead-letters count --queue outbox-events.fifo" + Db() + cfg).out, "1\n");

  CmdResult rd = Outbox("redrive --queue shipping.fifo" + Db() + cfg + " -o json");
  ASSERT_EQ(rd.code, 0) << rd.out;
  EXPECT_EQ(Json(rd)["reset"], 1);
  EXPECT_EQ(Outbox("dead-letters count" + Db()).out, "1\n");  // notify-buyer's is still DEAD
  // The shipping worker runs the redriven message; the event queue has nothing for it.
  ASSERT_EQ(Outbox("worker" + Db() + cfg + " --once").code, 0);
  CmdResult in = Outbox("inbox show " + event_id + ":ship" + Db() + " -o json");
  EXPECT_EQ(Json(in)["status"], "RETRY") << in.out;
  ASSERT_EQ(Outbox("worker" + Db() + cfg + " --queue shipping.fifo --once").code, 0);
  in = Outbox("inbox show " + event_id + ":ship" + Db() + " -o json");
  EXPECT_EQ(Json(in)["status"], "COMPLETED") << in.out;
  in = Outbox("inbox show " + event_id + ":notify-buyer" + Db() + " -o json");
  EXPECT_EQ(Json(in)["status"], "DEAD") << in.out;

  // replay --queue alone: every subscription routed there (ship), completed rows skip.
  CmdResult rp =
      Outbox("replay --tenant t1 --queue shipping.fifo --force" + cfg + Db() + " -o json");
  ASSERT_EQ(rp.code, 0) << rp.out;
  EXPECT_EQ(Json(rp)["reset_completed"], 1);
  EXPECT_EQ(Json(rp)["enqueued"], 1);
  ASSERT_EQ(Outbox("worker" + Db() + cfg + " --queue shipping.fifo --once").code, 0);
  in = Outbox("inbox show " + event_id + ":ship" + Db() + " -o json");
  EXPECT_EQ(Json(in)["status"], "COMPLETED") << in.out;
  // A subscription routed elsewhere, and a queue nothing is routed to, are refused.
  CmdResult bad = outbox::testing_support::RunOutbox(
      "replay --tenant t1 --queue shipping.fifo --subscription notify-buyer" + cfg + Db(),
      outbox::testing_support::Stderr::kMerge);
  EXPECT_EQ(bad.code, 2) << bad.out;
  EXPECT_NE(bad.out.find("subscription notify-buyer: routed to queue outbox-events.fifo, not "
                         "shipping.fifo"),
            std::string::npos)
      << bad.out;
  bad = outbox::testing_support::RunOutbox("replay --tenant t1 --queue nobody.fifo" + cfg + Db(),
                                           outbox::testing_support::Stderr::kMerge);
  EXPECT_EQ(bad.code, 2) << bad.out;
  EXPECT_NE(bad.out.find("queue nobody.fifo: no such queue"), std::string::npos) << bad.out;
}

// A worker started before the relay creates its consumer queue as [[queues]] declares it
// (visibility, max receive count, DLQ), not with the event queue's defaults.
TEST_F(OpsCli, AWorkerCreatesItsConsumerQueueAsDeclared) {
  std::ofstream(config_)
      << outbox::testing_support::kOrderPlacedConfig
      << "\n[[subscriptions]]\nname = \"ship\"\nglob = \"order.*\"\n"
         "lane = \"DURABLE\"\nqueue = \"shipping.fifo\"\n\n"
         "[[queues]]\nname = \"shipping.fifo\"\nvisibility_timeout_seconds = 40\n"
         "max_receive_count = 3\ndlq = \"ship-dead.fifo\"\n";
  ASSERT_EQ(Outbox("worker" + Db() + " --config " + config_ + " --queue shipping.fifo --once").code,
            0);
  CmdResult st = Outbox("queue stats shipping.fifo" + Db() + " -o json");
  ASSERT_EQ(st.code, 0) << st.out;
  nlohmann::json q = Json(st)[0];
  EXPECT_EQ(q["visibility_timeout_s"], 40) << q;  // the event queue's default: 30
  EXPECT_EQ(q["redrive"]["dead_letter_queue"], "ship-dead.fifo") << q;
  EXPECT_EQ(q["redrive"]["max_receive_count"], 3) << q;
}

// [queue].name of --config is the event queue of every command, as it is of `outbox serve`:
// the relay forwards there, the worker receives there, status reports it. --queue still wins.
TEST_F(OpsCli, TheConfigsEventQueueIsTheDefaultOfRelayWorkerAndStatus) {
  std::ofstream(config_) << "[queue]\nname = \"orders.fifo\"\n\n"
                         << outbox::testing_support::kOrderPlacedConfig;
  const std::string cfg = " --config " + config_;
  ASSERT_EQ(Outbox("emit" + Db() + " --tenant t1 --type order.placed").code, 0);
  ASSERT_EQ(Outbox("relay" + Db() + cfg + " --once").code, 0);
  CmdResult st = Outbox("status" + Db() + cfg + " -o json");
  nlohmann::json sj = Json(st);
  EXPECT_EQ(sj["queue"]["name"], "orders.fifo") << st.out;
  EXPECT_EQ(sj["queue"]["visible"], 1) << st.out;
  EXPECT_EQ(sj["dlq"]["name"], "orders-dlq.fifo") << st.out;
  ASSERT_EQ(Outbox("worker" + Db() + cfg + " --once").code, 0);
  st = Outbox("status" + Db() + cfg + " -o json");
  sj = Json(st);
  EXPECT_EQ(sj["queue"]["visible"], 0) << st.out;
  EXPECT_EQ(sj["inbox"][0]["completed"], 1) << st.out;
  EXPECT_EQ(st.code, 0) << st.out;
  // Nothing went to the built-in default.
  CmdResult other = Outbox("status" + Db() + " -o json");
  EXPECT_EQ(Json(other)["queue"]["name"], "outbox-events.fifo");
  EXPECT_EQ(Json(other)["queue"]["exists"], false) << other.out;
  // --queue wins over the config.
  ASSERT_EQ(Outbox("emit" + Db() + " --tenant t1 --type order.placed").code, 0);
  ASSERT_EQ(Outbox("relay" + Db() + cfg + " --queue other.fifo --once").code, 0);
  st = Outbox("status" + Db() + cfg + " --queue other.fifo -o json");
  EXPECT_EQ(Json(st)["queue"]["name"], "other.fifo") << st.out;
  EXPECT_EQ(Json(st)["queue"]["visible"], 1) << st.out;
}

// Retention as a user runs it: remove what is settled behind an anchor,
// archive it, and check both the log and the archive afterwards.
TEST_F(OpsCli, RetentionArchivesAndTheChainAndTheArchiveStillVerify) {
  for (int i = 0; i < 3; ++i)
    ASSERT_EQ(Outbox("emit" + Db() + " --tenant t1 --type order.placed").code, 0);
  ASSERT_EQ(Outbox("relay" + Db() + " --once").code, 0);
  ASSERT_EQ(Outbox("worker" + Db() + " --config " + config_ + " --once").code, 0);
  // A fourth event nobody has run yet: not settled, so kept.
  ASSERT_EQ(Outbox("emit" + Db() + " --tenant t1 --type order.placed").code, 0);

  // No --config, or no window: refused, nothing removed.
  EXPECT_EQ(Outbox("retention" + Db() + " --days 0").code, 2);
  CmdResult nowin = outbox::testing_support::RunOutbox("retention" + Db() + " --config " + config_,
                                                       outbox::testing_support::Stderr::kMerge);
  EXPECT_EQ(nowin.code, 2);
  EXPECT_NE(nowin.out.find("retention.events_days"), std::string::npos) << nowin.out;

  const std::string archives = dir_ + "/archive";
  CmdResult dry =
      Outbox("retention" + Db() + " --config " + config_ + " --days 0 --dry-run -o json");
  ASSERT_EQ(dry.code, 0) << dry.out;
  EXPECT_EQ(Json(dry)["removed"], 3);
  CmdResult r = Outbox("retention" + Db() + " --config " + config_ + " --days 0 --archive-dir " +
                       archives + " -o json");
  ASSERT_EQ(r.code, 0) << r.out;
  nlohmann::json rj = Json(r);
  ASSERT_EQ(rj["tenants"].size(), 1u);
  EXPECT_EQ(rj["tenants"][0]["removed"], 3);
  EXPECT_EQ(rj["tenants"][0]["anchor_seq"], 3);
  EXPECT_EQ(rj["tenants"][0]["kept_from"], 4);
  EXPECT_NE(rj["tenants"][0]["kept_because"].get<std::string>().find("no inbox row"),
            std::string::npos);
  const std::string file = rj["tenants"][0]["archive"];

  CmdResult v = Outbox("verify-chain" + Db() + " --tenant t1");
  EXPECT_EQ(v.code, 0) << v.out;
  EXPECT_NE(v.out.find("events 1..3 removed by retention"), std::string::npos) << v.out;
  CmdResult va = Outbox("verify-archive " + file + Db());
  EXPECT_EQ(va.code, 0) << va.out;
  EXPECT_NE(va.out.find("links to the retained log"), std::string::npos) << va.out;
  CmdResult log = Outbox("log" + Db() + " --tenant t1 -o json");
  ASSERT_EQ(log.code, 0);
  const nlohmann::json first = nlohmann::json::parse(log.out.substr(0, log.out.find('\n')));
  EXPECT_EQ(first["seq"], 4) << log.out;  // the log starts after the anchor
  EXPECT_EQ(std::count(log.out.begin(), log.out.end(), '\n'), 1) << log.out;

  // The rest of the log, archived on demand, verifies on its own.
  const std::string rest = dir_ + "/rest.jsonl";
  ASSERT_EQ(Outbox("archive" + Db() + " --tenant t1 --to " + rest).code, 0);
  EXPECT_EQ(Outbox("verify-archive " + rest).code, 0);

  // An edited archive line is found.
  std::ifstream in(file);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  in.close();
  const size_t at = text.find("order.placed", text.find('\n'));
  ASSERT_NE(at, std::string::npos);
  text.replace(at, 12, "order.paid!!");
  std::ofstream(file, std::ios::trunc) << text;
  CmdResult broken = Outbox("verify-archive " + file);
  EXPECT_EQ(broken.code, 1);
  EXPECT_NE(broken.out.find("BROKEN at line 2"), std::string::npos) << broken.out;
}

TEST_F(OpsCli, ExitCodesAndHelp) {
  for (const char* cmd : {"status", "dead-letters list", "dead-letters show", "dead-letters count",
                          "poison list", "redrive", "replay", "inbox show"}) {
    CmdResult h = Outbox(std::string(cmd) + " --help");
    EXPECT_EQ(h.code, 0) << cmd;
    EXPECT_NE(h.out.find("--db"), std::string::npos) << cmd;
  }
  EXPECT_EQ(Outbox("status --db " + dir_ + "/missing.db").code, 3);
  ASSERT_EQ(Outbox("emit" + Db() + " --tenant t1 --type order.placed").code, 0);
  EXPECT_EQ(Outbox("dead-letters show nope:x" + Db()).code, 1);
  EXPECT_EQ(Outbox("dead-letters show bad" + Db()).code, 2);
  EXPECT_EQ(Outbox("dead-letters list --since yesterday" + Db()).code, 2);
  EXPECT_EQ(Outbox("inbox show nope:x" + Db()).code, 1);
  EXPECT_EQ(Outbox("replay --tenant t1 --subscription x" + Db()).code, 2);  // no --config
  EXPECT_EQ(Outbox("replay --tenant t1 --subscription x --config " + config_ + Db()).code, 2);
  EXPECT_EQ(
      Outbox("worker" + Db() + " --config " + config_ + " --once --handler notify-buyer=explode")
          .code,
      2);
  CmdResult st = Outbox("status" + Db() + " -o json");
  EXPECT_EQ(st.code, 0) << st.out;  // one event, nothing dead
  EXPECT_EQ(Json(st)["events"], 1);
}

}  // namespace
