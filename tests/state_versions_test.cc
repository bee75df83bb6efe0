// engine/state_versions.h: a read is stale once a commit registered its key
// (or, for a scan, any key of the range it read) after it; a read of a key a
// commit in flight writes gets that commit's value, merges folded; a key
// that commits in flight only merge into is read once they landed; writes
// of unknown keys make every read in flight stale; the table forgets only
// what no open pass can be stale against, never a change.

#include "engine/state_versions.h"

#include <atomic>
#include <optional>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

namespace idem {
namespace {

StateLayer Writes(std::initializer_list<const char*> keys) {
  StateLayer writes;
  for (const char* key : keys) writes.Put(key, std::string("v-") + key);
  return writes;
}

// Reads `key` the way BatchTxn does, noting it in `reads`.
StateVersions::Read ReadInto(StateVersions& versions, StateReads& reads,
                             const char* key) {
  StateVersions::Read read = versions.ReadKey(key, reads);
  reads.Add(key, read.version);
  return read;
}

// Scans [begin, end) the way BatchTxn does, noting the whole range.
StateVersions::RangeRead ScanInto(StateVersions& versions, StateReads& reads,
                                  const char* begin, const char* end) {
  StateVersions::RangeRead read = versions.ReadRange(begin, end, reads);
  reads.AddRange(begin, end, read.version);
  return read;
}

TEST(StateVersionsTest, ReadIsStaleOnceACommitRegistersItsKeyAfterIt) {
  StateVersions versions;
  StateReads reads;
  EXPECT_FALSE(ReadInto(versions, reads, "a").in_flight.has_value());
  EXPECT_FALSE(versions.Changed(reads));
  const StateLayer a = Writes({"a"});
  const uint64_t version = versions.Pend(a);
  EXPECT_TRUE(versions.Changed(reads));
  versions.Publish(a, version);
  EXPECT_TRUE(versions.Changed(reads));
  // A read after the registration is current.
  StateReads later;
  ReadInto(versions, later, "a");
  EXPECT_FALSE(versions.Changed(later));
}

TEST(StateVersionsTest, ReadOfAKeyInFlightGetsTheInFlightValue) {
  StateVersions versions;
  const StateLayer a = Writes({"a"});
  const uint64_t version = versions.Pend(a);
  StateReads reads;
  StateVersions::Read read = ReadInto(versions, reads, "a");
  ASSERT_TRUE(read.in_flight.has_value());
  EXPECT_EQ(*read.in_flight, std::optional<std::string>("v-a"));
  EXPECT_FALSE(versions.Changed(reads));
  versions.Publish(a, version);
  // Landed: the store has it now, and the read stays current.
  StateReads again;
  EXPECT_FALSE(versions.ReadKey("a", again).in_flight.has_value());
  EXPECT_FALSE(versions.Changed(reads));
}

// A pass already open reads without the mutex while nothing is in flight:
// a commit pended since must still be seen, and its value read.
void ReadOfOpenPassAfterAPend(StateVersions& versions, bool& saw_in_flight,
                              bool& changed) {
  StateReads reads;
  ReadInto(versions, reads, "other");  // opens the pass
  EXPECT_FALSE(ReadInto(versions, reads, "a").in_flight.has_value());
  const StateLayer a = Writes({"a"});
  const uint64_t version = versions.Pend(a);
  StateVersions::Read read = ReadInto(versions, reads, "a");
  saw_in_flight = read.in_flight == std::optional<std::optional<std::string>>(
                                        std::optional<std::string>("v-a"));
  changed = versions.Changed(reads);
  versions.Publish(a, version);
  // Landed: quiet again, and the read taken now is current.
  EXPECT_FALSE(ReadInto(versions, reads, "a").in_flight.has_value());
}

TEST(StateVersionsTest, ReadOfAnOpenPassSeesACommitPendedSinceItsFirstRead) {
  StateVersions versions;
  bool saw_in_flight = false;
  bool changed = true;
  ReadOfOpenPassAfterAPend(versions, saw_in_flight, changed);
  EXPECT_TRUE(saw_in_flight);
  // The earlier read of "a", before the pend, is stale.
  EXPECT_TRUE(changed);
}

TEST(StateVersionsBrokenVariantTest, QuietReadsIgnoringInFlightMissTheValue) {
  StateVersions versions;
  versions.set_quiet_reads_ignore_in_flight(true);
  bool saw_in_flight = true;
  bool changed = true;
  ReadOfOpenPassAfterAPend(versions, saw_in_flight, changed);
  EXPECT_FALSE(saw_in_flight);
}

TEST(StateVersionsTest, MergesInFlightFoldOverAValueInFlight) {
  StateVersions versions;
  StateLayer put;
  put.Put("n", Int64Operand(10));
  StateLayer add;
  add.Merge("n", MergeOp::kAddInt64, Int64Operand(5));
  const uint64_t first = versions.Pend(put);
  versions.Pend(add);
  StateReads reads;
  StateVersions::Read read = ReadInto(versions, reads, "n");
  ASSERT_TRUE(read.in_flight.has_value());
  ASSERT_TRUE(read.in_flight->has_value());
  EXPECT_EQ(ReadInt64(**read.in_flight), 15);
  // The put landed: the merge in flight has no base here any more, so a
  // read waits for it to land and reads the store.
  versions.Publish(put, first);
  std::atomic<bool> published{false};
  std::thread lander([&] {
    absl::SleepFor(absl::Milliseconds(50));
    published.store(true);
    versions.Publish(add, first + 1);
  });
  StateReads later;
  read = ReadInto(versions, later, "n");
  EXPECT_TRUE(published.load());
  EXPECT_FALSE(read.in_flight.has_value());
  lander.join();
}

TEST(StateVersionsTest, ReadOfAKeyOnlyMergedInFlightWaitsUntilTheyLand) {
  StateVersions versions;
  StateLayer add;
  add.Merge("n", MergeOp::kAddInt64, Int64Operand(1));
  const uint64_t version = versions.Pend(add);
  std::atomic<bool> published{false};
  std::thread lander([&] {
    absl::SleepFor(absl::Milliseconds(50));
    published.store(true);
    versions.Publish(add, version);
  });
  StateReads reads;
  StateVersions::Read read = ReadInto(versions, reads, "n");
  // Read the store (which has the merge by now), never the operand alone
  // (its base is not known here).
  EXPECT_TRUE(published.load());
  EXPECT_FALSE(read.in_flight.has_value());
  EXPECT_FALSE(versions.Changed(reads));
  lander.join();
}

TEST(StateVersionsTest, WritesToOtherKeysLeaveAReadCurrent) {
  StateVersions versions;
  StateReads reads;
  ReadInto(versions, reads, "a");
  const StateLayer b = Writes({"b", "c"});
  versions.Publish(b, versions.Pend(b));
  EXPECT_FALSE(versions.Changed(reads));
}

TEST(StateVersionsTest, ScanIsStaleOnceAKeyInItsRangeIsWrittenAfterIt) {
  StateVersions versions;
  StateReads reads;
  ScanInto(versions, reads, "b", "d");
  const StateLayer outside = Writes({"a", "d", "e"});
  versions.Publish(outside, versions.Pend(outside));
  EXPECT_FALSE(versions.Changed(reads));
  // An insert inside the range: a phantom for the scan.
  const StateLayer inside = Writes({"c1"});
  versions.Publish(inside, versions.Pend(inside));
  EXPECT_TRUE(versions.Changed(reads));
}

TEST(StateVersionsTest, UnboundedScanSeesWritesAboveItsStart) {
  StateVersions versions;
  StateReads reads;
  StateVersions::RangeRead read = versions.ReadRange("m", "", reads);
  reads.AddRange("m", "", read.version);
  const StateLayer z = Writes({"zzz"});
  versions.Publish(z, versions.Pend(z));
  EXPECT_TRUE(versions.Changed(reads));
}

TEST(StateVersionsTest, RangeDeletionMakesReadsInsideItStale) {
  StateVersions versions;
  StateReads point;
  ReadInto(versions, point, "c");
  StateReads scan;
  ScanInto(versions, scan, "a", "b");
  StateLayer deletion;
  deletion.DeleteRange("b", "d");
  const uint64_t version = versions.Pend(deletion);
  EXPECT_TRUE(versions.Changed(point));
  EXPECT_FALSE(versions.Changed(scan));
  // While in flight, it hides the keys of its range from reads.
  StateReads later;
  StateVersions::Read read = ReadInto(versions, later, "c");
  ASSERT_TRUE(read.in_flight.has_value());
  EXPECT_FALSE(read.in_flight->has_value());
  StateVersions::RangeRead range = ScanInto(versions, later, "a", "z");
  EXPECT_TRUE(range.in_flight.Find("c").range_deleted);
  EXPECT_FALSE(range.in_flight.Find("e").range_deleted);
  versions.Publish(deletion, version);
  EXPECT_TRUE(versions.Changed(point));
}

TEST(StateVersionsTest, ScanOfRangeInFlightGetsTheValuesInKeyOrder) {
  StateVersions versions;
  StateLayer writes;
  writes.Put("b", "1");
  writes.Delete("c");
  writes.Put("x", "2");
  versions.Pend(writes);
  StateReads reads;
  StateVersions::RangeRead read = ScanInto(versions, reads, "a", "d");
  ASSERT_EQ(read.in_flight.points().size(), 2u);
  EXPECT_EQ(read.in_flight.points().begin()->first, "b");
  EXPECT_EQ(read.in_flight.Find("c").write->kind, StateWrite::Kind::kDelete);
  EXPECT_EQ(read.in_flight.Find("x").write, nullptr);
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

TEST(StateVersionsTest, KeepsEveryChangeAnOpenPassCouldBeStaleAgainst) {
  StateVersions versions;
  StateReads reads;
  ReadInto(versions, reads, "a");
  const StateLayer a = Writes({"a"});
  versions.Publish(a, versions.Pend(a));
  // Far more keys than the old fixed-size table held (65,536): none of
  // them makes the open pass's read look changed, and "a" is kept.
  for (int i = 0; i < 100000; ++i) {
    StateLayer one;
    one.Put(absl::StrCat("k", i), "v");
    versions.Publish(one, versions.Pend(one));
  }
  EXPECT_TRUE(versions.Changed(reads));
  StateReads other;
  ReadInto(versions, other, "b");
  EXPECT_FALSE(versions.Changed(other));
}

TEST(StateVersionsTest, ForgetsWhatNoOpenPassCanBeStaleAgainst) {
  StateVersions versions;
  for (int i = 0; i < 100000; ++i) {
    StateLayer one;
    one.Put(absl::StrCat("k", i), "v");
    versions.Publish(one, versions.Pend(one));
  }
  EXPECT_EQ(versions.remembered(), 0u);
  {
    StateReads reads;
    ReadInto(versions, reads, "a");
    for (int i = 0; i < 10; ++i) {
      StateLayer one;
      one.Put(absl::StrCat("n", i), "v");
      versions.Publish(one, versions.Pend(one));
    }
    EXPECT_EQ(versions.remembered(), 10u);
  }
  // The pass closed: nothing left to keep.
  EXPECT_EQ(versions.remembered(), 0u);
}

}  // namespace
}  // namespace idem
