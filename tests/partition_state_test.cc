#include "idem/partition_state.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "idem/engine.h"
#include "tests/testing/engine_test_util.h"
#include "util/temp_dir.h"

namespace idem {
namespace {

using ::idem::util::TempDir;

TEST(PartitionStateTest, PrefixesAreUnambiguous) {
  // Without the length, ("a/1", 2) and ("a", 1) could share a prefix.
  const std::string a = PartitionStatePrefix("a/1", 2);
  const std::string b = PartitionStatePrefix("a", 1);
  EXPECT_FALSE(a.starts_with(b));
  EXPECT_FALSE(b.starts_with(a));
  EXPECT_FALSE(
      PartitionStatePrefix("t", 1).starts_with(PartitionStatePrefix("t", 12)));
  EXPECT_FALSE(
      PartitionStatePrefix("t", 12).starts_with(PartitionStatePrefix("t", 1)));
}

TEST(PartitionStateTest, ParseInvertsThePrefix) {
  const std::string key =
      PartitionStatePrefix(std::string("odd/:\0topic", 11), 7) + "total";
  std::optional<PartitionStateKey> parsed = ParsePartitionStateKey(key);
  ASSERT_TRUE(parsed.has_value());
  EXPECT_EQ(parsed->source, std::string("odd/:\0topic", 11));
  EXPECT_EQ(parsed->partition, 7);
  EXPECT_EQ(parsed->key, "total");
}

TEST(PartitionStateTest, ParseRejectsOtherKeys) {
  for (const char* key :
       {"total", "partition/", "partition/x:t/1/k", "partition/9:t/1/k",
        "partition/1:t/-1/k", "partition/1:t/1", "partition/1:tX1/k"}) {
    EXPECT_FALSE(ParsePartitionStateKey(key).has_value()) << key;
  }
}

// Regression (tests/fuzz/partition_state_key_fuzzer.cc finds it in seconds):
// numbers spelt otherwise than PartitionStatePrefix spells them were
// accepted, so a key that no PartitionTxn wrote parsed as partition-scoped.
TEST(PartitionStateTest, ParseRejectsNumbersSpeltDifferently) {
  ASSERT_TRUE(ParsePartitionStateKey("partition/1:t/0/k").has_value());
  for (const char* key :
       {"partition/01:t/0/k", "partition/+1:t/0/k", "partition/ 1:t/0/k",
        "partition/1:t/00/k", "partition/1:t/+0/k", "partition/1:t/0 /k",
        "partition/1:t/-0/k"}) {
    EXPECT_FALSE(ParsePartitionStateKey(key).has_value()) << key;
  }
}

TEST(PartitionStateTest, PartitionTxnKeepsEachPartitionApart) {
  TempDir dir;
  auto engine = Engine::Open(dir.Sub("store"), Options());
  ASSERT_TRUE(engine.ok()) << engine.status();
  auto add = [&](const std::string& id, int32_t partition) {
    Message m;
    m.id = id;
    m.source = "orders";
    m.partition = partition;
    m.offset = 0;
    auto result = (*engine)->Process(m, [](const Message& m, Txn& txn) {
      PartitionTxn state(txn, m.source, m.partition);
      auto current = state.Get("count");
      if (!current.ok()) return current.status();
      state.Put("count", current->value_or("") + "+");
      state.SetResult("counted");
      return absl::OkStatus();
    });
    ASSERT_TRUE(result.ok());
    EXPECT_EQ(result->result, "counted");
  };
  add("a", 0);
  add("b", 0);
  add("c", 1);
  auto p0 = (*engine)->GetState(PartitionStatePrefix("orders", 0) + "count");
  auto p1 = (*engine)->GetState(PartitionStatePrefix("orders", 1) + "count");
  ASSERT_TRUE(p0.ok() && p1.ok());
  EXPECT_EQ(*p0, "++");
  EXPECT_EQ(*p1, "+");
  auto unscoped = (*engine)->GetState("count");
  ASSERT_TRUE(unscoped.ok());
  EXPECT_EQ(*unscoped, std::nullopt);
}

// Commits message `id` at (source, partition, offset) writing `writes`.
void Commit(Engine& engine, const std::string& id, const std::string& source,
            int32_t partition, int64_t offset,
            const std::vector<std::pair<std::string, std::string>>& writes) {
  Message m;
  m.id = id;
  m.source = source;
  m.partition = partition;
  m.offset = offset;
  auto result = engine.Process(m, [&](const Message& m, Txn& txn) {
    PartitionTxn state(txn, m.source, m.partition);
    for (const auto& [key, value] : writes) state.Put(key, value);
    return absl::OkStatus();
  });
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_EQ(result->outcome, Outcome::kProcessed);
}

std::optional<std::string> State(Engine& engine, const std::string& source,
                                 int32_t partition, const std::string& key) {
  auto value = engine.GetState(PartitionStatePrefix(source, partition) + key);
  EXPECT_TRUE(value.ok()) << value.status();
  return value.ok() ? *value : std::nullopt;
}

class PartitionMoveTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto from = Engine::Open(dir_.Sub("from"), Options());
    auto to = Engine::Open(dir_.Sub("to"), Options());
    ASSERT_TRUE(from.ok() && to.ok());
    from_ = *std::move(from);
    to_ = *std::move(to);
  }
  TempDir dir_;
  std::unique_ptr<Engine> from_;
  std::unique_ptr<Engine> to_;
};

TEST_F(PartitionMoveTest, ExportThenImportMovesStateAndOffset) {
  ASSERT_NO_FATAL_FAILURE(Commit(*from_, "m1", "orders", 3, 10,
                                 {{"balance", "5"}, {"count", "1"}}));
  ASSERT_NO_FATAL_FAILURE(
      Commit(*from_, "m2", "orders", 3, 11, {{"balance", "9"}}));
  ASSERT_NO_FATAL_FAILURE(
      Commit(*from_, "m3", "orders", 4, 7, {{"balance", "100"}}));
  // The target has stale state of partition 3 and state of its own.
  ASSERT_NO_FATAL_FAILURE(
      Commit(*to_, "old", "orders", 3, 2, {{"stale", "x"}}));
  ASSERT_NO_FATAL_FAILURE(
      Commit(*to_, "mine", "orders", 5, 1, {{"balance", "1"}}));

  auto snapshot = from_->ExportPartition("orders", 3);
  ASSERT_TRUE(snapshot.ok()) << snapshot.status();
  EXPECT_EQ(snapshot->offset, 11);
  EXPECT_THAT(snapshot->entries,
              ::testing::ElementsAre(::testing::Pair("balance", "9"),
                                     ::testing::Pair("count", "1")));
  ASSERT_TRUE(to_->ImportPartition(*snapshot).ok());

  EXPECT_EQ(State(*to_, "orders", 3, "balance"), "9");
  EXPECT_EQ(State(*to_, "orders", 3, "count"), "1");
  EXPECT_EQ(State(*to_, "orders", 3, "stale"), std::nullopt);
  EXPECT_EQ(State(*to_, "orders", 5, "balance"), "1");  // untouched
  EXPECT_EQ(State(*to_, "orders", 4, "balance"), std::nullopt);
  auto offset = to_->CommittedOffset("orders", 3);
  ASSERT_TRUE(offset.ok());
  EXPECT_EQ(*offset, 11);
  // The moved messages' IDs are not moved: only the state and the offset.
  auto seen = to_->Seen("m1");
  ASSERT_TRUE(seen.ok());
  EXPECT_FALSE(*seen);
}

TEST_F(PartitionMoveTest, ImportRefusesASnapshotBehindTheEngine) {
  ASSERT_NO_FATAL_FAILURE(
      Commit(*from_, "m1", "orders", 0, 5, {{"balance", "5"}}));
  ASSERT_NO_FATAL_FAILURE(
      Commit(*to_, "m9", "orders", 0, 9, {{"balance", "9"}}));
  auto snapshot = from_->ExportPartition("orders", 0);
  ASSERT_TRUE(snapshot.ok());
  absl::Status s = to_->ImportPartition(*snapshot);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(s.message()), ::testing::HasSubstr("offset 9"));
  EXPECT_EQ(State(*to_, "orders", 0, "balance"), "9");
}

TEST_F(PartitionMoveTest, ImportingTheSameSnapshotTwiceWritesOnce) {
  ASSERT_NO_FATAL_FAILURE(
      Commit(*from_, "m1", "orders", 0, 5, {{"balance", "5"}}));
  auto snapshot = from_->ExportPartition("orders", 0);
  ASSERT_TRUE(snapshot.ok());
  ASSERT_TRUE(to_->ImportPartition(*snapshot).ok());
  auto before = to_->GetStats();
  ASSERT_TRUE(to_->ImportPartition(*snapshot).ok());
  auto after = to_->GetStats();
  ASSERT_TRUE(before.ok() && after.ok());
  EXPECT_EQ(after->processed, before->processed);
  EXPECT_EQ(after->duplicates, before->duplicates + 1);
}

TEST_F(PartitionMoveTest, RejectsBadSources) {
  EXPECT_EQ(from_->ExportPartition("", 0).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(from_->ExportPartition("t", -1).status().code(),
            absl::StatusCode::kInvalidArgument);
  PartitionSnapshot bad;
  bad.source = "";
  EXPECT_EQ(to_->ImportPartition(bad).code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace idem
