// idem-broker-demo, run as the binary it is (its first consumer is a
// separate process of the same binary, SIGKILLed mid-stream), against a
// private server it starts (--start_server) for each broker built: it
// passes its checks and reports them as JSON; the deliberately broken
// variant, whose killed consumer acknowledges on receipt, loses payments
// and the demo says so with exit code 1. And a server that cannot be
// reached is exit code 3.

#include <sys/wait.h>

#include <iostream>
#include <string>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "servers/server_process.h"
#include "tests/brokers/server_suite.h"
#include "tests/testing/run_shell.h"
#include "util/temp_dir.h"

namespace idem {
namespace {

using ::idem::test::RunShell;

struct DemoRun {
  int exit_code = -1;
  nlohmann::json report;
  std::string out;
};

// Runs the demo on `broker` with a private server and `flags`; its stderr
// goes to `dir`/stderr.
DemoRun RunDemo(const std::string& broker, const std::string& flags,
                const util::TempDir& dir) {
  int status = 0;
  DemoRun run;
  run.out = RunShell(std::string(IDEM_BROKER_DEMO) + " --broker=" + broker +
                         " --start_server --messages=1500 --json " + flags +
                         " 2>>" + dir.Sub("stderr"),
                     &status);
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  run.report = nlohmann::json::parse(run.out, /*cb=*/nullptr,
                                     /*allow_exceptions=*/false);
  return run;
}

// Whether the test should be skipped (saying why) as the server could not
// start (exit code 3); under CI (CI=true) it runs on and fails.
bool SkipWithoutServer(const std::string& broker, const DemoRun& run,
                       const util::TempDir& dir) {
  if (run.exit_code != 3 || test::UnderCi()) return false;
  std::cerr << broker << " server did not start (under CI=true this fails); "
            << "see " << dir.Sub("stderr") << "\n";
  return true;
}

void ExpectPassesThroughACrash(const std::string& broker) {
  util::TempDir dir;
  const DemoRun run = RunDemo(broker, "", dir);
  if (SkipWithoutServer(broker, run, dir)) GTEST_SKIP();
  ASSERT_EQ(run.exit_code, 0) << run.out;
  ASSERT_TRUE(run.report.is_object()) << run.out;
  const nlohmann::json& r = run.report;
  EXPECT_EQ(r.at("passed"), true);
  const int64_t unique = r.at("unique_payments");
  EXPECT_GT(r.at("producer_duplicates").get<int64_t>(), 0);
  // Killed in mid-stream: after some payments, before the end.
  EXPECT_GT(r.at("applied_before_kill").get<int64_t>(), 0) << run.out;
  EXPECT_LT(r.at("applied_before_kill").get<int64_t>(), unique) << run.out;
  EXPECT_EQ(r.at("applied"), unique);
  // The new consumer got what the dead one held again, and found the
  // producer's duplicates.
  const nlohmann::json& takeover = r.at("takeover");
  EXPECT_GT(takeover.at("redelivered").get<int64_t>(), 0) << run.out;
  EXPECT_GT(takeover.at("duplicates").get<int64_t>(), 0) << run.out;
  EXPECT_EQ(takeover.at("acked"), takeover.at("received"));
  EXPECT_EQ(r.at("balances").at("mismatched_accounts"), 0);
  EXPECT_EQ(r.at("balances").at("actual_total"),
            r.at("balances").at("expected_total"));
}

void ExpectAckOnReceiveFails(const std::string& broker) {
  util::TempDir dir;
  const DemoRun run = RunDemo(broker, "--worker_ack_on_receive", dir);
  if (SkipWithoutServer(broker, run, dir)) GTEST_SKIP();
  ASSERT_EQ(run.exit_code, 1) << run.out;
  ASSERT_TRUE(run.report.is_object()) << run.out;
  EXPECT_EQ(run.report.at("passed"), false);
  EXPECT_LT(run.report.at("applied").get<int64_t>(),
            run.report.at("unique_payments").get<int64_t>())
      << "acknowledging on receipt should lose what the kill interrupted";
  EXPECT_LT(run.report.at("balances").at("actual_total").get<int64_t>(),
            run.report.at("balances").at("expected_total").get<int64_t>());
}

#ifdef IDEM_HAVE_REDIS
TEST(BrokerDemoTest, RedisPassesThroughACrash) {
  ExpectPassesThroughACrash("redis");
}
TEST(BrokerDemoTest, RedisAckOnReceiveLosesPaymentsAndFails) {
  ExpectAckOnReceiveFails("redis");
}
// Nothing listens on the port: exit code 3, before anything else.
TEST(BrokerDemoTest, UnreachableServerExitsThree) {
  absl::StatusOr<int> port = servers::FreeLoopbackPort();
  ASSERT_TRUE(port.ok()) << port.status();
  int status = 0;
  RunShell(std::string(IDEM_BROKER_DEMO) + " --broker=redis --port=" +
               std::to_string(*port) + " 2>/dev/null",
           &status);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 3);
}
#endif

#ifdef IDEM_HAVE_NATS
TEST(BrokerDemoTest, NatsPassesThroughACrash) {
  ExpectPassesThroughACrash("nats");
}
TEST(BrokerDemoTest, NatsAckOnReceiveLosesPaymentsAndFails) {
  ExpectAckOnReceiveFails("nats");
}
#endif

#ifdef IDEM_HAVE_RABBITMQ
TEST(BrokerDemoTest, RabbitMqPassesThroughACrash) {
  ExpectPassesThroughACrash("rabbitmq");
}
TEST(BrokerDemoTest, RabbitMqAckOnReceiveLosesPaymentsAndFails) {
  ExpectAckOnReceiveFails("rabbitmq");
}
#endif

}  // namespace
}  // namespace idem
