// ChangelogTxn (kafka/changelog_txn.h) with the state API of docs/state.md:
// a merge is read, folded and written, so the changelog record of its key
// holds the folded value; a range deletion is a deletion of each key it
// removed, a tombstone each in the changelog; an invalid one fails the
// message as the engine's Txn does; a Put with a ttl carries the engine's
// expiry in its changelog record (refused outside the engine's Txn), a zero
// ttl is kInvalidArgument, and a Put with options but no ttl is a plain Put.

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "idem/engine.h"
#include "idem/kafka/record.h"
#include "idem/partition_snapshot.h"
#include "idem/partition_state.h"
#include "kafka/changelog_format.h"
#include "kafka/changelog_txn.h"
#include "util/temp_dir.h"

namespace idem::kafka {
namespace {

class ChangelogTxnStateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto engine = Engine::Open(dir_.Sub("db"), Options());
    ASSERT_TRUE(engine.ok()) << engine.status();
    engine_ = *std::move(engine);
  }

  // Runs `body` on the PartitionTxn of a ChangelogTxn for record `offset`
  // of orders/0; returns the message's result.
  Result Run(int64_t offset, std::function<absl::Status(Txn&)> body) {
    const std::string id = "r" + std::to_string(offset);
    Record record;
    record.topic = "orders";
    record.partition = 0;
    record.offset = offset;
    record.id = id;
    absl::StatusOr<Result> r = engine_->Process(
        Message{.id = id, .source = "orders", .partition = 0, .offset = offset},
        [&](const Message&, Txn& txn) {
          ChangelogTxn changelog(txn, record, target_, /*epoch=*/1);
          PartitionTxn state(changelog, "orders", 0);
          if (absl::Status s = body(state); !s.ok()) return s;
          return changelog.Finish();
        });
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *std::move(r) : Result();
  }

  // The last changelog record of each state key (nullopt: a tombstone).
  std::map<std::string, std::optional<std::string>> ChangelogState() {
    std::map<std::string, std::optional<std::string>> state;
    absl::StatusOr<std::vector<OutboxEntry>> entries =
        engine_->ReadOutbox(1000);
    EXPECT_TRUE(entries.ok()) << entries.status();
    if (!entries.ok()) return state;
    for (const OutboxEntry& e : *entries) {
      if (e.destination != target_.changelog_topic) continue;
      for (const char* key : {"n", "a", "b", "c"}) {
        if (e.key == StateRecordKey(key)) {
          state[key] =
              e.tombstone ? std::nullopt : std::optional<std::string>(e.value);
        }
      }
    }
    return state;
  }

  // The expiry header of the last changelog record of `key`; nullopt if
  // it has none.
  std::optional<std::string> ChangelogExpiry(const std::string& key) {
    std::optional<std::string> expiry;
    absl::StatusOr<std::vector<OutboxEntry>> entries =
        engine_->ReadOutbox(1000);
    EXPECT_TRUE(entries.ok()) << entries.status();
    if (!entries.ok()) return expiry;
    for (const OutboxEntry& e : *entries) {
      if (e.destination != target_.changelog_topic ||
          e.key != StateRecordKey(key)) {
        continue;
      }
      expiry.reset();
      for (const auto& [name, value] : e.headers) {
        if (name == kChangelogExpiresHeader) expiry = value;
      }
    }
    return expiry;
  }

  util::TempDir dir_;
  std::unique_ptr<Engine> engine_;
  const ChangelogTarget target_{"orders-state", "orders-dedupe"};
};

TEST_F(ChangelogTxnStateTest, MergeIsWrittenFoldedIntoTheChangelog) {
  for (int64_t offset : {0, 1}) {
    Result r = Run(offset, [](Txn& txn) {
      return txn.Merge("n", MergeOp::kAddInt64, Int64Operand(5));
    });
    ASSERT_EQ(r.outcome, Outcome::kProcessed) << r.error;
  }
  std::map<std::string, std::optional<std::string>> state = ChangelogState();
  ASSERT_TRUE(state["n"].has_value());
  EXPECT_EQ(ReadInt64(*state["n"]), 10);
  EXPECT_EQ(ReadInt64(engine_->GetState(PartitionStatePrefix("orders", 0) + "n")
                          ->value_or("")),
            10);
}

TEST_F(ChangelogTxnStateTest, DeleteRangeIsATombstonePerKeyItRemoved) {
  Result r = Run(0, [](Txn& txn) {
    txn.Put("a", "1");
    txn.Put("b", "2");
    txn.Put("c", "3");
    return absl::OkStatus();
  });
  ASSERT_EQ(r.outcome, Outcome::kProcessed) << r.error;
  r = Run(1, [](Txn& txn) { return txn.DeleteRange("a", "c"); });
  ASSERT_EQ(r.outcome, Outcome::kProcessed) << r.error;
  std::map<std::string, std::optional<std::string>> state = ChangelogState();
  EXPECT_EQ(state["a"], std::nullopt);
  EXPECT_EQ(state["b"], std::nullopt);
  EXPECT_EQ(state["c"], std::optional<std::string>("3"));
  const std::string prefix = PartitionStatePrefix("orders", 0);
  EXPECT_EQ(*engine_->GetState(prefix + "a"), std::nullopt);
  EXPECT_EQ(*engine_->GetState(prefix + "c"), std::optional<std::string>("3"));
}

TEST_F(ChangelogTxnStateTest, InvalidMergeOrRangeFailsTheMessage) {
  Result r = Run(0, [](Txn& txn) {
    (void)txn.Merge("n", MergeOp::kAddInt64, "short");
    return absl::OkStatus();
  });
  EXPECT_EQ(r.outcome, Outcome::kFailed);
  EXPECT_EQ(r.error.code(), absl::StatusCode::kInvalidArgument);
  r = Run(1, [](Txn& txn) {
    (void)txn.DeleteRange("b", "a");
    return absl::OkStatus();
  });
  EXPECT_EQ(r.outcome, Outcome::kFailed);
}

// A Put with a ttl, and under Options::state_ttl a plain Put, carries the
// expiry the engine stored in its changelog record; a later Put without
// one carries none.
TEST_F(ChangelogTxnStateTest, PutWithTtlCarriesTheEnginesExpiry) {
  Result r = Run(0, [](Txn& txn) {
    return txn.Put("a", "1", PutOptions{.ttl = absl::Seconds(5)});
  });
  ASSERT_EQ(r.outcome, Outcome::kProcessed) << r.error;
  absl::StatusOr<PartitionSnapshot> copy =
      engine_->ExportPartition("orders", 0);
  ASSERT_TRUE(copy.ok()) << copy.status();
  ASSERT_TRUE(copy->expires_at.contains("a"));
  EXPECT_EQ(
      ChangelogExpiry("a"),
      std::optional<std::string>(EncodeTimeHeader(copy->expires_at.at("a"))));
  r = Run(1, [](Txn& txn) {
    (void)txn.Put("a", "1", PutOptions{.ttl = absl::ZeroDuration()});
    return absl::OkStatus();
  });
  EXPECT_EQ(r.outcome, Outcome::kFailed);
  EXPECT_EQ(r.error.code(), absl::StatusCode::kInvalidArgument);
  r = Run(2, [](Txn& txn) { return txn.Put("a", "1", PutOptions()); });
  ASSERT_EQ(r.outcome, Outcome::kProcessed) << r.error;
  EXPECT_EQ(ChangelogState()["a"], std::optional<std::string>("1"));
  EXPECT_EQ(ChangelogExpiry("a"), std::nullopt);
  EXPECT_EQ(*engine_->GetState(PartitionStatePrefix("orders", 0) + "a"),
            std::optional<std::string>("1"));

  // Options::state_ttl: a plain Put expires too.
  engine_.reset();
  Options options;
  options.state_ttl = absl::Hours(1);
  auto engine = Engine::Open(dir_.Sub("db"), options);
  ASSERT_TRUE(engine.ok()) << engine.status();
  engine_ = *std::move(engine);
  r = Run(3, [](Txn& txn) {
    txn.Put("b", "2");
    return absl::OkStatus();
  });
  ASSERT_EQ(r.outcome, Outcome::kProcessed) << r.error;
  EXPECT_NE(ChangelogExpiry("b"), std::nullopt);
}

// Inside a Txn that is not the engine's, a ChangelogTxn cannot tell an
// expiry: a Put with a ttl is refused rather than made immortal.
TEST_F(ChangelogTxnStateTest, PutWithTtlOutsideTheEnginesTxnIsRefused) {
  class Plain final : public Txn {
   public:
    absl::StatusOr<std::optional<std::string>> Get(std::string_view) override {
      return std::nullopt;
    }
    using Txn::Put;
    void Put(std::string_view, std::string_view) override {}
    absl::Status Put(std::string_view, std::string_view,
                     const PutOptions&) override {
      return absl::OkStatus();
    }
    void Delete(std::string_view) override {}
    void SetResult(std::string_view) override {}
    void EmitWithOptions(std::string_view, std::string_view, std::string_view,
                         const EmitOptions&) override {}
  } plain;
  Record record;
  record.topic = "orders";
  record.partition = 0;
  ChangelogTxn changelog(plain, record, target_, /*epoch=*/1);
  PartitionTxn state(changelog, "orders", 0);
  EXPECT_EQ(state.Put("a", "1", PutOptions{.ttl = absl::Seconds(5)}).code(),
            absl::StatusCode::kUnimplemented);
  EXPECT_EQ(changelog.FinishInto(plain).code(),
            absl::StatusCode::kUnimplemented);
}

}  // namespace
}  // namespace idem::kafka
