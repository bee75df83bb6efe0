#include "idem/partition_state.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "idem/engine.h"
#include "tests/testing/engine_test_util.h"
#include "tests/testing/temp_dir.h"

namespace idem {
namespace {

using ::idem::testing::TempDir;

TEST(PartitionStateTest, PrefixesAreUnambiguous) {
  // Without the length, ("a/1", 2) and ("a", 1) could share a prefix.
  const std::string a = PartitionStatePrefix("a/1", 2);
  const std::string b = PartitionStatePrefix("a", 1);
  EXPECT_FALSE(a.starts_with(b));
  EXPECT_FALSE(b.starts_with(a));
  EXPECT_FALSE(PartitionStatePrefix("t", 1).starts_with(
      PartitionStatePrefix("t", 12)));
  EXPECT_FALSE(PartitionStatePrefix("t", 12).starts_with(
      PartitionStatePrefix("t", 1)));
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
  for (const char* key : {"total", "partition/", "partition/x:t/1/k",
                          "partition/9:t/1/k", "partition/1:t/-1/k",
                          "partition/1:t/1", "partition/1:tX1/k"}) {
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

}  // namespace
}  // namespace idem
