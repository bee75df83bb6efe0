// Guarantee 7, the outbox (Txn::Emit, Engine::ReadOutbox, AckOutbox): emits
// commit with their message and only with it, positions and message IDs, the
// cursor that keeps positions unique across acknowledgement and reopen,
// durability of what ReadOutbox returns, and the outbox in Dump, Checkpoint and
// Stats.

#include <sys/mman.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "engine/engine_hooks.h"
#include "engine/outbox_record.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "idem/clock.h"
#include "idem/crash/file_system.h"
#include "idem/engine.h"
#include "idem/partition_state.h"
#include "rocksdb/db.h"
#include "rocksdb/env.h"
#include "tests/testing/engine_test_util.h"
#include "util/temp_dir.h"

namespace idem {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::SizeIs;

// Emits "<id>:<i>" to "out" with key "k<i>", `count` times, and writes state
// key "seen/<id>".
absl::Status EmitN(const Message& m, Txn& txn, int count) {
  txn.Put(absl::StrCat("seen/", std::string(m.id)), "1");
  for (int i = 0; i < count; ++i) {
    txn.Emit("out", absl::StrCat("k", i),
             absl::StrCat(std::string(m.id), ":", i));
  }
  return absl::OkStatus();
}

const auto kEmitTwo = [](const Message& m, Txn& txn) {
  return EmitN(m, txn, 2);
};

std::vector<OutboxEntry> ReadAll(Engine& engine) {
  absl::StatusOr<std::vector<OutboxEntry>> entries = engine.ReadOutbox(1000);
  EXPECT_TRUE(entries.ok()) << entries.status();
  return entries.ok() ? *entries : std::vector<OutboxEntry>();
}

std::vector<uint64_t> Positions(const std::vector<OutboxEntry>& entries) {
  std::vector<uint64_t> positions;
  for (const OutboxEntry& e : entries) positions.push_back(e.position);
  return positions;
}

std::vector<std::string> Values(const std::vector<OutboxEntry>& entries) {
  std::vector<std::string> values;
  for (const OutboxEntry& e : entries) values.push_back(e.value);
  return values;
}

class OutboxTest : public ::testing::Test {
 protected:
  void SetUp() override {
    options_.clock = &clock_;
    Reopen();
  }
  void Reopen() {
    engine_.reset();
    absl::StatusOr<std::unique_ptr<Engine>> engine =
        Engine::Open(dir_.Sub("db"), options_);
    ASSERT_TRUE(engine.ok()) << engine.status();
    engine_ = std::move(*engine);
  }
  Result Deliver(std::string_view id, Handler handler) {
    Message m;
    m.id = id;
    absl::StatusOr<Result> r = engine_->Process(m, handler);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *r : Result();
  }

  util::TempDir dir_;
  ManualClock clock_{test::kStart};
  Options options_;
  std::unique_ptr<Engine> engine_;
};

TEST_F(OutboxTest, EmitsCommitWithTheirMessageInOrder) {
  EXPECT_EQ(Deliver("a", kEmitTwo).outcome, Outcome::kProcessed);
  EXPECT_EQ(Deliver("b", kEmitTwo).outcome, Outcome::kProcessed);
  std::vector<OutboxEntry> entries = ReadAll(*engine_);
  ASSERT_THAT(entries, SizeIs(4));
  EXPECT_THAT(Positions(entries), ElementsAre(1, 2, 3, 4));
  EXPECT_THAT(Values(entries), ElementsAre("a:0", "a:1", "b:0", "b:1"));
  EXPECT_EQ(entries[0].destination, "out");
  EXPECT_EQ(entries[0].key, "k0");
  EXPECT_EQ(entries[1].key, "k1");
  EXPECT_EQ(entries[0].message_id, test::HexOfIdHash("a") + "-0");
  EXPECT_EQ(entries[1].message_id, test::HexOfIdHash("a") + "-1");
  EXPECT_EQ(entries[2].message_id, test::HexOfIdHash("b") + "-0");
}

TEST_F(OutboxTest, MessageIdsArePrintableShortAndTheSameInAnyStore) {
  const std::string long_id(kMaxIdBytes, '\xff');
  std::vector<Message> batch(3);
  batch[0].id = "x";
  batch[1].id = long_id;
  batch[2].id = "y";
  ASSERT_TRUE(engine_->ProcessBatch(batch, kEmitTwo).ok());
  const std::vector<OutboxEntry> here = ReadAll(*engine_);

  // Another store, other traffic first, one message at a time.
  util::TempDir other_dir;
  ASSERT_OPEN(other, other_dir.Sub("db"), options_);
  Message first;
  first.id = "unrelated";
  ASSERT_TRUE(other->Process(first, kEmitTwo).ok());
  for (const Message& m : batch) ASSERT_TRUE(other->Process(m, kEmitTwo).ok());
  std::vector<OutboxEntry> there = ReadAll(*other);
  ASSERT_THAT(there, SizeIs(8));
  there.erase(there.begin(), there.begin() + 2);

  ASSERT_THAT(here, SizeIs(6));
  for (size_t i = 0; i < here.size(); ++i) {
    EXPECT_EQ(here[i].message_id, there[i].message_id) << i;
    EXPECT_NE(here[i].position, there[i].position) << i;
    EXPECT_LE(here[i].message_id.size(), 64u);
    for (char c : here[i].message_id) {
      EXPECT_TRUE(c > ' ' && c < 0x7f) << "byte " << int{c} << " in " << i;
    }
  }
  // Distinct per emit.
  for (size_t i = 1; i < here.size(); ++i) {
    EXPECT_NE(here[i].message_id, here[i - 1].message_id);
  }
}

// In a partition-scoped store one ID on two partitions, or from two
// sources, is two messages: both run, and their emits must not share IDs, or
// a downstream that dedupes by ID would drop one. The IDs still depend only
// on the record (source, partition, ID): another partition-scoped store, or
// a restore, emits the same ones.
TEST_F(OutboxTest, PartitionScopedEmitIdsNameTheRecordNotJustTheId) {
  Options scoped = options_;
  scoped.dedupe_scope = DedupeScope::kPartition;
  auto deliveries = [] {
    std::vector<Message> batch(3);
    batch[0].id = batch[1].id = batch[2].id = "same";
    batch[0].source = batch[1].source = "orders";
    batch[2].source = "refunds";
    batch[0].partition = 0;
    batch[1].partition = 1;
    batch[2].partition = 0;
    for (size_t i = 0; i < batch.size(); ++i) batch[i].offset = 7;
    return batch;
  };
  auto emit_one = [](const Message& m, Txn& txn) { return EmitN(m, txn, 1); };
  util::TempDir first_dir;
  ASSERT_OPEN(first, first_dir.Sub("db"), scoped);
  const std::vector<Message> batch = deliveries();
  absl::StatusOr<std::vector<Result>> results =
      first->ProcessBatch(batch, emit_one);
  ASSERT_TRUE(results.ok()) << results.status();
  for (const Result& r : *results) EXPECT_EQ(r.outcome, Outcome::kProcessed);
  const std::vector<OutboxEntry> here = ReadAll(*first);
  ASSERT_THAT(here, SizeIs(3));
  EXPECT_NE(here[0].message_id, here[1].message_id);
  EXPECT_NE(here[0].message_id, here[2].message_id);
  EXPECT_NE(here[1].message_id, here[2].message_id);
  for (const OutboxEntry& e : here) {
    EXPECT_NE(e.message_id, test::HexOfIdHash("same") + "-0");
    EXPECT_THAT(e.message_id, ::testing::EndsWith("-0"));
    EXPECT_EQ(e.message_id.size(), 34u);
  }

  // Another partition-scoped store, the same messages one at a time in
  // another order: the same IDs.
  util::TempDir second_dir;
  ASSERT_OPEN(second, second_dir.Sub("db"), scoped);
  for (int i : {2, 0, 1}) {
    ASSERT_TRUE(second->Process(batch[i], emit_one).ok());
  }
  const std::vector<OutboxEntry> there = ReadAll(*second);
  ASSERT_THAT(there, SizeIs(3));
  EXPECT_EQ(there[0].message_id, here[2].message_id);
  EXPECT_EQ(there[1].message_id, here[0].message_id);
  EXPECT_EQ(there[2].message_id, here[1].message_id);

  // A store-scoped store keeps the ID's own hash (and runs the ID once).
  EXPECT_EQ(Deliver("same", emit_one).outcome, Outcome::kProcessed);
  const std::vector<OutboxEntry> store_scoped = ReadAll(*engine_);
  ASSERT_THAT(store_scoped, SizeIs(1));
  EXPECT_EQ(store_scoped[0].message_id, test::HexOfIdHash("same") + "-0");
}

TEST_F(OutboxTest, FailedHandlersAndDuplicatesEmitNothing) {
  auto fail_after_emit = [](const Message& m, Txn& txn) {
    txn.Emit("out", "k", m.id);
    txn.Put("leaked", "1");
    return absl::UnavailableError("downstream check failed");
  };
  Result failed = Deliver("f", fail_after_emit);
  EXPECT_EQ(failed.outcome, Outcome::kFailed);
  auto throws_after_emit = [](const Message& m, Txn& txn) -> absl::Status {
    txn.Emit("out", "k", m.id);
    throw std::runtime_error("boom");
  };
  EXPECT_EQ(Deliver("t", throws_after_emit).outcome, Outcome::kFailed);
  EXPECT_THAT(ReadAll(*engine_), IsEmpty());

  // Within one batch: the first occurrence emits, the later one and a
  // redelivery in another batch do not; a failed first occurrence emits
  // nothing and its retry in the batch does.
  int runs = 0;
  auto fails_once = [&](const Message& m, Txn& txn) {
    if (m.id == "r" && runs++ == 0) {
      txn.Emit("out", "k", "lost");
      return absl::AbortedError("first try");
    }
    return EmitN(m, txn, 1);
  };
  std::vector<Message> batch(4);
  batch[0].id = "d";
  batch[1].id = "r";
  batch[2].id = "d";
  batch[3].id = "r";
  absl::StatusOr<std::vector<Result>> results =
      engine_->ProcessBatch(batch, fails_once);
  ASSERT_TRUE(results.ok()) << results.status();
  EXPECT_THAT(test::Outcomes(*results),
              ElementsAre(Outcome::kProcessed, Outcome::kFailed,
                          Outcome::kDuplicate, Outcome::kProcessed));
  EXPECT_EQ(Deliver("d", kEmitTwo).outcome, Outcome::kDuplicate);
  EXPECT_THAT(Values(ReadAll(*engine_)), ElementsAre("d:0", "r:0"));
  // A retried message's emits are numbered from 0 again.
  EXPECT_EQ(ReadAll(*engine_)[1].message_id, test::HexOfIdHash("r") + "-0");
}

TEST_F(OutboxTest, BadDestinationFailsTheMessageAndCommitsNothingOfIt) {
  for (const std::string& destination :
       {std::string(), std::string(kMaxSourceBytes + 1, 'd'),
        std::string("orders\0evil", 11)}) {
    const std::string id = absl::StrCat("bad-", destination.size());
    Result r = Deliver(id, [&](const Message&, Txn& txn) {
      txn.Put("state-of-bad", "1");
      txn.Emit("out", "k", "fine");
      txn.Emit(destination, "k", "v");
      return absl::OkStatus();
    });
    EXPECT_EQ(r.outcome, Outcome::kFailed) << destination.size();
    EXPECT_EQ(r.error.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(r.error.message(), HasSubstr("destination"));
    EXPECT_FALSE(*engine_->Seen(id));
  }
  EXPECT_EQ(*engine_->GetState("state-of-bad"), std::nullopt);
  EXPECT_THAT(ReadAll(*engine_), IsEmpty());
  // The longest destination is fine.
  const std::string longest(kMaxSourceBytes, 'd');
  EXPECT_EQ(Deliver("ok",
                    [&](const Message&, Txn& txn) {
                      txn.Emit(longest, "", "");
                      return absl::OkStatus();
                    })
                .outcome,
            Outcome::kProcessed);
  ASSERT_THAT(ReadAll(*engine_), SizeIs(1));
  EXPECT_EQ(ReadAll(*engine_)[0].destination, longest);
}

TEST_F(OutboxTest, ReadDoesNotConsumeAndHonoursItsLimit) {
  for (const char* id : {"a", "b", "c"}) Deliver(id, kEmitTwo);
  absl::StatusOr<std::vector<OutboxEntry>> some = engine_->ReadOutbox(4);
  ASSERT_TRUE(some.ok()) << some.status();
  EXPECT_THAT(Positions(*some), ElementsAre(1, 2, 3, 4));
  EXPECT_THAT(Positions(ReadAll(*engine_)), ElementsAre(1, 2, 3, 4, 5, 6));
  EXPECT_EQ(engine_->ReadOutbox(0).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(OutboxTest, ReadAfterStartsAboveThePositionAndTheAcknowledgedPrefix) {
  for (const char* id : {"a", "b", "c"}) Deliver(id, kEmitTwo);
  absl::StatusOr<std::vector<OutboxEntry>> next =
      engine_->ReadOutboxAfter(2, 3);
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_THAT(Positions(*next), ElementsAre(3, 4, 5));
  // Below the acknowledged prefix, it reads from the prefix on.
  ASSERT_TRUE(engine_->AckOutbox(4).ok());
  next = engine_->ReadOutboxAfter(1, 10);
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_THAT(Positions(*next), ElementsAre(5, 6));
  // At or above the last position: nothing.
  EXPECT_THAT(*engine_->ReadOutboxAfter(6, 10), IsEmpty());
  EXPECT_THAT(*engine_->ReadOutboxAfter(~uint64_t{0}, 10), IsEmpty());
  EXPECT_EQ(engine_->ReadOutboxAfter(2, 0).status().code(),
            absl::StatusCode::kInvalidArgument);
  absl::Status inside;
  Deliver("d", [&](const Message&, Txn&) {
    inside = engine_->ReadOutboxAfter(0, 10).status();
    return absl::OkStatus();
  });
  EXPECT_EQ(inside.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(inside.message(), HasSubstr("ReadOutboxAfter"));
}

TEST_F(OutboxTest, AckRemovesAPrefixAndPositionsAreNeverReused) {
  for (const char* id : {"a", "b", "c"}) Deliver(id, kEmitTwo);
  ASSERT_TRUE(engine_->AckOutbox(3).ok());
  EXPECT_THAT(Positions(ReadAll(*engine_)), ElementsAre(4, 5, 6));
  // Again, or an older position: OK, nothing changes.
  EXPECT_TRUE(engine_->AckOutbox(3).ok());
  EXPECT_TRUE(engine_->AckOutbox(1).ok());
  EXPECT_THAT(Positions(ReadAll(*engine_)), ElementsAre(4, 5, 6));
  // Never issued.
  for (uint64_t never : {uint64_t{0}, uint64_t{7}, ~uint64_t{0}}) {
    absl::Status s = engine_->AckOutbox(never);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << never;
    EXPECT_THAT(s.message(), HasSubstr("never issued")) << never;
  }
  ASSERT_TRUE(engine_->AckOutbox(6).ok());
  EXPECT_THAT(ReadAll(*engine_), IsEmpty());
  // Every entry is gone; the next position still follows the last one,
  // also after a reopen.
  Reopen();
  EXPECT_TRUE(engine_->AckOutbox(6).ok());
  EXPECT_EQ(engine_->AckOutbox(7).code(), absl::StatusCode::kInvalidArgument);
  Deliver("d", kEmitTwo);
  EXPECT_THAT(Positions(ReadAll(*engine_)), ElementsAre(7, 8));
  Reopen();
  EXPECT_THAT(Positions(ReadAll(*engine_)), ElementsAre(7, 8));
}

TEST_F(OutboxTest, StatsCountEmitsAcknowledgementsAndPending) {
  for (const char* id : {"a", "b", "c"}) Deliver(id, kEmitTwo);
  ASSERT_TRUE(engine_->AckOutbox(2).ok());
  absl::StatusOr<Stats> stats = engine_->GetStats();
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->outbox_emitted, 6u);
  EXPECT_EQ(stats->outbox_acknowledged, 2u);
  EXPECT_EQ(stats->outbox_pending, 4u);
  Reopen();  // pending is a figure of the store; the others count from Open
  stats = engine_->GetStats();
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->outbox_pending, 4u);
  EXPECT_EQ(stats->outbox_emitted, 0u);
  EXPECT_EQ(stats->outbox_acknowledged, 0u);
}

TEST_F(OutboxTest, DumpCheckpointAndForget) {
  Deliver("a", kEmitTwo);
  Deliver("b", kEmitTwo);
  ASSERT_TRUE(engine_->AckOutbox(1).ok());
  ASSERT_TRUE(engine_->Forget("a").ok());  // does not touch the outbox
  std::vector<DumpEntry> outbox;
  bool outbox_last = true;
  ASSERT_TRUE(engine_
                  ->Dump([&](const DumpEntry& e) {
                    if (e.kind == DumpEntry::Kind::kOutbox) {
                      outbox.push_back(e);
                    } else if (!outbox.empty()) {
                      outbox_last = false;
                    }
                    return absl::OkStatus();
                  })
                  .ok());
  EXPECT_TRUE(outbox_last);
  ASSERT_THAT(outbox, SizeIs(3));
  EXPECT_EQ(outbox[0].position, 2u);
  EXPECT_EQ(outbox[0].message_id, test::HexOfIdHash("a") + "-1");
  EXPECT_EQ(outbox[0].destination, "out");
  EXPECT_EQ(outbox[0].key, "k1");
  EXPECT_EQ(outbox[0].value, "a:1");
  EXPECT_EQ(outbox[2].position, 4u);

  const std::string copy = dir_.Sub("checkpoint");
  ASSERT_TRUE(engine_->Checkpoint(copy).ok());
  ASSERT_OPEN(restored, copy, options_);
  EXPECT_THAT(Positions(ReadAll(*restored)), ElementsAre(2, 3, 4));
  Deliver("c", kEmitTwo);
  Message m;
  m.id = "c";
  ASSERT_TRUE(restored->Process(m, kEmitTwo).ok());
  EXPECT_THAT(Positions(ReadAll(*restored)), ElementsAre(2, 3, 4, 5, 6));
}

TEST_F(OutboxTest, PartitionTxnForwardsEmitAndHeaders) {
  Deliver("p", [](const Message&, Txn& txn) {
    PartitionTxn partition(txn, "topic", 3);
    partition.Put("k", "v");
    partition.Emit("out", "key", "value");
    const std::string zeros(3, '\0');  // Header holds views: keep it alive.
    const Txn::Header headers[] = {{"trace", "t-1"}, {"", zeros}};
    partition.EmitWithHeaders("out2", "key2", "value2", headers);
    return absl::OkStatus();
  });
  std::vector<OutboxEntry> entries = ReadAll(*engine_);
  ASSERT_THAT(entries, SizeIs(2));
  EXPECT_EQ(entries[0].destination, "out");
  EXPECT_EQ(entries[0].key, "key");
  EXPECT_EQ(entries[0].value, "value");
  EXPECT_THAT(entries[0].headers, IsEmpty());
  EXPECT_EQ(entries[1].destination, "out2");
  EXPECT_EQ(entries[1].value, "value2");
  using H = std::pair<std::string, std::string>;
  EXPECT_THAT(entries[1].headers,
              ElementsAre(H("trace", "t-1"), H("", std::string(3, 0))));
  std::vector<DumpEntry> dumped;
  ASSERT_TRUE(engine_
                  ->Dump([&](const DumpEntry& e) {
                    if (e.kind == DumpEntry::Kind::kOutbox) dumped.push_back(e);
                    return absl::OkStatus();
                  })
                  .ok());
  ASSERT_THAT(dumped, SizeIs(2));
  EXPECT_EQ(dumped[1].headers, entries[1].headers);
}

// EmitWithOptions stores the destination partition and the tombstone flag
// (the second entry version) beside entries of the first, through
// PartitionTxn too, and they survive a reopen; Dump shows the partition.
TEST_F(OutboxTest, EmitWithOptionsKeepsPartitionAndTombstone) {
  Deliver("o", [](const Message&, Txn& txn) {
    PartitionTxn partition(txn, "topic", 3);
    txn.Emit("out", "plain", "v");
    const Txn::Header headers[] = {{"h", "x"}};
    partition.EmitWithOptions(
        "log", "s/a", "",
        {.partition = 3, .tombstone = true, .headers = headers});
    txn.EmitWithOptions("log", "s/b", "", {.partition = 0});
    txn.EmitWithOptions("log", "s/c", "", {.tombstone = true});
    return absl::OkStatus();
  });
  Reopen();
  std::vector<OutboxEntry> entries = ReadAll(*engine_);
  ASSERT_THAT(entries, SizeIs(4));
  EXPECT_EQ(entries[0].partition, -1);
  EXPECT_FALSE(entries[0].tombstone);
  EXPECT_EQ(entries[1].partition, 3);
  EXPECT_TRUE(entries[1].tombstone);
  EXPECT_EQ(entries[1].key, "s/a");
  EXPECT_THAT(entries[1].headers,
              ElementsAre(std::pair<std::string, std::string>("h", "x")));
  EXPECT_EQ(entries[2].partition, 0);
  EXPECT_FALSE(entries[2].tombstone);
  EXPECT_EQ(entries[3].partition, -1);
  EXPECT_TRUE(entries[3].tombstone);
  std::vector<int32_t> dumped;
  ASSERT_TRUE(engine_
                  ->Dump([&](const DumpEntry& e) {
                    if (e.kind == DumpEntry::Kind::kOutbox) {
                      dumped.push_back(e.partition);
                    }
                    return absl::OkStatus();
                  })
                  .ok());
  EXPECT_THAT(dumped, ElementsAre(-1, 3, 0, -1));
}

// A partition below -1 or a tombstone with a value fails the message with
// kInvalidArgument, and nothing of it commits.
// Each part of an emit may be under 4 GiB while the entry, stored as one
// RocksDB value, is over it: that message fails alone, and the rest of its
// batch commits (it used to fail the whole ProcessBatch). The parts are
// views of a reserved, never touched mapping: nothing is copied.
TEST_F(OutboxTest, EmitWhosePartsTogetherExceedTheLimitFailsOnlyItsMessage) {
  constexpr size_t kPart = size_t{3} << 30;  // 3 GiB each, 6 GiB together
  void* mapping = ::mmap(nullptr, 2 * kPart, PROT_READ,
                         MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  ASSERT_NE(mapping, MAP_FAILED);
  struct Unmap {
    void* at;
    ~Unmap() { ::munmap(at, 2 * kPart); }
  } unmap{mapping};
  const std::string_view key(static_cast<const char*>(mapping), kPart);
  const std::string_view value(static_cast<const char*>(mapping) + kPart,
                               kPart);
  std::vector<Message> batch(2);
  batch[0].id = "huge";
  batch[1].id = "fine";
  absl::StatusOr<std::vector<Result>> results =
      engine_->ProcessBatch(batch, [&](const Message& m, Txn& txn) {
        if (m.id == "huge") {
          txn.Emit("out", key, value);
        } else {
          txn.Emit("out", "k", "v");
        }
        return absl::OkStatus();
      });
  ASSERT_TRUE(results.ok()) << results.status();
  EXPECT_EQ((*results)[0].outcome, Outcome::kFailed);
  EXPECT_EQ((*results)[0].error.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT((*results)[0].error.message(), HasSubstr("4 GiB"));
  EXPECT_EQ((*results)[1].outcome, Outcome::kProcessed);
  ASSERT_THAT(ReadAll(*engine_), SizeIs(1));
}

TEST_F(OutboxTest, BadEmitOptionsFailTheMessage) {
  const std::pair<Txn::EmitOptions, std::string_view> bad[] = {
      {{.partition = -2}, "partition -2"},
      {{.tombstone = true}, "tombstone"},
  };
  for (const auto& [bad_options, message] : bad) {
    // A structured binding cannot be captured by clang 14 (the ASan build).
    const Txn::EmitOptions& options = bad_options;
    Result r = Deliver(message, [&](const Message&, Txn& txn) {
      txn.Put("state-of-bad", "1");
      txn.EmitWithOptions("log", "k", options.tombstone ? "v" : "", options);
      return absl::OkStatus();
    });
    EXPECT_EQ(r.outcome, Outcome::kFailed) << message;
    EXPECT_EQ(r.error.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(r.error.message(), HasSubstr(message));
  }
  EXPECT_EQ(*engine_->GetState("state-of-bad"), std::nullopt);
  EXPECT_THAT(ReadAll(*engine_), IsEmpty());
}

TEST_F(OutboxTest, CallsFromInsideAHandlerAndOnAReadOnlyEngine) {
  Deliver("a", kEmitTwo);
  absl::Status read_inside;
  absl::Status ack_inside;
  Deliver("b", [&](const Message&, Txn&) {
    read_inside = engine_->ReadOutbox(10).status();
    ack_inside = engine_->AckOutbox(1);
    return absl::OkStatus();
  });
  EXPECT_EQ(read_inside.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(ack_inside.code(), absl::StatusCode::kFailedPrecondition);

  engine_.reset();
  Options read_only = options_;
  read_only.read_only = true;
  ASSERT_OPEN(reader, dir_.Sub("db"), read_only);
  EXPECT_THAT(Positions(ReadAll(*reader)), ElementsAre(1, 2));
  EXPECT_EQ(reader->AckOutbox(1).code(), absl::StatusCode::kFailedPrecondition);
}

// A store written before the outbox existed has no idem.outbox family: a
// read-only open sees an empty outbox, a writable one adds the family.
TEST_F(OutboxTest, StoreWithoutTheOutboxFamily) {
  Deliver("a", [](const Message&, Txn& txn) {
    txn.Put("k", "v");
    return absl::OkStatus();
  });
  engine_.reset();
  test::ChangeRawFamily(
      dir_.Sub("db"), "idem.outbox",
      [](rocksdb::DB* db, rocksdb::ColumnFamilyHandle* outbox) {
        ASSERT_NE(outbox, nullptr);
        ASSERT_TRUE(db->DropColumnFamily(outbox).ok());
      });
  Options read_only = options_;
  read_only.read_only = true;
  {
    ASSERT_OPEN(reader, dir_.Sub("db"), read_only);
    EXPECT_THAT(ReadAll(*reader), IsEmpty());
    EXPECT_EQ(*reader->GetState("k"), "v");
  }
  Reopen();
  Deliver("b", kEmitTwo);
  EXPECT_THAT(Positions(ReadAll(*engine_)), ElementsAre(1, 2));
  EXPECT_EQ(*engine_->GetState("k"), "v");
}

TEST(OutboxRecordTest, KeysSortByPositionAndCursorsAreChecked) {
  EXPECT_LT(EncodeOutboxKey(1), EncodeOutboxKey(2));
  EXPECT_LT(EncodeOutboxKey(255), EncodeOutboxKey(256));
  EXPECT_LT(EncodeOutboxKey(0), EncodeOutboxKey(1));
  EXPECT_EQ(DecodeOutboxKey(EncodeOutboxKey(~uint64_t{0})), ~uint64_t{0});
  EXPECT_EQ(DecodeOutboxKey("short"), std::nullopt);
  std::string cursor = EncodeOutboxCursor(OutboxCursor{5, 3});
  ASSERT_TRUE(DecodeOutboxCursor(cursor).has_value());
  EXPECT_EQ(DecodeOutboxCursor(cursor)->issued, 5u);
  EXPECT_EQ(DecodeOutboxCursor(cursor)->acked, 3u);
  EXPECT_EQ(DecodeOutboxCursor(EncodeOutboxCursor(OutboxCursor{3, 5})),
            std::nullopt);
  EXPECT_EQ(DecodeOutboxValue(""), std::nullopt);
  std::string value =
      EncodeOutboxValue(OutboxFields{"id", "dest", "k", "v", {{"h", "x"}}});
  ASSERT_TRUE(DecodeOutboxValue(value).has_value());
  EXPECT_EQ(DecodeOutboxValue(value)->headers.size(), 1u);
  EXPECT_EQ(DecodeOutboxValue(value.substr(0, 8)), std::nullopt);
  // A header count the bytes cannot hold.
  std::string bogus = EncodeOutboxValue(OutboxFields{"id", "d", "k", "", {}});
  bogus[bogus.size() - 1] = '\x7f';
  EXPECT_EQ(DecodeOutboxValue(bogus), std::nullopt);
  // Version 2 only spells what version 1 cannot (a partition, a tombstone).
  std::string v2 = EncodeOutboxValue(
      OutboxFields{.message_id = "id", .destination = "d", .partition = 0});
  ASSERT_EQ(v2[0], 2);
  EXPECT_TRUE(DecodeOutboxValue(v2).has_value());
  for (int i = 1; i <= 4; ++i) v2[i] = '\xff';  // partition -1, no tombstone
  EXPECT_EQ(DecodeOutboxValue(v2), std::nullopt);
  value[0] = 3;  // a newer entry version
  EXPECT_EQ(DecodeOutboxValue(value), std::nullopt);
}

// A damaged entry is reported as kDataLoss naming its position, by
// ReadOutbox and by Dump; a damaged cursor fails Open.
TEST_F(OutboxTest, DamagedEntryOrCursorIsDataLoss) {
  Deliver("a", kEmitTwo);
  engine_.reset();
  auto overwrite = [&](uint64_t position, const std::string& value) {
    test::ChangeRawFamily(
        dir_.Sub("db"), "idem.outbox",
        [&](rocksdb::DB* db, rocksdb::ColumnFamilyHandle* outbox) {
          ASSERT_NE(outbox, nullptr);
          ASSERT_TRUE(
              db->Put({}, outbox, EncodeOutboxKey(position), value).ok());
        });
  };
  overwrite(2, "\x01garbage");
  Reopen();
  absl::StatusOr<std::vector<OutboxEntry>> read = engine_->ReadOutbox(10);
  EXPECT_EQ(read.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(read.status().message(), HasSubstr("position 2"));
  absl::Status dump =
      engine_->Dump([](const DumpEntry&) { return absl::OkStatus(); });
  EXPECT_EQ(dump.code(), absl::StatusCode::kDataLoss);
  // Reading only the intact first entry still works.
  read = engine_->ReadOutbox(1);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_THAT(Positions(*read), ElementsAre(1));

  engine_.reset();
  overwrite(0, "bad cursor");
  absl::StatusOr<std::unique_ptr<Engine>> reopened =
      Engine::Open(dir_.Sub("db"), options_);
  EXPECT_EQ(reopened.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(reopened.status().message(), HasSubstr("outbox cursor"));
}

// ---- Durability of what ReadOutbox returns

// Options for an engine on a CrashFileSystem in a fresh directory.
struct OnCrashFs {
  explicit OnCrashFs(Durability durability) {
    crash::CrashFsOptions fs_options;
    fs_options.journal_path = dir.Sub("journal");
    fs = std::make_shared<crash::CrashFileSystem>(
        rocksdb::FileSystem::Default(), std::move(fs_options));
    env = rocksdb::NewCompositeEnv(fs);
    options.clock = &clock;
    options.env = env.get();
    options.durability = durability;
  }
  util::TempDir dir;
  std::shared_ptr<crash::CrashFileSystem> fs;
  std::unique_ptr<rocksdb::Env> env;
  ManualClock clock{test::kStart};
  Options options;
};

// Under kBuffered, entries ReadOutbox returned survive a power loss right
// after the read (a relay may already have published them), or the check
// fails naming the lost position.
::testing::AssertionResult CheckReadEntriesAreDurable(
    const EngineHooks& hooks) {
  OnCrashFs on(Durability::kBuffered);
  util::TempDir& dir = on.dir;
  ManualClock& clock = on.clock;
  std::shared_ptr<crash::CrashFileSystem>& fs = on.fs;
  absl::StatusOr<std::unique_ptr<Engine>> engine =
      OpenEngineWithHooks(dir.Sub("db"), on.options, hooks);
  if (!engine.ok()) return ::testing::AssertionFailure() << engine.status();
  for (int i = 0; i < 5; ++i) {
    Message m;
    const std::string id = absl::StrCat("m", i);
    m.id = id;
    absl::StatusOr<Result> r = (*engine)->Process(m, kEmitTwo);
    if (!r.ok()) return ::testing::AssertionFailure() << r.status();
  }
  absl::StatusOr<std::vector<OutboxEntry>> read = (*engine)->ReadOutbox(100);
  if (!read.ok()) return ::testing::AssertionFailure() << read.status();
  const std::string image = dir.Sub("image");
  if (absl::Status s = fs->CopyDurableImage(dir.Sub("db"), image); !s.ok()) {
    return ::testing::AssertionFailure() << s;
  }
  Options plain;
  plain.clock = &clock;
  absl::StatusOr<std::unique_ptr<Engine>> after = Engine::Open(image, plain);
  if (!after.ok()) return ::testing::AssertionFailure() << after.status();
  absl::StatusOr<std::vector<OutboxEntry>> survived = (*after)->ReadOutbox(100);
  if (!survived.ok()) return ::testing::AssertionFailure() << survived.status();
  for (const OutboxEntry& e : *read) {
    bool found = false;
    for (const OutboxEntry& s : *survived) {
      if (s.position == e.position && s.message_id == e.message_id &&
          s.value == e.value) {
        found = true;
      }
    }
    if (!found) {
      return ::testing::AssertionFailure()
             << "entry " << e.position << " was returned by ReadOutbox but "
             << "lost by a power loss after the read";
    }
  }
  return ::testing::AssertionSuccess();
}

// A commit that fails on an I/O error adds no entry and uses no position;
// after the engine reopened its store, positions go on from the last
// committed one.
TEST(OutboxDurabilityTest, FailedCommitLeavesNoEntryAndNoGap) {
  OnCrashFs on(Durability::kSync);
  std::shared_ptr<crash::CrashFileSystem>& fs = on.fs;
  ASSERT_OPEN(engine, on.dir.Sub("db"), on.options);
  auto deliver = [&](const char* id) {
    Message m;
    m.id = id;
    return engine->Process(m, kEmitTwo);
  };
  ASSERT_TRUE(deliver("a").ok());
  fs->SetFault(absl::StatusCode::kUnavailable, crash::FaultTarget::kAllFiles);
  EXPECT_FALSE(deliver("b").ok());
  fs->SetFault(absl::StatusCode::kOk);
  ASSERT_TRUE(deliver("c").ok());
  std::vector<OutboxEntry> entries = ReadAll(*engine);
  EXPECT_THAT(Positions(entries), ElementsAre(1, 2, 3, 4));
  EXPECT_THAT(Values(entries), ElementsAre("a:0", "a:1", "c:0", "c:1"));
  absl::StatusOr<Stats> stats = engine->GetStats();
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->outbox_pending, 4u);
}

TEST(OutboxDurabilityTest, ReadEntriesSurviveAPowerLoss) {
  EXPECT_TRUE(CheckReadEntriesAreDurable({}));
}

TEST(OutboxDurabilityBrokenVariantTest, ReadWithoutSyncLosesReturnedEntries) {
  EngineHooks hooks;
  hooks.skip_wal_sync = true;
  ::testing::AssertionResult result = CheckReadEntriesAreDurable(hooks);
  EXPECT_FALSE(result);
  EXPECT_THAT(result.message(), HasSubstr("lost by a power loss"));
}

}  // namespace
}  // namespace idem
