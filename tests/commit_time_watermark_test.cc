// CommitTimeWatermark (engine/commit_time_watermark.h): with no commit in
// flight the horizon is the engine time; otherwise the oldest time of a
// commit in flight, whichever order commits end in; a commit ends when its
// InFlight does (also by an exception); a failed clock read registers
// nothing; a commit that registers after a horizon was returned gets a time
// at or above it, also when the clock went back; and, from many threads at
// once, no horizon ever passes a commit still in flight. The engine-level
// guarantee (a merge in flight during CompactExpired stays part of the value
// it merged into) is tested in tests/engine_commit_test.cc.

#include "engine/commit_time_watermark.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "engine/engine_clock.h"
#include "gtest/gtest.h"
#include "idem/clock.h"
#include "tests/testing/engine_test_util.h"

namespace idem {
namespace {

int64_t Micros(absl::Time t) { return absl::ToUnixMicros(t); }

class CommitTimeWatermarkTest : public ::testing::Test {
 protected:
  int64_t Horizon() {
    absl::StatusOr<int64_t> h = watermark_.Horizon();
    EXPECT_TRUE(h.ok()) << h.status();
    return h.value_or(0);
  }
  // Starts `commit`, expecting it to register at the clock's time.
  int64_t Start(CommitTimeWatermark::InFlight& commit) {
    absl::StatusOr<int64_t> t = commit.Start();
    EXPECT_TRUE(t.ok()) << t.status();
    EXPECT_EQ(t.value_or(0), Micros(clock_.Now()));
    return t.value_or(0);
  }

  ManualClock clock_{test::kStart};
  EngineClock engine_time_{&clock_};
  CommitTimeWatermark watermark_{&engine_time_};
};

TEST_F(CommitTimeWatermarkTest, WithNoCommitInFlightTheHorizonIsNow) {
  EXPECT_EQ(Horizon(), Micros(test::kStart));
  clock_.Advance(absl::Seconds(3));
  EXPECT_EQ(Horizon(), Micros(test::kStart + absl::Seconds(3)));
  EXPECT_EQ(watermark_.in_flight(), 0u);
}

TEST_F(CommitTimeWatermarkTest, HorizonIsTheOldestCommitInFlightTillItEnds) {
  CommitTimeWatermark::InFlight a(&watermark_);
  CommitTimeWatermark::InFlight b(&watermark_);
  CommitTimeWatermark::InFlight c(&watermark_);
  const int64_t ta = Start(a);
  clock_.Advance(absl::Seconds(5));
  const int64_t tb = Start(b);
  clock_.Advance(absl::Seconds(5));
  const int64_t tc = Start(c);
  clock_.Advance(absl::Seconds(5));
  EXPECT_EQ(watermark_.in_flight(), 3u);
  EXPECT_EQ(Horizon(), ta);
  b.End();  // out of order: the oldest still holds the horizon
  EXPECT_EQ(Horizon(), ta);
  a.End();
  EXPECT_EQ(Horizon(), tc);
  c.End();
  c.End();  // a second End is a no-op
  EXPECT_EQ(watermark_.in_flight(), 0u);
  EXPECT_EQ(Horizon(), Micros(clock_.Now()));
  EXPECT_LT(ta, tb);
}

TEST_F(CommitTimeWatermarkTest, ACommitEndsWithItsScopeAlsoByAnException) {
  {
    CommitTimeWatermark::InFlight a(&watermark_);
    Start(a);
    clock_.Advance(absl::Seconds(1));
    EXPECT_EQ(Horizon(), Micros(test::kStart));
  }
  EXPECT_EQ(watermark_.in_flight(), 0u);
  try {
    CommitTimeWatermark::InFlight b(&watermark_);
    Start(b);
    throw std::runtime_error("a handler threw");
  } catch (const std::runtime_error&) {
  }
  EXPECT_EQ(watermark_.in_flight(), 0u);
  EXPECT_EQ(Horizon(), Micros(clock_.Now()));
}

// A clock that cannot be read.
class BrokenClock : public Clock {
 public:
  absl::Time Now() override { return absl::InfiniteFuture(); }
};

TEST(CommitTimeWatermarkClockTest, AFailedClockReadRegistersNothing) {
  BrokenClock clock;
  EngineClock engine_time(&clock);
  CommitTimeWatermark watermark(&engine_time);
  CommitTimeWatermark::InFlight commit(&watermark);
  EXPECT_EQ(commit.Start().status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(watermark.in_flight(), 0u);
  EXPECT_EQ(watermark.Horizon().status().code(),
            absl::StatusCode::kFailedPrecondition);
}

// With an engine time that follows the clock back (the broken variant
// EngineHooks::engine_time_follows_clock), a commit still registers at or
// above every horizon returned before it.
TEST(CommitTimeWatermarkClockTest,
     ACommitAfterAHorizonIsNotBelowItIfTimeWentBack) {
  ManualClock clock(test::kStart + absl::Seconds(10));
  EngineClock engine_time(&clock, /*monotonic=*/false);
  CommitTimeWatermark watermark(&engine_time);
  absl::StatusOr<int64_t> horizon = watermark.Horizon();
  ASSERT_TRUE(horizon.ok()) << horizon.status();
  clock.Set(test::kStart);
  CommitTimeWatermark::InFlight commit(&watermark);
  absl::StatusOr<int64_t> t = commit.Start();
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(*t, *horizon);
}

// The deliberately broken variant (EngineHooks::watermark_ignores_in_flight)
// is the engine time alone.
TEST(CommitTimeWatermarkClockTest, BrokenVariantIgnoresCommitsInFlight) {
  ManualClock clock(test::kStart);
  EngineClock engine_time(&clock);
  CommitTimeWatermark watermark(&engine_time, /*ignore_in_flight=*/true);
  CommitTimeWatermark::InFlight commit(&watermark);
  ASSERT_TRUE(commit.Start().ok());
  clock.Advance(absl::Seconds(1));
  EXPECT_EQ(watermark.Horizon().value_or(0),
            Micros(test::kStart + absl::Seconds(1)));
}

// Threads register and end commits while the clock moves and horizons are
// taken. Each commit shows its time in a slot from Start's return until
// before it ends; a slot read after a horizon was returned that shows a
// time below it is a commit the horizon passed while it was in flight (one
// that registered later gets a time at or above the horizon). Run under
// ThreadSanitizer too (scripts/tsan.sh).
TEST(CommitTimeWatermarkConcurrencyTest, NoHorizonPassesACommitInFlight) {
  constexpr int kThreads = 4;
  constexpr int kCommits = 3000;
  constexpr int64_t kNone = std::numeric_limits<int64_t>::max();
  ManualClock clock(test::kStart);
  EngineClock engine_time(&clock);
  CommitTimeWatermark watermark(&engine_time);
  std::vector<std::atomic<int64_t>> slots(kThreads);
  for (std::atomic<int64_t>& slot : slots) slot.store(kNone);
  std::atomic<int64_t> last_horizon{std::numeric_limits<int64_t>::min()};
  std::atomic<int> running{kThreads};
  std::atomic<int> below{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      for (int n = 0; n < kCommits; ++n) {
        const int64_t before = last_horizon.load();
        CommitTimeWatermark::InFlight commit(&watermark);
        absl::StatusOr<int64_t> t = commit.Start();
        if (!t.ok() || *t < before) below.fetch_add(1);
        if (t.ok()) slots[i].store(*t);
        if (n % 7 == 0) std::this_thread::yield();
        slots[i].store(kNone);
      }
      running.fetch_sub(1);
    });
  }
  int horizons = 0;
  std::string passed;
  while (running.load() > 0) {
    clock.Advance(absl::Microseconds(3));
    absl::StatusOr<int64_t> horizon = watermark.Horizon();
    ASSERT_TRUE(horizon.ok()) << horizon.status();
    last_horizon.store(*horizon);
    ++horizons;
    for (int i = 0; i < kThreads; ++i) {
      const int64_t t = slots[i].load();
      if (t < *horizon && passed.empty()) {
        passed = absl::StrCat("a horizon of ", *horizon,
                              " passed a commit in flight at ", t);
      }
    }
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(passed, "");
  EXPECT_EQ(below.load(), 0) << "commits registered below an earlier horizon";
  EXPECT_GT(horizons, 0);
  EXPECT_EQ(watermark.in_flight(), 0u);
}

}  // namespace
}  // namespace idem
