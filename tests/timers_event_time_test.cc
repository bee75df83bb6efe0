// Event time and stream time (Message::event_time, Txn::stream_time,
// Engine::StreamTime): the largest committed event time per (source,
// partition), never decreasing, committed with the offset, carried by
// partition export and import; the future bound; and the store format
// that stream times and timers mark.

#include "absl/time/time.h"

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "idem/engine.h"
#include "rocksdb/db.h"
#include "tests/testing/engine_test_util.h"

namespace idem {
namespace {

using ::testing::Contains;
using ::testing::Not;

constexpr char kStreamSource[] = "clicks";
const absl::Time kEvent0 = test::kStart - absl::Hours(1);

class StreamTimeTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(harness_.Open().ok()); }

  Engine& engine() { return harness_.engine(); }

  // Processes message `id` of kStreamSource/`partition` with `event_time`;
  // the handler records Txn::stream_time in `seen` and returns `status`.
  Result Deliver(const std::string& id, absl::Time event_time,
                 absl::Status status = absl::OkStatus(),
                 int32_t partition = 0) {
    absl::StatusOr<Result> r =
        engine().Process(Message{.id = id,
                                 .source = kStreamSource,
                                 .partition = partition,
                                 .offset = offset_++,
                                 .event_time = event_time},
                         [&](const Message& m, Txn& txn) {
                           seen_.push_back(txn.stream_time());
                           event_times_.push_back(m.event_time);
                           return status;
                         });
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *std::move(r) : Result();
  }

  absl::Time Stream(int32_t partition = 0) {
    absl::StatusOr<absl::Time> t =
        engine().StreamTime(kStreamSource, partition);
    EXPECT_TRUE(t.ok()) << t.status();
    return t.ok() ? *t : absl::InfiniteFuture();
  }

  test::EngineHarness harness_;
  int64_t offset_ = 0;
  std::vector<absl::Time> seen_;
  std::vector<absl::Time> event_times_;
};

TEST_F(StreamTimeTest, IsTheLargestCommittedEventTimeAndNeverGoesBack) {
  EXPECT_EQ(Stream(), absl::InfinitePast());
  Deliver("a", kEvent0 + absl::Seconds(10));
  EXPECT_EQ(Stream(), kEvent0 + absl::Seconds(10));
  Deliver("b", kEvent0 + absl::Seconds(3));  // out of order
  EXPECT_EQ(Stream(), kEvent0 + absl::Seconds(10));
  Deliver("c", absl::InfinitePast());  // none: unchanged
  EXPECT_EQ(Stream(), kEvent0 + absl::Seconds(10));
  Deliver("d", kEvent0 + absl::Seconds(20));
  EXPECT_EQ(Stream(), kEvent0 + absl::Seconds(20));
  EXPECT_EQ(Stream(/*partition=*/1), absl::InfinitePast());
  // Committed: it survives a restart.
  ASSERT_TRUE(harness_.Open().ok());
  EXPECT_EQ(Stream(), kEvent0 + absl::Seconds(20));
}

TEST_F(StreamTimeTest, TheHandlerSeesItIncludingEarlierMessagesOfTheBatch) {
  Deliver("a", kEvent0);
  std::vector<absl::Time> seen;
  std::vector<Message> batch = {
      Message{.id = "b",
              .source = kStreamSource,
              .offset = 10,
              .event_time = kEvent0 + absl::Seconds(5)},
      Message{.id = "c",
              .source = kStreamSource,
              .offset = 11,
              .event_time = kEvent0 + absl::Seconds(1)},
      Message{.id = "d", .source = kStreamSource, .offset = 12}};
  absl::StatusOr<std::vector<Result>> results =
      engine().ProcessBatch(batch, [&](const Message&, Txn& txn) {
        seen.push_back(txn.stream_time());
        return absl::OkStatus();
      });
  ASSERT_TRUE(results.ok()) << results.status();
  EXPECT_EQ(seen, (std::vector<absl::Time>{kEvent0 + absl::Seconds(5),
                                           kEvent0 + absl::Seconds(5),
                                           kEvent0 + absl::Seconds(5)}));
  EXPECT_EQ(Stream(), kEvent0 + absl::Seconds(5));
}

// A batch interleaving partitions and sources: each (source, partition)
// keeps its own stream time, whatever the order of its runs.
TEST_F(StreamTimeTest, EachPartitionOfAnInterleavedBatchKeepsItsOwn) {
  auto at = [](const char* id, std::string_view source, int32_t partition,
               int64_t offset, absl::Duration after) {
    return Message{.id = id,
                   .source = source,
                   .partition = partition,
                   .offset = offset,
                   .event_time = kEvent0 + after};
  };
  const std::vector<Message> batch = {
      at("a", kStreamSource, 0, 1, absl::Seconds(5)),
      at("b", kStreamSource, 1, 1, absl::Seconds(9)),
      at("c", kStreamSource, 1, 2, absl::Seconds(2)),
      at("d", kStreamSource, 0, 2, absl::Seconds(7)),
      at("e", "other", 0, 1, absl::Seconds(20)),
      at("f", kStreamSource, 0, 3, absl::Seconds(6))};
  absl::StatusOr<std::vector<Result>> results = engine().ProcessBatch(
      batch, [](const Message&, Txn&) { return absl::OkStatus(); });
  ASSERT_TRUE(results.ok()) << results.status();
  EXPECT_EQ(Stream(0), kEvent0 + absl::Seconds(7));
  EXPECT_EQ(Stream(1), kEvent0 + absl::Seconds(9));
  absl::StatusOr<absl::Time> other = engine().StreamTime("other", 0);
  ASSERT_TRUE(other.ok()) << other.status();
  EXPECT_EQ(*other, kEvent0 + absl::Seconds(20));
}

TEST_F(StreamTimeTest, ATransientlyFailedMessageDoesNotAdvanceIt) {
  Deliver("a", kEvent0);
  Result r = Deliver("b", kEvent0 + absl::Hours(1) - absl::Seconds(1),
                     absl::UnavailableError("retry me"));
  EXPECT_EQ(r.outcome, Outcome::kFailed);
  EXPECT_EQ(Stream(), kEvent0);
  // A permanent failure commits, and so does its event time.
  Deliver("c", kEvent0 + absl::Seconds(7),
          PermanentError(absl::InvalidArgumentError("bad")));
  EXPECT_EQ(Stream(), kEvent0 + absl::Seconds(7));
}

TEST_F(StreamTimeTest, AnEventTimeBeyondTheFutureBoundIsSeenButNotCounted) {
  Deliver("a", kEvent0);
  // The engine's clock is kStart: beyond kStart + kMaxEventTimeAhead.
  const absl::Time skewed =
      test::kStart + kMaxEventTimeAhead + absl::Seconds(1);
  Result r = Deliver("b", skewed);
  EXPECT_EQ(r.outcome, Outcome::kProcessed);
  EXPECT_EQ(event_times_.back(), skewed);  // the handler sees it as it is
  EXPECT_EQ(seen_.back(), kEvent0);        // it does not move stream time
  EXPECT_EQ(Stream(), kEvent0);
  // Within the bound, it counts.
  const absl::Time ahead = test::kStart + kMaxEventTimeAhead;
  Deliver("c", ahead);
  EXPECT_EQ(Stream(), ahead);
}

TEST_F(StreamTimeTest, AnInfiniteFutureEventTimeIsRefused) {
  absl::StatusOr<Result> r =
      engine().Process(Message{.id = "a",
                               .source = kStreamSource,
                               .offset = 0,
                               .event_time = absl::InfiniteFuture()},
                       [](const Message&, Txn&) { return absl::OkStatus(); });
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(StreamTimeTest, StreamTimeRefusesABadPosition) {
  EXPECT_EQ(engine().StreamTime("", 0).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(engine().StreamTime(kStreamSource, -1).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(StreamTimeTest, MovesWithItsPartitionAndItsTimers) {
  Deliver("a", kEvent0);
  ASSERT_TRUE(
      engine()
          .Process(
              Message{.id = "t", .source = kStreamSource, .offset = offset_++},
              [](const Message&, Txn& txn) {
                return txn.SetTimer("close", TimeDomain::kEvent,
                                    kEvent0 + absl::Minutes(1), "window");
              })
          .ok());
  absl::StatusOr<PartitionSnapshot> snapshot =
      engine().ExportPartition(kStreamSource, 0);
  ASSERT_TRUE(snapshot.ok()) << snapshot.status();
  EXPECT_EQ(snapshot->stream_time, kEvent0);
  ASSERT_EQ(snapshot->timers.size(), 1u);
  EXPECT_EQ(snapshot->timers[0].timer_key, "close");

  test::EngineHarness other;
  ASSERT_TRUE(other.Open().ok());
  ASSERT_TRUE(other.engine().ImportPartition(*snapshot).ok());
  absl::StatusOr<absl::Time> moved =
      other.engine().StreamTime(kStreamSource, 0);
  ASSERT_TRUE(moved.ok());
  EXPECT_EQ(*moved, kEvent0);
  absl::StatusOr<std::optional<TimerFire>> next =
      other.engine().NextTimer(kStreamSource, 0, TimeDomain::kEvent);
  ASSERT_TRUE(next.ok() && next->has_value());
  EXPECT_EQ((*next)->payload, "window");
  // An import with an infinite-future stream time is refused.
  PartitionSnapshot bad = *snapshot;
  bad.stream_time = absl::InfiniteFuture();
  EXPECT_EQ(other.engine().ImportPartition(bad).code(),
            absl::StatusCode::kInvalidArgument);
}

// The column families of the closed store at `path`.
std::vector<std::string> StreamTimeStoreFamilies(const std::string& path) {
  std::vector<std::string> names;
  EXPECT_TRUE(
      rocksdb::DB::ListColumnFamilies(rocksdb::DBOptions(), path, &names).ok());
  return names;
}

TEST_F(StreamTimeTest, TheFirstEventTimeMarksTheStoreAsFormat5) {
  Deliver("plain", absl::InfinitePast());
  harness_.Close();
  EXPECT_THAT(StreamTimeStoreFamilies(harness_.path()),
              Not(Contains("idem.format.5")));
  ASSERT_TRUE(harness_.Open().ok());
  Deliver("timed", kEvent0);
  EXPECT_EQ(Stream(), kEvent0);
  harness_.Close();
  EXPECT_THAT(StreamTimeStoreFamilies(harness_.path()),
              Contains("idem.format.5"));
}

}  // namespace
}  // namespace idem
