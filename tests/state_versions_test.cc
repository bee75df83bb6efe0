// engine/state_versions.h: a read is stale once a commit registered its key
// after it; a read of a key a commit in flight writes gets that commit's
// value; writes of unknown keys make every read in flight stale; the table
// may forget keys but never a change.

#include "engine/state_versions.h"

#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace idem {
namespace {

BatchOverlay Writes(std::initializer_list<const char*> keys) {
  BatchOverlay writes;
  for (const char* key : keys) writes.emplace(key, std::string("v-") + key);
  return writes;
}

// Reads `key` the way BatchTxn does, noting it in `reads`.
StateVersions::Read ReadInto(const StateVersions& versions, StateReads& reads,
                             const char* key) {
  StateVersions::Read read = versions.ReadKey(key);
  reads.Add(key, read.version);
  return read;
}

TEST(StateVersionsTest, ReadIsStaleOnceACommitRegistersItsKeyAfterIt) {
  StateVersions versions;
  StateReads reads;
  EXPECT_FALSE(ReadInto(versions, reads, "a").in_flight.has_value());
  EXPECT_FALSE(versions.Changed(reads));
  const BatchOverlay a = Writes({"a"});
  versions.Pend(a);
  EXPECT_TRUE(versions.Changed(reads));
  versions.Publish(a);
  EXPECT_TRUE(versions.Changed(reads));
  // A read after the registration is current.
  StateReads later;
  ReadInto(versions, later, "a");
  EXPECT_FALSE(versions.Changed(later));
}

TEST(StateVersionsTest, ReadOfAKeyInFlightGetsTheInFlightValue) {
  StateVersions versions;
  const BatchOverlay a = Writes({"a"});
  versions.Pend(a);
  StateReads reads;
  StateVersions::Read read = ReadInto(versions, reads, "a");
  ASSERT_TRUE(read.in_flight.has_value());
  EXPECT_EQ(*read.in_flight, std::optional<std::string>("v-a"));
  EXPECT_FALSE(versions.Changed(reads));
  versions.Publish(a);
  // Landed: the store has it now, and the read stays current.
  EXPECT_FALSE(versions.ReadKey("a").in_flight.has_value());
  EXPECT_FALSE(versions.Changed(reads));
}

TEST(StateVersionsTest, WritesToOtherKeysLeaveAReadCurrent) {
  StateVersions versions;
  StateReads reads;
  ReadInto(versions, reads, "a");
  const BatchOverlay b = Writes({"b", "c"});
  versions.Pend(b);
  versions.Publish(b);
  EXPECT_FALSE(versions.Changed(reads));
}

TEST(StateVersionsTest, WritesOfUnknownKeysMakeEveryReadInFlightStale) {
  StateVersions versions;
  StateReads reads;
  ReadInto(versions, reads, "a");
  versions.PendAll();
  EXPECT_TRUE(versions.Changed(reads));
  versions.PublishAll();
  EXPECT_TRUE(versions.Changed(reads));
  StateReads later;
  ReadInto(versions, later, "a");
  EXPECT_FALSE(versions.Changed(later));
}

TEST(StateVersionsTest, ForgettingKeysNeverHidesAChange) {
  StateVersions versions;
  StateReads reads;
  ReadInto(versions, reads, "a");
  const BatchOverlay a = Writes({"a"});
  versions.Pend(a);
  versions.Publish(a);
  // Enough other keys to make the table forget, "a" included.
  for (size_t i = 0; i <= StateVersions::kMaxKeys; ++i) {
    BatchOverlay one;
    one.emplace(absl::StrCat("k", i), "v");
    versions.Pend(one);
    versions.Publish(one);
  }
  EXPECT_TRUE(versions.Changed(reads));
}

}  // namespace
}  // namespace idem
