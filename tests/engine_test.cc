#include "idem/engine.h"

#include <memory>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/faulty_env.h"
#include "tests/testing/temp_dir.h"

namespace idem {
namespace {

using ::testing::ElementsAre;

absl::Status AddOne(const Message& m, Txn& txn) {
  auto v = txn.Get("counter");
  if (!v.ok()) return v.status();
  int n = 0;
  if (v->has_value() && !absl::SimpleAtoi(**v, &n)) {
    return absl::InternalError("bad counter");
  }
  txn.Put("counter", absl::StrCat(n + 1));
  txn.SetResult(absl::StrCat("done:", std::string(m.id)));
  return absl::OkStatus();
}

TEST(EngineSmokeTest, ProcessesOnceAndSuppressesDuplicate) {
  testing::TempDir dir;
  Options options;
  auto engine = Engine::Open(dir.Sub("db"), options);
  ASSERT_TRUE(engine.ok()) << engine.status();
  Message m{.id = "m1", .source = "t", .partition = 0, .offset = 7};
  auto r1 = (*engine)->Process(m, AddOne);
  ASSERT_TRUE(r1.ok()) << r1.status();
  EXPECT_EQ(r1->outcome, Outcome::kProcessed);
  EXPECT_EQ(r1->result, "done:m1");
  auto r2 = (*engine)->Process(m, AddOne);
  ASSERT_TRUE(r2.ok());
  EXPECT_EQ(r2->outcome, Outcome::kDuplicate);
  EXPECT_EQ(r2->result, "done:m1");
  EXPECT_EQ(*(*engine)->GetState("counter"), std::optional<std::string>("1"));
  EXPECT_EQ(*(*engine)->CommittedOffset("t", 0), std::optional<int64_t>(7));
  EXPECT_TRUE(*(*engine)->Seen("m1"));
  auto stats = (*engine)->GetStats();
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->processed, 1u);
  EXPECT_EQ(stats->duplicates, 1u);
  EXPECT_GT(stats->write_amplification, 0);
}

TEST(EngineSmokeTest, CommitFailsCleanlyOnWalErrorAndRecovers) {
  testing::TempDir dir;
  auto fs = std::make_shared<testing::FaultyFileSystem>(
      rocksdb::FileSystem::Default());
  auto env = testing::NewFaultyEnv(fs);
  Options options;
  options.env = env.get();
  auto engine = Engine::Open(dir.Sub("db"), options);
  ASSERT_TRUE(engine.ok()) << engine.status();
  ASSERT_TRUE((*engine)->Process({.id = "a"}, AddOne).ok());
  fs->SetFault(testing::Fault::kNoSpace);
  auto failed = (*engine)->Process({.id = "b"}, AddOne);
  EXPECT_FALSE(failed.ok());
  std::cerr << "failed status: " << failed.status() << "\n";
  EXPECT_EQ(*(*engine)->GetState("counter"), std::optional<std::string>("1"));
  EXPECT_FALSE(*(*engine)->Seen("b"));
  fs->SetFault(testing::Fault::kNone);
  auto again = (*engine)->Process({.id = "b"}, AddOne);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->outcome, Outcome::kProcessed);
  EXPECT_EQ(*(*engine)->GetState("counter"), std::optional<std::string>("2"));
}

}  // namespace
}  // namespace idem
