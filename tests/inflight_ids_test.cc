// engine/inflight_ids.h: a claim on a key waits for the claim that holds it;
// claims on other keys do not; a batch claims all of its keys or none.

#include "engine/inflight_ids.h"

#include <atomic>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "engine/record.h"
#include "gtest/gtest.h"

namespace idem {
namespace {

RecordKey Key(const char* id) { return RecordKey::ForStore(HashMessageId(id)); }

TEST(InflightIdsTest, SecondClaimOfAKeyWaitsForTheFirstsRelease) {
  InflightIds table;
  const RecordKey a = Key("a");
  InflightIds::Claim first = table.Acquire({&a, 1});
  std::atomic<bool> claimed{false};
  std::thread second([&] {
    InflightIds::Claim claim = table.Acquire({&a, 1});
    claimed.store(true);
  });
  absl::SleepFor(absl::Milliseconds(50));
  EXPECT_FALSE(claimed.load()) << "claimed while another claim held the key";
  first.Release();
  second.join();
  EXPECT_TRUE(claimed.load());
  EXPECT_EQ(table.held_for_testing(), 0u);
}

TEST(InflightIdsTest, ClaimsOfOtherKeysDoNotWait) {
  InflightIds table;
  const RecordKey a = Key("a");
  const RecordKey b = Key("b");
  InflightIds::Claim first = table.Acquire({&a, 1});
  InflightIds::Claim second = table.Acquire({&b, 1});  // returns at once
  EXPECT_EQ(table.held_for_testing(), 2u);
}

TEST(InflightIdsTest, BatchClaimsAllItsKeysOrNone) {
  InflightIds table;
  const RecordKey b = Key("b");
  const std::vector<RecordKey> batch = {Key("a"), Key("b"), Key("a")};
  InflightIds::Claim held = table.Acquire({&b, 1});
  std::atomic<bool> claimed{false};
  std::thread waiter([&] {
    InflightIds::Claim claim = table.Acquire(batch);
    claimed.store(true);
  });
  absl::SleepFor(absl::Milliseconds(50));
  // "a" is free, but the batch must not hold it while it waits for "b".
  EXPECT_FALSE(claimed.load());
  EXPECT_EQ(table.held_for_testing(), 1u);
  held.Release();
  waiter.join();
  EXPECT_TRUE(claimed.load());
  EXPECT_EQ(table.held_for_testing(), 0u);
}

TEST(InflightIdsTest, DisabledTableClaimsNothing) {
  InflightIds table;
  const RecordKey a = Key("a");
  InflightIds::Claim first = table.Acquire({&a, 1}, /*enabled=*/false);
  InflightIds::Claim second = table.Acquire({&a, 1}, /*enabled=*/false);
  EXPECT_EQ(table.held_for_testing(), 0u);
}

}  // namespace
}  // namespace idem
