// What the server suites (redis_consumer_test, nats_consumer_test) share: a
// fixture whose server (servers/) starts once per test suite and whose tests
// fail under CI (CI=true), and are skipped with the reason otherwise, when it
// could not start; a store per test; the ledger messages; and draining a
// consumer. Not thread-safe.

#ifndef IDEM_TESTS_BROKERS_SERVER_SUITE_H_
#define IDEM_TESTS_BROKERS_SERVER_SUITE_H_

#include <signal.h>

#include <cstdlib>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/time/clock.h"
#include "examples/ledger.h"
#include "examples/ledger_stream.h"
#include "gtest/gtest.h"
#include "idem/brokers/delivery_loop.h"
#include "idem/engine.h"
#include "servers/server_process.h"
#include "util/temp_dir.h"

namespace idem::test {

// Whether the suite runs under CI (CI=true): a server that cannot start
// then fails the test.
inline bool UnderCi() {
  const char* ci = std::getenv("CI");
  return ci != nullptr && std::string(ci) == "true";
}

// REQUIRES: the derived fixture defines
//   static absl::StatusOr<std::unique_ptr<servers::ServerProcess>>
//   StartServer();
template <typename Fixture>
class ServerSuite : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    absl::StatusOr<std::unique_ptr<servers::ServerProcess>> server =
        Fixture::StartServer();
    if (server.ok()) {
      server_ = server->release();
    } else {
      start_error_ = new std::string(server.status().ToString());
    }
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
    delete start_error_;
    start_error_ = nullptr;
  }

  void SetUp() override {
    if (server_ != nullptr) return;
    if (UnderCi()) FAIL() << "the server did not start: " << *start_error_;
    GTEST_SKIP() << "the server did not start (under CI=true this fails): "
                 << *start_error_;
  }

  std::unique_ptr<Engine> OpenEngine(const std::string& name) {
    absl::StatusOr<std::unique_ptr<Engine>> engine =
        Engine::Open(dir_.Sub(name), Options());
    EXPECT_TRUE(engine.ok()) << engine.status();
    return engine.ok() ? *std::move(engine) : nullptr;
  }

  // The test's name, for names of its own streams.
  static std::string TestName() {
    return ::testing::UnitTest::GetInstance()->current_test_info()->name();
  }

  static servers::ServerProcess* server_;
  static std::string* start_error_;
  util::TempDir dir_;
};

template <typename Fixture>
servers::ServerProcess* ServerSuite<Fixture>::server_ = nullptr;
template <typename Fixture>
std::string* ServerSuite<Fixture>::start_error_ = nullptr;

// The first `count` payments of the ledger stream `seed` on `accounts`.
inline std::vector<examples::LedgerMessage> Ledger(uint64_t seed, size_t count,
                                                   int accounts) {
  examples::LedgerStreamOptions options;
  options.seed = seed;
  options.accounts = accounts;
  return examples::MakeLedgerMessages(options, count);
}

// The ledger's handler as a broker handler.
inline absl::Status ApplyLedger(const brokers::Delivery& delivery, Txn& txn) {
  return examples::ApplyPayment(delivery.payload, txn);
}

// The ledger's handler that also forwards each payment to `out` through the
// outbox (stage one of a pipeline).
inline absl::Status ApplyAndForward(const std::string& out,
                                    const brokers::Delivery& delivery,
                                    Txn& txn) {
  if (absl::Status s = ApplyLedger(delivery, txn); !s.ok()) return s;
  txn.Emit(out, "", delivery.payload);
  return absl::OkStatus();
}

// Runs `cycles` consumer processes (argv, with "%cycle%" replaced by the
// cycle's number; output appended to `log`) one after the other, each
// SIGKILLed 250 to 500 ms after its start (a seeded draw); fails the test
// if one ends by itself.
inline void KillCycles(const std::vector<std::string>& argv, int cycles,
                       const std::string& log) {
  std::mt19937_64 rng(42);
  for (int cycle = 0; cycle < cycles; ++cycle) {
    std::vector<std::string> args;
    for (const std::string& arg : argv) {
      args.push_back(
          absl::StrReplaceAll(arg, {{"%cycle%", absl::StrCat(cycle)}}));
    }
    absl::StatusOr<servers::ChildProcess> child =
        servers::ChildProcess::Spawn(args, log);
    ASSERT_TRUE(child.ok()) << child.status();
    absl::SleepFor(absl::Milliseconds(250 + rng() % 250));
    ASSERT_FALSE(child->Exited()) << "the consumer exited on its own";
    child->Signal(SIGKILL);
  }
}

// Runs `consumer` (Run, on a thread of its own, with the ledger's handler
// slowed down by `pause` per payment) through a server restart: after
// 150 ms it expects the engine to have processed some but not all of the
// `produced` payments, calls `restart` (restart the server, reconnect,
// produce the rest), waits until `drained` holds, stops the consumer and
// returns Run's status (or the wait's error).
template <typename Consumer>
absl::Status RunThroughRestart(Consumer& consumer, Engine& engine,
                               uint64_t produced, absl::Duration pause,
                               const std::function<void()>& restart,
                               const std::function<bool()>& drained) {
  absl::Status run;
  std::thread runner([&] {
    run = consumer.Run([pause](const brokers::Delivery& d, Txn& txn) {
      absl::SleepFor(pause);
      return ApplyLedger(d, txn);
    });
  });
  absl::SleepFor(absl::Milliseconds(150));
  const absl::StatusOr<Stats> before = engine.GetStats();
  EXPECT_TRUE(before.ok()) << before.status();
  if (before.ok()) {
    EXPECT_GT(before->processed, 0u) << "the restart came before any payment";
    EXPECT_LT(before->processed, produced) << "the restart came too late";
  }
  restart();
  absl::Status waited =
      servers::WaitFor(drained, absl::Seconds(60), "the consumer to drain");
  consumer.Stop();
  runner.join();
  return waited.ok() ? run : waited;
}

// Pauses process `pid` (SIGSTOP: it keeps its sockets, and answers
// nothing) for `pause`, then lets it go on (SIGCONT).
inline void PauseProcess(pid_t pid, absl::Duration pause) {
  ASSERT_GT(pid, 0);
  ASSERT_EQ(kill(pid, SIGSTOP), 0);
  absl::SleepFor(pause);
  ASSERT_EQ(kill(pid, SIGCONT), 0);
}

// Calls consumer.PollBatch(handler) until a poll receives nothing and
// `drained()` holds (kUnavailable polls are retried); fails the test after
// 60 s or on another error.
template <typename Consumer>
void Drain(Consumer& consumer, brokers::Handler handler,
           const std::function<bool()>& drained) {
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  while (absl::Now() < deadline) {
    absl::StatusOr<brokers::BatchReport> report = consumer.PollBatch(handler);
    if (!report.ok() && !absl::IsUnavailable(report.status())) {
      ADD_FAILURE() << report.status();
      return;
    }
    if (report.ok() && report->received > 0) continue;
    if (drained()) return;
  }
  ADD_FAILURE() << "the consumer did not drain within 60 s";
}

// Expects `engine`'s balances to match `expected` exactly (`exact`), or to
// differ (a broken variant's run).
inline void ExpectBalances(Engine& engine,
                           const examples::ExpectedBalances& expected,
                           bool exact, const std::string& why_broken = "") {
  absl::StatusOr<examples::BalanceCheck> check =
      examples::CheckBalances(engine, expected);
  ASSERT_TRUE(check.ok()) << check.status();
  if (exact) {
    EXPECT_TRUE(check->ok()) << check->first_mismatch;
  } else {
    EXPECT_FALSE(check->ok()) << why_broken;
  }
}

}  // namespace idem::test

#endif  // IDEM_TESTS_BROKERS_SERVER_SUITE_H_
