// idem::redis::Consumer under hostile conditions against a real
// redis-server (the fixture: tests/brokers/redis_suite.h): error replies
// with the codes of their cause, a server out of memory, refused
// passwords, malformed message IDs and a server paused mid-stream.

#include <signal.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "idem/engine.h"
#include "idem/message.h"
#include "idem/redis/consumer.h"
#include "tests/brokers/redis_suite.h"

namespace idem::redis {
namespace {

using test::ApplyLedger;
using test::Ledger;

// Each error reply has the code that tells what to do: a server over its
// maxmemory is kResourceExhausted (a write may pass later), a key of
// another type and a removed group kFailedPrecondition (nothing passes
// until someone fixes them), each naming the server's reason.
TEST_F(RedisConsumerTest, ErrorRepliesHaveTheCodesOfTheirCause) {
  const std::string stream = prefix_ + "payments";
  Connection other("127.0.0.1", server_->port(), absl::Seconds(5));
  RedisCommand(*connection_, {"SET", prefix_ + "string", "x"});
  absl::Status wrong_type =
      other.Command({"XADD", prefix_ + "string", "*", "f", "v"}).status();
  EXPECT_EQ(wrong_type.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(wrong_type.message(), testing::HasSubstr("WRONGTYPE"));

  RedisCommand(*connection_, {"CONFIG", "SET", "maxmemory", "1"});
  absl::Status oom = other.Command({"XADD", stream, "*", "f", "v"}).status();
  RedisCommand(*connection_, {"CONFIG", "SET", "maxmemory", "0"});
  EXPECT_EQ(oom.code(), absl::StatusCode::kResourceExhausted) << oom;
  EXPECT_THAT(oom.message(), testing::HasSubstr("OOM"));

  std::unique_ptr<Engine> engine = OpenEngine("db");
  auto consumer = Consumer::Create(engine.get(), BaseOptions(stream, "c"));
  ASSERT_TRUE(consumer.ok()) << consumer.status();
  RedisCommand(*connection_, {"XGROUP", "DESTROY", stream, "g"});
  absl::StatusOr<brokers::BatchReport> report =
      (*consumer)->PollBatch(ApplyLedger);
  EXPECT_EQ(report.status().code(), absl::StatusCode::kFailedPrecondition)
      << report.status();
  EXPECT_THAT(report.status().message(), testing::HasSubstr("NOGROUP"));
  EXPECT_EQ((*consumer)->Run(ApplyLedger).code(),
            absl::StatusCode::kFailedPrecondition)
      << "Run must not retry what cannot pass";
}
// While the server is over its maxmemory, the relay stops at the first
// output with kResourceExhausted and keeps it (an OOM is no refusal for
// good: no dead letter); the entries are acknowledged all the same. Once
// the server has room, the next poll publishes every output once.
TEST_F(RedisConsumerTest, OutputsWaitInTheOutboxWhileTheServerIsOutOfMemory) {
  const std::string stream = prefix_ + "payments";
  const std::string out = prefix_ + "out";
  Produce(*connection_, stream, Ledger(29, 20, 5), 5, 0);
  std::unique_ptr<Engine> engine = OpenEngine("db");
  auto consumer = Consumer::Create(engine.get(), BaseOptions(stream, "c"));
  ASSERT_TRUE(consumer.ok()) << consumer.status();
  auto forward = [&](const Delivery& d, Txn& txn) {
    return test::ApplyAndForward(out, d, txn);
  };
  RedisCommand(*connection_, {"CONFIG", "SET", "maxmemory", "1"});
  absl::StatusOr<brokers::BatchReport> full = (*consumer)->PollBatch(forward);
  RedisCommand(*connection_, {"CONFIG", "SET", "maxmemory", "0"});
  ASSERT_TRUE(full.ok()) << full.status();
  EXPECT_EQ(full->processed, 20);
  EXPECT_EQ(full->outbox_error.code(), absl::StatusCode::kResourceExhausted)
      << full->outbox_error;
  EXPECT_EQ(PendingAndLag(*connection_, stream, "g"),
            (std::pair<int64_t, int64_t>(0, 0)));
  EXPECT_EQ(engine->ReadOutbox(100)->size(), 20u);
  Drain(**consumer, stream, forward);
  ASSERT_TRUE((*consumer)->PollBatch(forward).ok());
  EXPECT_THAT(*engine->ReadOutbox(10), testing::IsEmpty());
  EXPECT_EQ(Entries(*connection_, out).size(), 20u);
  EXPECT_EQ((*consumer)->stats().outbox_dead_lettered, 0);
}
// A server that wants a password: none, or a wrong one, is
// kUnauthenticated at Create naming the server; the right one works.
TEST_F(RedisConsumerTest,
       WrongOrMissingPasswordIsUnauthenticatedNamingTheServer) {
  std::unique_ptr<Engine> engine = OpenEngine("db");
  const std::string stream = prefix_ + "payments";
  RedisCommand(*connection_, {"CONFIG", "SET", "requirepass", "secret"});
  ConsumerOptions options = BaseOptions(stream, "c");
  const std::string server = absl::StrCat("127.0.0.1:", server_->port());
  absl::Status none = Consumer::Create(engine.get(), options).status();
  options.password = "wrong";
  absl::Status wrong = Consumer::Create(engine.get(), options).status();
  options.password = "secret";
  auto right = Consumer::Create(engine.get(), options);
  RedisCommand(*connection_, {"CONFIG", "SET", "requirepass", ""});
  EXPECT_EQ(none.code(), absl::StatusCode::kUnauthenticated) << none;
  EXPECT_THAT(none.message(), testing::HasSubstr(server));
  EXPECT_EQ(wrong.code(), absl::StatusCode::kUnauthenticated) << wrong;
  EXPECT_THAT(wrong.message(), testing::HasSubstr(server));
  EXPECT_THAT(wrong.message(), testing::HasSubstr("WRONGPASS"));
  EXPECT_TRUE(right.ok()) << right.status();
}
// Malformed message IDs from the wire: an empty one and one over
// kMaxIdBytes are dead-lettered with reason "id" and a clear error (never
// a crash); a binary one (NUL and high bytes) is an ID like any other: its
// producer duplicate is dropped.
TEST_F(RedisConsumerTest, MalformedMessageIdsAreDeadLetteredBinaryOnesKept) {
  const std::string stream = prefix_ + "payments";
  const std::string binary("id\0\xff\x01", 5);
  const std::string oversize(kMaxIdBytes + 1, 'i');
  for (const std::string& id : {std::string(), oversize, binary, binary}) {
    RedisCommand(*connection_,
                 {"XADD", stream, "*", "message-id", id, "payload", "p"});
  }
  std::unique_ptr<Engine> engine = OpenEngine("db");
  auto consumer = Consumer::Create(engine.get(), BaseOptions(stream, "c"));
  ASSERT_TRUE(consumer.ok()) << consumer.status();
  std::vector<std::string> handled;
  Drain(**consumer, stream, [&](const Delivery& d, Txn&) {
    handled.push_back(d.id);
    return absl::OkStatus();
  });
  EXPECT_THAT(handled, testing::ElementsAre(binary));
  const ConsumerStats stats = (*consumer)->stats();
  EXPECT_EQ(stats.dead_lettered, 2);
  EXPECT_EQ(stats.duplicates, 1);
  const auto dead = Entries(*connection_, prefix_ + "dead");
  ASSERT_EQ(dead.size(), 2u);
  for (const auto& entry : dead) {
    EXPECT_EQ(entry.at("idem.reason"), "id");
    EXPECT_THAT(entry.at("idem.error"),
                testing::HasSubstr("unusable message ID"));
  }
}
// The server is paused (SIGSTOP) mid-stream for four times the
// consumer's reply timeout while it runs: its commands time out
// (kUnavailable), it reconnects once the server runs again, re-reads its
// own pending entries, and the totals are exact (nothing lost, nothing
// applied twice).
TEST_F(RedisConsumerTest, ServerPausedMidStreamLosesAndDoublesNothing) {
  const std::string stream = prefix_ + "payments";
  constexpr int kMessages = 600;
  const ExpectedBalances expected =
      Produce(*connection_, stream, Ledger(59, kMessages, 10), 10,
              /*duplicate_every=*/10);
  std::unique_ptr<Engine> engine = OpenEngine("db");
  ConsumerOptions options = BaseOptions(stream, "c");
  options.io_timeout = absl::Milliseconds(300);
  options.reconnect_backoff = absl::Milliseconds(50);
  auto consumer = Consumer::Create(engine.get(), options);
  ASSERT_TRUE(consumer.ok()) << consumer.status();
  absl::Status run = test::RunThroughRestart(
      **consumer, *engine, kMessages, absl::Microseconds(500),
      [&] { test::PauseProcess(server_->pid(), 4 * options.io_timeout); },
      [&] {
        return PendingAndLag(*connection_, stream, "g") ==
               std::pair<int64_t, int64_t>(0, 0);
      });
  ASSERT_TRUE(run.ok()) << run;
  const ConsumerStats stats = (*consumer)->stats();
  EXPECT_GE(stats.broker_errors, 1) << "the pause went unnoticed";
  EXPECT_GE(stats.reconnects, 1);
  test::ExpectBalances(*engine, expected, true);
}

}  // namespace
}  // namespace idem::redis
