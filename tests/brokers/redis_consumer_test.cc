// idem::redis::Consumer against a real redis-server that the suite starts
// once (servers/redis_server.h): exact ledger totals through XAUTOCLAIM
// redeliveries and producer duplicates, consumer processes killed with
// SIGKILL, a server restart, dead letters and the relay.

#include <hiredis/hiredis.h>
#include <signal.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "examples/ledger.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "idem/engine.h"
#include "idem/redis/consumer.h"
#include "redis/consumer_hooks.h"
#include "servers/redis_server.h"
#include "tests/brokers/redis_suite.h"
#include "tests/brokers/server_suite.h"
#include "tests/brokers/socket_cut.h"

namespace idem::redis {
namespace {

using test::ApplyLedger;
using test::Ledger;

TEST_F(RedisConsumerTest, RejectsBadOptionsNamingTheField) {
  std::unique_ptr<Engine> engine = OpenEngine("db");
  ConsumerOptions options = BaseOptions("s", "c");
  options.stream.clear();
  absl::StatusOr<std::unique_ptr<Consumer>> consumer =
      Consumer::Create(engine.get(), options);
  EXPECT_EQ(consumer.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(consumer.status().message(), testing::HasSubstr("stream"));
  options = BaseOptions("s", "c");
  options.claim_idle = absl::Seconds(-1);
  EXPECT_THAT(Consumer::Create(engine.get(), options).status().message(),
              testing::HasSubstr("claim_idle"));
  options = BaseOptions("s", "c");
  options.delivery.max_batch = 0;
  EXPECT_THAT(Consumer::Create(engine.get(), options).status().message(),
              testing::HasSubstr("max_batch"));
}

// A broker consumer relays one outbox: a sharded engine, whose outbox is
// per shard, is refused before anything connects.
TEST_F(RedisConsumerTest, RefusesAShardedEngineNamingItsShards) {
  Options sharded;
  sharded.shards = 2;
  sharded.dedupe_scope = DedupeScope::kPartition;
  absl::StatusOr<std::unique_ptr<Engine>> engine =
      Engine::Open(dir_.Sub("sharded"), sharded);
  ASSERT_TRUE(engine.ok()) << engine.status();
  absl::StatusOr<std::unique_ptr<Consumer>> consumer =
      Consumer::Create(engine->get(), BaseOptions("s", "c"));
  EXPECT_EQ(consumer.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(consumer.status().message(), testing::HasSubstr("2 shards"));
}

TEST_F(RedisConsumerTest, UnreachableServerIsUnavailable) {
  std::unique_ptr<Engine> engine = OpenEngine("db");
  ConsumerOptions options = BaseOptions("s", "c");
  absl::StatusOr<int> port = servers::FreeLoopbackPort();
  ASSERT_TRUE(port.ok());
  options.port = *port;
  EXPECT_EQ(Consumer::Create(engine.get(), options).status().code(),
            absl::StatusCode::kUnavailable);
}

// Without create_group, Create still connects and checks the group: a
// closed port is kUnavailable at Create (not at the first poll), a missing
// stream or group kNotFound naming it.
TEST_F(RedisConsumerTest, CreateWithoutCreatingTheGroupConnectsAndChecksIt) {
  std::unique_ptr<Engine> engine = OpenEngine("db");
  const std::string stream = prefix_ + "payments";
  ConsumerOptions options = BaseOptions(stream, "c");
  options.create_group = false;
  absl::StatusOr<int> port = servers::FreeLoopbackPort();
  ASSERT_TRUE(port.ok());
  options.port = *port;
  EXPECT_EQ(Consumer::Create(engine.get(), options).status().code(),
            absl::StatusCode::kUnavailable);
  options.port = server_->port();
  absl::Status missing = Consumer::Create(engine.get(), options).status();
  EXPECT_EQ(missing.code(), absl::StatusCode::kNotFound) << missing;
  EXPECT_THAT(missing.message(), testing::HasSubstr(stream));
  RedisCommand(*connection_, {"XADD", stream, "*", "payload", "x"});
  missing = Consumer::Create(engine.get(), options).status();
  EXPECT_EQ(missing.code(), absl::StatusCode::kNotFound) << missing;
  EXPECT_THAT(missing.message(), testing::HasSubstr("group g"));
  RedisCommand(*connection_, {"XGROUP", "CREATE", stream, "g", "0"});
  EXPECT_TRUE(Consumer::Create(engine.get(), options).ok());
}

// An entry ID is "<milliseconds>-<sequence>": the delivery's event time,
// and so its stream's stream time.
TEST_F(RedisConsumerTest, AnEntryIdsMillisecondsAreItsEventTime) {
  std::unique_ptr<Engine> engine = OpenEngine("db");
  const std::string stream = prefix_ + "clicks";
  RedisCommand(*connection_, {"XADD", stream, "1700000000123-0", "message-id",
                              "m1", "payload", "1"});
  auto consumer = Consumer::Create(engine.get(), BaseOptions(stream, "c"));
  ASSERT_TRUE(consumer.ok()) << consumer.status();
  std::vector<absl::Time> seen;
  Drain(**consumer, stream, [&](const brokers::Delivery& delivery, Txn&) {
    seen.push_back(delivery.event_time);
    return absl::OkStatus();
  });
  const absl::Time added = absl::FromUnixMillis(1700000000123);
  EXPECT_EQ(seen, std::vector<absl::Time>{added});
  absl::StatusOr<absl::Time> stream_time = engine->StreamTime(stream, 0);
  ASSERT_TRUE(stream_time.ok()) << stream_time.status();
  EXPECT_EQ(*stream_time, added);
}

// Consumer "a" processes part of the stream and dies before acknowledging
// (its entries stay pending); "b" claims them with XAUTOCLAIM after
// claim_idle. With the message-id field as ID, the claimed entries and the
// producer's duplicates are all caught: the totals are exact. The broken
// variant dedupes by entry ID, and the totals show the doubled payments.
class RedisExactnessTest : public RedisConsumerTest,
                           public ::testing::WithParamInterface<bool> {};

TEST_P(RedisExactnessTest, LedgerIsExactThroughClaimsAndProducerDuplicates) {
  const bool broken = GetParam();
  const std::string stream = prefix_ + "payments";
  constexpr int kAccounts = 20;
  const std::vector<LedgerMessage> messages = Ledger(7, 600, kAccounts);
  const ExpectedBalances expected =
      Produce(*connection_, stream, messages, kAccounts, 10);
  std::unique_ptr<Engine> engine = OpenEngine("db");

  ConsumerOptions a_options = BaseOptions(stream, "a");
  if (broken) a_options.id_field.clear();
  brokers::LoopHooks dies_before_acks;
  dies_before_acks.skip_acks = true;
  auto a = CreateConsumerWithHooks(engine.get(), a_options, dies_before_acks);
  ASSERT_TRUE(a.ok()) << a.status();
  int64_t processed_by_a = 0;
  for (int i = 0; i < 4; ++i) {
    absl::StatusOr<brokers::BatchReport> r = (*a)->PollBatch(ApplyLedger);
    ASSERT_TRUE(r.ok()) << r.status();
    processed_by_a += r->processed;
  }
  ASSERT_GT(processed_by_a, 0);
  ASSERT_TRUE((*a)->Close().ok());

  ConsumerOptions b_options = BaseOptions(stream, "b");
  b_options.id_field = a_options.id_field;
  auto b = Consumer::Create(engine.get(), b_options);
  ASSERT_TRUE(b.ok()) << b.status();
  Drain(**b, stream, ApplyLedger);

  const ConsumerStats stats = (*b)->stats();
  EXPECT_EQ(stats.claimed, 200);  // a's four batches of 50
  EXPECT_GE(stats.duplicates, processed_by_a);
  EXPECT_EQ(PendingAndLag(*connection_, stream, "g"),
            (std::pair<int64_t, int64_t>(0, 0)));
  test::ExpectBalances(*engine, expected, !broken,
                       "entry IDs should miss producer duplicates");
}

INSTANTIATE_TEST_SUITE_P(RealAndBroken, RedisExactnessTest,
                         ::testing::Values(false, true), [](const auto& info) {
                           return info.param ? "EntryIdAsId" : "Real";
                         });

// SIGKILLs consumer processes mid-stream; each cycle's consumer has a new
// name, so what the killed one held comes back through XAUTOCLAIM. Nothing
// is lost (every entry is acknowledged in the end and the totals are
// exact) and nothing doubles. The broken variant acknowledges on receipt,
// and loses the entries a kill interrupts.
class RedisKillTest : public RedisConsumerTest,
                      public ::testing::WithParamInterface<bool> {};

TEST_P(RedisKillTest, KilledConsumersLoseAndDoubleNothing) {
  const bool broken = GetParam();
  const int cycles = broken ? 3 : 10;
  const std::string stream = prefix_ + "payments";
  constexpr int kAccounts = 50;
  const std::vector<LedgerMessage> messages = Ledger(11, 2000, kAccounts);
  const ExpectedBalances expected =
      Produce(*connection_, stream, messages, kAccounts, 20);
  const std::string store = dir_.Sub("db");
  std::vector<std::string> argv = {
      IDEM_BROKER_CHILD, "redis", absl::StrCat(server_->port()), stream, "g",
      "k%cycle%",        store};
  if (broken) argv.push_back("--ack_on_receive");
  test::KillCycles(argv, cycles, dir_.Sub("child.log"));
  if (HasFatalFailure()) return;
  std::unique_ptr<Engine> engine = OpenEngine("db");
  auto last = Consumer::Create(engine.get(), BaseOptions(stream, "last"));
  ASSERT_TRUE(last.ok()) << last.status();
  Drain(**last, stream, ApplyLedger);
  EXPECT_GT((*last)->stats().received, 0) << "the kills all came too late";

  test::ExpectBalances(*engine, expected, !broken,
                       "acks on receipt should lose payments");
  if (!broken) {
    EXPECT_EQ(PendingAndLag(*connection_, stream, "g"),
              (std::pair<int64_t, int64_t>(0, 0)));
  }
}

INSTANTIATE_TEST_SUITE_P(RealAndBroken, RedisKillTest,
                         ::testing::Values(false, true), [](const auto& info) {
                           return info.param ? "AckOnReceive" : "Real";
                         });

// The consumer's connection is cut under it (shutdown on its socket, as a
// proxy reset or an idle timeout) after each of its first batches; the next
// command hiredis writes gets EPIPE and raises SIGPIPE, whose default action
// ends the process. The consumer survives each cut, reconnects and the
// totals are exact. The broken variant runs its commands without blocking
// SIGPIPE (in a child process, forked before any store is open): killed.
class RedisSocketCutTest : public RedisConsumerTest,
                           public ::testing::WithParamInterface<bool> {};

TEST_P(RedisSocketCutTest, CutSocketNeitherKillsTheProcessNorLosesExactness) {
  const bool broken = GetParam();
  ASSERT_EQ(test::SigpipeDisposition(), SIG_DFL)
      << "the test proves nothing if the process ignores SIGPIPE";
  const std::string stream = prefix_ + "payments";
  constexpr int kAccounts = 10;
  const std::vector<LedgerMessage> messages = Ledger(19, 300, kAccounts);
  const ExpectedBalances expected =
      Produce(*connection_, stream, messages, kAccounts, 0);
  ConsumerOptions options = BaseOptions(stream, "c");
  if (broken) {
    EXPECT_EXIT(
        {
          std::unique_ptr<Engine> engine = OpenEngine("broken");
          auto consumer =
              CreateConsumerWithHooks(engine.get(), options, {},
                                      RedisHooks{.let_sigpipe_through = true});
          if (!consumer.ok() || !(*consumer)->PollBatch(ApplyLedger).ok()) {
            std::_Exit(2);
          }
          test::CutConnectionsTo(server_->port());
          (*consumer)->PollBatch(ApplyLedger).IgnoreError();
          std::_Exit(0);
        },
        testing::KilledBySignal(SIGPIPE), "");
    return;
  }
  std::unique_ptr<Engine> engine = OpenEngine("db");
  auto consumer = Consumer::Create(engine.get(), options);
  ASSERT_TRUE(consumer.ok()) << consumer.status();
  constexpr int kCuts = 3;
  int unavailable = 0;
  for (int cut = 0; cut < kCuts; ++cut) {
    absl::StatusOr<brokers::BatchReport> report =
        (*consumer)->PollBatch(ApplyLedger);
    ASSERT_TRUE(report.ok()) << report.status();
    ASSERT_GT(test::CutConnectionsTo(server_->port()), 0);
    report = (*consumer)->PollBatch(ApplyLedger);  // writes to the cut socket
    ASSERT_EQ(report.status().code(), absl::StatusCode::kUnavailable)
        << report.status();
    ++unavailable;
  }
  connection_ = servers::ConnectRedis(server_->port());  // it was cut too
  Drain(**consumer, stream, ApplyLedger);
  const ConsumerStats stats = (*consumer)->stats();
  EXPECT_EQ(stats.connects, 1 + unavailable);
  EXPECT_EQ(stats.processed, 300);
  test::ExpectBalances(*engine, expected, true);
}

INSTANTIATE_TEST_SUITE_P(RealAndBroken, RedisSocketCutTest,
                         ::testing::Values(false, true), [](const auto& info) {
                           return info.param ? "SigpipeLetThrough" : "Real";
                         });

// The reproduction on Redis: the first entry's output goes to a key
// of another type (WRONGTYPE), three more emit good outputs, one fails for
// good, and one emits an output over the server's proto-max-bulk-len. Every
// output is published or dead-lettered (the refused ones under their own
// message IDs, the oversized one without its value, saying so), and the
// outbox is empty.
TEST_F(RedisConsumerTest, RefusedOutputsAreDeadLetteredAndTheRestFlow) {
  const std::string stream = prefix_ + "payments";
  const std::string out = prefix_ + "out";
  const std::string not_a_stream = prefix_ + "string";
  RedisCommand(*connection_, {"SET", not_a_stream, "x"});
  constexpr int64_t kMaxBulk = 1 << 20;  // the smallest Redis allows
  Reply before =
      RedisCommand(*connection_, {"CONFIG", "GET", "proto-max-bulk-len"});
  ASSERT_TRUE(before != nullptr && before->elements == 2);
  const std::string max_bulk_before(ReplyString(before->element[1]));
  RedisCommand(*connection_,
               {"CONFIG", "SET", "proto-max-bulk-len", absl::StrCat(kMaxBulk)});
  for (const char* id : {"a", "b", "c", "d", "e", "f"}) {
    RedisCommand(*connection_,
                 {"XADD", stream, "*", "message-id", id, "payload", "1"});
  }
  std::unique_ptr<Engine> engine = OpenEngine("db");
  auto consumer = Consumer::Create(engine.get(), BaseOptions(stream, "c"));
  ASSERT_TRUE(consumer.ok()) << consumer.status();
  Drain(**consumer, stream, [&](const Delivery& d, Txn& txn) -> absl::Status {
    if (d.id == "e") return absl::InvalidArgumentError("poison");
    if (d.id == "a") {
      txn.Emit(not_a_stream, d.id, d.payload);
    } else if (d.id == "f") {
      txn.Emit(out, d.id, std::string(2 * kMaxBulk, 'v'));
    } else {
      txn.Emit(out, d.id, d.payload);
    }
    return absl::OkStatus();
  });
  const ConsumerStats stats = (*consumer)->stats();
  EXPECT_EQ(stats.processed, 5);
  EXPECT_EQ(stats.dead_lettered, 1);
  EXPECT_EQ(stats.outbox_published, 3 + 1);  // e's dead letter
  EXPECT_EQ(stats.outbox_dead_lettered, 2);
  EXPECT_THAT(*engine->ReadOutbox(10), testing::IsEmpty());
  EXPECT_EQ(Entries(*connection_, out).size(), 3u);
  const auto dead = Entries(*connection_, prefix_ + "dead");
  ASSERT_EQ(dead.size(), 3u);
  std::map<std::string, std::map<std::string, std::string>> by_key;
  for (const auto& entry : dead) by_key[entry.at("key")] = entry;
  EXPECT_EQ(by_key["a"]["idem.reason"], "refused");
  EXPECT_EQ(by_key["a"]["idem.destination"], not_a_stream);
  EXPECT_THAT(by_key["a"]["idem.error"], testing::HasSubstr("WRONGTYPE"));
  EXPECT_EQ(by_key["e"]["idem.reason"], "non_retriable");
  EXPECT_EQ(by_key["f"]["idem.reason"], "refused");
  EXPECT_EQ(by_key["f"]["idem.truncated"], "value");
  EXPECT_EQ(by_key["f"]["idem.value.bytes"], absl::StrCat(2 * kMaxBulk));
  EXPECT_THAT(by_key["f"]["idem.error"],
              testing::HasSubstr("proto-max-bulk-len"));
  for (const auto& entry : dead) EXPECT_FALSE(entry.at("message-id").empty());
  RedisCommand(*connection_,
               {"CONFIG", "SET", "proto-max-bulk-len", max_bulk_before});
}

// Two consumers in one group, each with its own store (two processes on
// two machines): "a" commits a batch and dies before its XACK; after
// claim_idle "b" claims the entries, and its store has never seen them, so
// it applies them again. Only consumers sharing one store are deduplicated
// against each other (docs/brokers.md): with one store, nothing is applied
// twice.
class RedisCompetingStoresTest : public RedisConsumerTest,
                                 public ::testing::WithParamInterface<bool> {};

TEST_P(RedisCompetingStoresTest, OnlyConsumersSharingAStoreAreDeduplicated) {
  const bool shared = GetParam();
  const std::string stream = prefix_ + "payments";
  constexpr size_t kMessages = 200;
  Produce(*connection_, stream, Ledger(23, kMessages, 10), 10, 0);
  std::unique_ptr<Engine> store_a = OpenEngine("a");
  std::unique_ptr<Engine> store_b = shared ? nullptr : OpenEngine("b");
  Engine* engine_b = shared ? store_a.get() : store_b.get();
  brokers::LoopHooks dies_before_acks;
  dies_before_acks.skip_acks = true;
  auto a = CreateConsumerWithHooks(store_a.get(), BaseOptions(stream, "a"),
                                   dies_before_acks);
  ASSERT_TRUE(a.ok()) << a.status();
  absl::StatusOr<brokers::BatchReport> first = (*a)->PollBatch(ApplyLedger);
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_GT(first->processed, 0);
  ASSERT_TRUE((*a)->Close().ok());
  auto b = Consumer::Create(engine_b, BaseOptions(stream, "b"));
  ASSERT_TRUE(b.ok()) << b.status();
  Drain(**b, stream, ApplyLedger);
  const int64_t applied = first->processed + (*b)->stats().processed;
  const int64_t twice = applied - static_cast<int64_t>(kMessages);
  if (shared) {
    EXPECT_EQ(twice, 0);
  } else {
    EXPECT_EQ(twice, first->processed)
        << "each store applies what the other's consumer left unacked";
  }
}

INSTANTIATE_TEST_SUITE_P(SharedAndSeparate, RedisCompetingStoresTest,
                         ::testing::Values(true, false), [](const auto& info) {
                           return info.param ? "OneStore" : "TwoStores";
                         });

// The server is restarted while a consumer runs (and half the stream is
// produced after it): the consumer reconnects and the totals are exact.
TEST_F(RedisConsumerTest, ServerRestartMidStreamLosesAndDoublesNothing) {
  const std::string stream = prefix_ + "payments";
  constexpr int kAccounts = 20;
  const std::vector<LedgerMessage> messages = Ledger(13, 1200, kAccounts);
  const std::vector<LedgerMessage> first(messages.begin(),
                                         messages.begin() + 600);
  const std::vector<LedgerMessage> second(messages.begin() + 600,
                                          messages.end());
  ExpectedBalances expected =
      Produce(*connection_, stream, first, kAccounts, 10);
  std::unique_ptr<Engine> engine = OpenEngine("db");
  ConsumerOptions options = BaseOptions(stream, "c");
  options.reconnect_backoff = absl::Milliseconds(50);
  auto consumer = Consumer::Create(engine.get(), options);
  ASSERT_TRUE(consumer.ok()) << consumer.status();
  absl::Status run = test::RunThroughRestart(
      **consumer, *engine, 600, absl::Microseconds(500),
      [&] {
        ASSERT_TRUE(server_->Restart().ok()) << server_->Log();
        connection_ = servers::ConnectRedis(server_->port());
        const ExpectedBalances more =
            Produce(*connection_, stream, second, kAccounts, 10);
        for (int a = 0; a < kAccounts; ++a) expected.Add({a, more.balance(a)});
      },
      [&] {
        return PendingAndLag(*connection_, stream, "g") ==
               std::pair<int64_t, int64_t>(0, 0);
      });
  ASSERT_TRUE(run.ok()) << run;
  const ConsumerStats stats = (*consumer)->stats();
  EXPECT_GE(stats.connects, 2);
  EXPECT_GE(stats.reconnects, 1);
  EXPECT_GT(stats.fetches, 0);
  EXPECT_GE(stats.broker_errors, 1) << "the restart went unnoticed";
  test::ExpectBalances(*engine, expected, true);
}

// A poison entry is dead-lettered to the dead-letter stream with its reason
// and source; every other payment is forwarded through the outbox and the
// relay; the downstream consumer applies each once, even though every
// forwarded entry reaches it twice (as after a relay crash between XADD and
// AckOutbox).
TEST_F(RedisConsumerTest, DeadLettersAndRelayThroughADownstreamConsumer) {
  const std::string stream = prefix_ + "payments";
  const std::string out = prefix_ + "out";
  constexpr int kAccounts = 10;
  const std::vector<LedgerMessage> messages = Ledger(17, 200, kAccounts);
  const ExpectedBalances expected =
      Produce(*connection_, stream, messages, kAccounts, 0);
  RedisCommand(*connection_, {"XADD", stream, "*", "message-id", "poison",
                              "payload", "not a payment", "note", "kept"});
  std::unique_ptr<Engine> upstream = OpenEngine("up");
  auto stage1 = Consumer::Create(upstream.get(), BaseOptions(stream, "c"));
  ASSERT_TRUE(stage1.ok()) << stage1.status();
  Drain(**stage1, stream, [&](const Delivery& d, Txn& txn) {
    return test::ApplyAndForward(out, d, txn);
  });
  const ConsumerStats stats1 = (*stage1)->stats();
  EXPECT_EQ(stats1.dead_lettered, 1);
  EXPECT_EQ(stats1.processed, 200);
  EXPECT_EQ(stats1.outbox_published, 201);

  const auto dead = Entries(*connection_, prefix_ + "dead");
  ASSERT_EQ(dead.size(), 1u);
  EXPECT_EQ(dead[0].at("payload"), "not a payment");
  EXPECT_EQ(dead[0].at("idem.reason"), "non_retriable");
  EXPECT_EQ(dead[0].at("idem.source.id"), "poison");
  EXPECT_EQ(dead[0].at("note"), "kept");
  EXPECT_NE(dead[0].at("message-id"), "poison");
  absl::StatusOr<bool> marked = upstream->Seen("idem.dead-letter/poison");
  ASSERT_TRUE(marked.ok());
  EXPECT_TRUE(*marked);
  EXPECT_THAT(*upstream->ReadOutbox(10), testing::IsEmpty());

  // Every forwarded entry once more, as a relay retry would publish it.
  const auto forwarded = Entries(*connection_, out);
  ASSERT_EQ(forwarded.size(), 200u);
  for (const auto& entry : forwarded) {
    RedisCommand(*connection_,
                 {"XADD", out, "*", "message-id", entry.at("message-id"),
                  "payload", entry.at("payload")});
  }
  std::unique_ptr<Engine> downstream = OpenEngine("down");
  auto stage2 = Consumer::Create(downstream.get(), BaseOptions(out, "d"));
  ASSERT_TRUE(stage2.ok()) << stage2.status();
  Drain(**stage2, out, ApplyLedger);
  const ConsumerStats stats2 = (*stage2)->stats();
  EXPECT_EQ(stats2.processed, 200);
  EXPECT_EQ(stats2.duplicates, 200);
  test::ExpectBalances(*downstream, expected, true);
}

// The server's stream-node-max-entries (entries per macro node), or 0.
int64_t NodeEntries(Connection& connection) {
  Reply node =
      RedisCommand(connection, {"CONFIG", "GET", "stream-node-max-entries"});
  int64_t node_entries = 0;
  if (node == nullptr || node->elements != 2 ||
      !absl::SimpleAtoi(std::string(ReplyString(node->element[1])),
                        &node_entries)) {
    return 0;
  }
  return node_entries;
}

// With output_max_len, the relay's XADD trims each output stream to about
// that many entries (MAXLEN ~: whole nodes of stream-node-max-entries go),
// but never the dead letter stream. The twin without output_max_len shows
// the output stream holding every entry.
class RedisTrimTest : public RedisConsumerTest,
                      public ::testing::WithParamInterface<bool> {
 protected:
  // Drains `stream`, dead-lettering every other message (a poison) and
  // forwarding the rest to `out`.
  void DrainForwardingHalf(Consumer& consumer, const std::string& stream,
                           const std::string& out) {
    int index = 0;
    Drain(consumer, stream, [&](const Delivery& d, Txn& txn) -> absl::Status {
      if (index++ % 2 == 0) return absl::InvalidArgumentError("poison");
      return test::ApplyAndForward(out, d, txn);
    });
  }
};

TEST_P(RedisTrimTest, OutputStreamsAreTrimmedButNotTheDeadLetterStream) {
  const bool trim = GetParam();
  const std::string stream = prefix_ + "payments";
  const std::string out = prefix_ + "out";
  constexpr int kMessages = 400;
  constexpr int64_t kMaxLen = 50;
  Produce(*connection_, stream, Ledger(31, kMessages, 10), 10, 0);
  const int64_t node_entries = NodeEntries(*connection_);
  ASSERT_GT(node_entries, 0);
  std::unique_ptr<Engine> engine = OpenEngine("db");
  ConsumerOptions options = BaseOptions(stream, "c");
  if (trim) options.output_max_len = kMaxLen;
  auto consumer = Consumer::Create(engine.get(), options);
  ASSERT_TRUE(consumer.ok()) << consumer.status();
  DrainForwardingHalf(**consumer, stream, out);
  const ConsumerStats stats = (*consumer)->stats();
  ASSERT_EQ(stats.dead_lettered, kMessages / 2);
  ASSERT_EQ(stats.outbox_published, kMessages);
  const int64_t outputs =
      static_cast<int64_t>(Entries(*connection_, out).size());
  if (trim) {
    EXPECT_GE(outputs, kMaxLen);
    EXPECT_LE(outputs, kMaxLen + node_entries);
  } else {
    EXPECT_EQ(outputs, kMessages / 2);
  }
  EXPECT_EQ(Entries(*connection_, prefix_ + "dead").size(),
            static_cast<size_t>(kMessages / 2));
}

INSTANTIATE_TEST_SUITE_P(TrimmedAndNot, RedisTrimTest,
                         ::testing::Values(true, false), [](const auto& info) {
                           return info.param ? "MaxLen" : "Unbounded";
                         });

// With output_max_age, the relay's XADD drops the output stream's entries
// older than that (MINID ~: whole nodes go, so at most one node of old
// entries stays) and keeps every new one; the dead letter stream keeps its
// old entries. The twin without output_max_age keeps every old entry.
using RedisAgeTrimTest = RedisTrimTest;

TEST_P(RedisAgeTrimTest, OutputEntriesOlderThanTheAgeAreTrimmed) {
  const bool trim = GetParam();
  const std::string stream = prefix_ + "payments";
  const std::string out = prefix_ + "out";
  const std::string dead = prefix_ + "dead";
  constexpr int kMessages = 200;
  const int64_t node_entries = NodeEntries(*connection_);
  ASSERT_GT(node_entries, 0);
  // Entries of 1970: IDs <ms>-0 with ms from 1 to 2 nodes' worth.
  const int64_t old_entries = 2 * node_entries;
  for (int64_t ms = 1; ms <= old_entries; ++ms) {
    for (const std::string& s : {out, dead}) {
      ASSERT_NE(RedisCommand(*connection_, {"XADD", s, absl::StrCat(ms, "-0"),
                                            "payload", "old"}),
                nullptr);
    }
  }
  auto old_left = [&](const std::string& s) {
    Reply range = RedisCommand(
        *connection_, {"XRANGE", s, "-", absl::StrCat(old_entries, "-0")});
    return range == nullptr ? int64_t{-1}
                            : static_cast<int64_t>(range->elements);
  };
  Produce(*connection_, stream, Ledger(31, kMessages, 10), 10, 0);
  std::unique_ptr<Engine> engine = OpenEngine("db");
  ConsumerOptions options = BaseOptions(stream, "c");
  if (trim) options.output_max_age = absl::Hours(1);
  auto consumer = Consumer::Create(engine.get(), options);
  ASSERT_TRUE(consumer.ok()) << consumer.status();
  DrainForwardingHalf(**consumer, stream, out);
  ASSERT_EQ((*consumer)->stats().outbox_published, kMessages);
  const int64_t outputs =
      static_cast<int64_t>(Entries(*connection_, out).size());
  if (trim) {
    EXPECT_LE(old_left(out), node_entries);
    EXPECT_EQ(outputs - old_left(out), kMessages / 2);
  } else {
    EXPECT_EQ(old_left(out), old_entries);
  }
  EXPECT_EQ(old_left(dead), old_entries);
}

INSTANTIATE_TEST_SUITE_P(TrimmedAndNot, RedisAgeTrimTest,
                         ::testing::Values(true, false), [](const auto& info) {
                           return info.param ? "MaxAge" : "Unbounded";
                         });

// output_max_age is validated, and excludes output_max_len.
TEST_F(RedisConsumerTest, OutputMaxAgeIsValidatedAndExcludesMaxLen) {
  std::unique_ptr<Engine> engine = OpenEngine("db");
  ConsumerOptions options = BaseOptions(prefix_ + "payments", "c");
  for (absl::Duration age : {-absl::Seconds(1), absl::InfiniteDuration()}) {
    options.output_max_age = age;
    const absl::Status status =
        Consumer::Create(engine.get(), options).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
    EXPECT_THAT(status.message(), testing::HasSubstr("output_max_age"));
  }
  options.output_max_age = absl::Hours(1);
  options.output_max_len = 10;
  const absl::Status status = Consumer::Create(engine.get(), options).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_THAT(status.message(), testing::HasSubstr("exclusive"));
}

// The relay writes the message ID, the payload and the key to fields of
// their own: an output's headers named like them (a handler's, or those a
// dead letter copies from an entry that itself came from a relay) are left
// out, so no header overrides the ID a downstream consumer dedupes by.
TEST_F(RedisConsumerTest, HeadersNamedLikeTheRelaysFieldsAreLeftOut) {
  const std::string stream = prefix_ + "payments";
  const std::string out = prefix_ + "out";
  RedisCommand(*connection_, {"XADD", stream, "*", "message-id", "m1",
                              "payload", "p", "key", "from-upstream"});
  std::unique_ptr<Engine> engine = OpenEngine("db");
  auto consumer = Consumer::Create(engine.get(), BaseOptions(stream, "c"));
  ASSERT_TRUE(consumer.ok()) << consumer.status();
  Drain(**consumer, stream, [&](const Delivery& d, Txn& txn) -> absl::Status {
    EXPECT_EQ(d.Header("key"), "from-upstream");
    const Txn::Header headers[] = {{"message-id", "forged"},
                                   {"payload", "forged"},
                                   {"key", "forged"},
                                   {"trace", "t1"}};
    txn.EmitWithHeaders(out, "k", "v", headers);
    return absl::InvalidArgumentError("poison");  // and a dead letter
  });
  ASSERT_EQ((*consumer)->stats().outbox_published, 1);  // the dead letter
  const auto dead = Entries(*connection_, prefix_ + "dead");
  ASSERT_EQ(dead.size(), 1u);
  EXPECT_EQ(dead[0].at("key"), "m1");
  EXPECT_EQ(dead[0].at("payload"), "p");

  // The handler's emit, on a delivery that succeeds.
  RedisCommand(*connection_,
               {"XADD", stream, "*", "message-id", "m2", "payload", "p"});
  Drain(**consumer, stream, [&](const Delivery&, Txn& txn) {
    const Txn::Header headers[] = {{"message-id", "forged"},
                                   {"payload", "forged"},
                                   {"key", "forged"},
                                   {"trace", "t1"}};
    txn.EmitWithHeaders(out, "k", "v", headers);
    return absl::OkStatus();
  });
  Reply range = RedisCommand(*connection_, {"XRANGE", out, "-", "+"});
  ASSERT_TRUE(range != nullptr && range->elements == 1);
  std::vector<std::string> names;
  std::map<std::string, std::string> fields;
  const redisReply* entry_fields = range->element[0]->element[1];
  for (size_t f = 0; f + 1 < entry_fields->elements; f += 2) {
    names.emplace_back(ReplyString(entry_fields->element[f]));
    fields[names.back()] = ReplyString(entry_fields->element[f + 1]);
  }
  EXPECT_THAT(names,
              testing::ElementsAre("message-id", "payload", "key", "trace"));
  EXPECT_NE(fields["message-id"], "forged");
  EXPECT_EQ(fields["payload"], "v");
  EXPECT_EQ(fields["key"], "k");
}

}  // namespace
}  // namespace idem::redis
