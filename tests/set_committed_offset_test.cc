// Engine::SetCommittedOffset (engine/engine_partition.cc): it rewinds or
// advances one partition's committed offset, durably, and touches neither
// state nor dedupe records, so a replay within the dedupe window is still a
// duplicate unless its ID is forgotten.

#include <memory>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "gtest/gtest.h"
#include "idem/engine.h"
#include "util/temp_dir.h"

namespace idem {
namespace {

// Counts the runs of each message in state key "runs/<id>".
absl::Status CountRun(const Message& m, Txn& txn) {
  const std::string key = "runs/" + std::string(m.id);
  absl::StatusOr<std::optional<std::string>> runs = txn.Get(key);
  if (!runs.ok()) return runs.status();
  const int n = runs->has_value() ? std::stoi(**runs) : 0;
  txn.Put(key, std::to_string(n + 1));
  return absl::OkStatus();
}

class SetCommittedOffsetTest : public ::testing::Test {
 protected:
  void SetUp() override {
    engine_ = Open(Options());
    ASSERT_NE(engine_, nullptr);
    for (int64_t offset = 0; offset < 5; ++offset) {
      ProcessAt(*engine_, offset, Outcome::kProcessed);
    }
  }

  std::unique_ptr<Engine> Open(Options options) {
    absl::StatusOr<std::unique_ptr<Engine>> engine =
        Engine::Open(dir_.Sub("db"), options);
    EXPECT_TRUE(engine.ok()) << engine.status();
    return engine.ok() ? std::move(*engine) : nullptr;
  }

  // Delivers message "m<offset>" at `offset` of ("orders", 0).
  static void ProcessAt(Engine& engine, int64_t offset, Outcome expected) {
    const std::string id = "m" + std::to_string(offset);
    absl::StatusOr<Result> result = engine.Process(
        {.id = id, .source = "orders", .partition = 0, .offset = offset},
        CountRun);
    ASSERT_TRUE(result.ok()) << result.status();
    EXPECT_EQ(result->outcome, expected) << id;
  }

  std::optional<int64_t> Offset(Engine& engine, int32_t partition = 0) {
    absl::StatusOr<std::optional<int64_t>> offset =
        engine.CommittedOffset("orders", partition);
    EXPECT_TRUE(offset.ok()) << offset.status();
    return offset.ok() ? *offset : std::nullopt;
  }

  util::TempDir dir_;
  std::unique_ptr<Engine> engine_;
};

TEST_F(SetCommittedOffsetTest, RewindsAndLeavesStateAndRecordsAlone) {
  ASSERT_EQ(Offset(*engine_), 4);
  ASSERT_TRUE(engine_->SetCommittedOffset("orders", 0, 1).ok());
  EXPECT_EQ(Offset(*engine_), 1);
  EXPECT_EQ(*engine_->GetState("runs/m3"), std::optional<std::string>("1"));
  EXPECT_TRUE(*engine_->Seen("m3"));

  // The replay: within the dedupe window the IDs are duplicates, unless
  // forgotten; either way the offset moves forward again.
  ASSERT_TRUE(engine_->Forget("m3").ok());
  ProcessAt(*engine_, 2, Outcome::kDuplicate);
  EXPECT_EQ(Offset(*engine_), 2);
  ProcessAt(*engine_, 3, Outcome::kProcessed);
  ProcessAt(*engine_, 4, Outcome::kDuplicate);
  EXPECT_EQ(Offset(*engine_), 4);
  EXPECT_EQ(*engine_->GetState("runs/m2"), std::optional<std::string>("1"));
  EXPECT_EQ(*engine_->GetState("runs/m3"), std::optional<std::string>("2"));
}

TEST_F(SetCommittedOffsetTest, AdvancesAndSetsAPartitionWithoutAnOffset) {
  ASSERT_TRUE(engine_->SetCommittedOffset("orders", 0, 100).ok());
  EXPECT_EQ(Offset(*engine_), 100);
  ASSERT_EQ(Offset(*engine_, 7), std::nullopt);
  ASSERT_TRUE(engine_->SetCommittedOffset("orders", 7, 0).ok());
  EXPECT_EQ(Offset(*engine_, 7), 0);
  EXPECT_EQ(Offset(*engine_), 100);  // the other partition kept its own
}

TEST_F(SetCommittedOffsetTest, IsDurableAcrossAReopen) {
  engine_.reset();
  Options options;
  options.durability = Durability::kBuffered;
  std::unique_ptr<Engine> buffered = Open(options);
  ASSERT_NE(buffered, nullptr);
  ASSERT_TRUE(buffered->SetCommittedOffset("orders", 0, 2).ok());
  buffered.reset();
  std::unique_ptr<Engine> reopened = Open(Options());
  ASSERT_NE(reopened, nullptr);
  EXPECT_EQ(Offset(*reopened), 2);
}

TEST_F(SetCommittedOffsetTest, RejectsBadArgumentsAndChangesNothing) {
  EXPECT_EQ(engine_->SetCommittedOffset("", 0, 1).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(engine_->SetCommittedOffset("orders", -1, 1).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(engine_->SetCommittedOffset("orders", 0, -1).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(
      engine_->SetCommittedOffset(std::string(kMaxSourceBytes + 1, 's'), 0, 1)
          .code(),
      absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Offset(*engine_), 4);
}

TEST_F(SetCommittedOffsetTest, FailsOnAReadOnlyEngine) {
  engine_.reset();
  Options options;
  options.read_only = true;
  std::unique_ptr<Engine> reader = Open(options);
  ASSERT_NE(reader, nullptr);
  EXPECT_EQ(reader->SetCommittedOffset("orders", 0, 1).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(Offset(*reader), 4);
}

TEST_F(SetCommittedOffsetTest, FailsFromInsideAHandler) {
  absl::Status inside;
  absl::StatusOr<Result> result =
      engine_->Process({.id = "inside"}, [&](const Message&, Txn&) {
        inside = engine_->SetCommittedOffset("orders", 0, 1);
        return absl::OkStatus();
      });
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(inside.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(Offset(*engine_), 4);
}

}  // namespace
}  // namespace idem
