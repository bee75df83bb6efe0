// TumblingWindows (idem/windows.h): per-key sums in event-time windows,
// each (key, window) emitted once when the partition's stream time passes
// the window's end plus grace, late events reported and not counted, and
// the options' bad inputs.

#include "idem/windows.h"

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "idem/engine.h"
#include "tests/testing/engine_test_util.h"

namespace idem {
namespace {

constexpr char kClicks[] = "clicks";
// A minute boundary: windows of one minute start here.
const absl::Time kMinute0 = absl::FromUnixSeconds(1'699'999'980);

class WindowsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(harness_.Open().ok());
    TumblingWindowOptions options;
    options.size = absl::Minutes(1);
    options.grace = absl::Seconds(10);
    options.destination = "counts";
    absl::StatusOr<TumblingWindows> windows = TumblingWindows::Create(options);
    ASSERT_TRUE(windows.ok()) << windows.status();
    windows_.emplace(*std::move(windows));
  }

  // Counts an event of `key` at kMinute0 + `at` on partition 0; returns
  // what Add said.
  WindowAdd Event(const std::string& key, absl::Duration at) {
    WindowAdd added = WindowAdd::kLate;
    // Message views its ID: keep the bytes alive through the call.
    const std::string id = absl::StrCat("e", next_++);
    Message m{.id = id,
              .source = kClicks,
              .offset = next_,
              .event_time = kMinute0 + at};
    absl::StatusOr<Result> r =
        harness_.engine().Process(m, [&](const Message& msg, Txn& txn) {
          absl::StatusOr<WindowAdd> a = windows_->Add(msg, txn, key);
          if (!a.ok()) return a.status();
          added = *a;
          return absl::OkStatus();
        });
    EXPECT_TRUE(r.ok() && r->outcome == Outcome::kProcessed);
    return added;
  }

  // Fires the due event-time timers through Close; returns how many.
  size_t Close() {
    absl::StatusOr<size_t> fired = harness_.engine().FireTimers(
        kClicks, 0, TimeDomain::kEvent, absl::InfiniteFuture(), 100,
        [&](const TimerFire& fire, Txn& txn) -> absl::Status {
          absl::StatusOr<bool> ours = windows_->Close(fire, txn);
          if (!ours.ok()) return ours.status();
          return *ours ? absl::OkStatus()
                       : absl::InternalError("not a window's timer");
        });
    EXPECT_TRUE(fired.ok()) << fired.status();
    return fired.ok() ? *fired : 0;
  }

  // The emitted (key, sum) pairs per window start.
  std::map<std::string, std::map<std::string, std::string>> Emitted() {
    std::map<std::string, std::map<std::string, std::string>> out;
    absl::StatusOr<std::vector<OutboxEntry>> entries =
        harness_.engine().ReadOutbox(1000);
    EXPECT_TRUE(entries.ok()) << entries.status();
    if (!entries.ok()) return out;
    for (const OutboxEntry& e : *entries) {
      std::string start;
      for (const auto& [name, value] : e.headers) {
        if (name == "idem.window.start") start = value;
      }
      EXPECT_EQ(e.destination, "counts");
      EXPECT_TRUE(out[start].emplace(e.key, e.value).second)
          << "emitted twice: " << e.key;
    }
    return out;
  }

  static std::string StartOf(absl::Time t) {
    return absl::StrCat(absl::ToUnixMicros(t));
  }

  test::EngineHarness harness_;
  std::optional<TumblingWindows> windows_;
  int64_t next_ = 0;
};

TEST_F(WindowsTest, EachKeysWindowIsEmittedOnceWhenStreamTimePassesIt) {
  EXPECT_EQ(Event("a", absl::Seconds(1)), WindowAdd::kAccepted);
  EXPECT_EQ(Event("b", absl::Seconds(20)), WindowAdd::kAccepted);
  EXPECT_EQ(Event("a", absl::Seconds(59)), WindowAdd::kAccepted);
  // Another key moves stream time past the end, but not past the grace.
  EXPECT_EQ(Event("c", absl::Seconds(65)), WindowAdd::kAccepted);
  EXPECT_EQ(Close(), 0u);
  // Within the grace period a late event still counts.
  EXPECT_EQ(Event("b", absl::Seconds(40)), WindowAdd::kAccepted);
  // "a" and "b" went silent; "c" closes their window.
  EXPECT_EQ(Event("c", absl::Seconds(70)), WindowAdd::kAccepted);
  EXPECT_EQ(Close(), 1u);
  EXPECT_EQ(Close(), 0u);  // once
  auto emitted = Emitted();
  EXPECT_EQ(emitted.size(), 1u);
  EXPECT_EQ(emitted[StartOf(kMinute0)],
            (std::map<std::string, std::string>{{"a", "2"}, {"b", "2"}}));
}

TEST_F(WindowsTest, AnEventAfterItsWindowClosedIsLateAndNotCounted) {
  Event("a", absl::Seconds(5));
  Event("z", absl::Seconds(80));  // closes minute 0
  EXPECT_EQ(Close(), 1u);
  EXPECT_EQ(Event("a", absl::Seconds(30)), WindowAdd::kLate);
  Event("z", absl::Seconds(200));  // closes minute 1 ("z" at 80 s)
  EXPECT_EQ(Close(), 1u);
  auto emitted = Emitted();
  EXPECT_EQ(emitted[StartOf(kMinute0)],
            (std::map<std::string, std::string>{{"a", "1"}}));
  EXPECT_EQ(emitted[StartOf(kMinute0 + absl::Minutes(1))],
            (std::map<std::string, std::string>{{"z", "1"}}));
}

TEST_F(WindowsTest, CloseLeavesOtherTimersToTheCaller) {
  TimerFire other{.source = kClicks,
                  .partition = 0,
                  .domain = TimeDomain::kEvent,
                  .timer_key = "reminder",
                  .fire_at = kMinute0};
  test::EngineHarness h;
  ASSERT_TRUE(h.Open().ok());
  absl::StatusOr<Result> r = h.engine().Process(
      Message{.id = "x"}, [&](const Message&, Txn& txn) -> absl::Status {
        absl::StatusOr<bool> ours = windows_->Close(other, txn);
        if (!ours.ok()) return ours.status();
        EXPECT_FALSE(*ours);
        return absl::OkStatus();
      });
  ASSERT_TRUE(r.ok());
}

TEST(TumblingWindowOptionsTest, BadOptionsAreInvalidArguments) {
  auto invalid = [](TumblingWindowOptions options) {
    return TumblingWindows::Create(options).status().code() ==
           absl::StatusCode::kInvalidArgument;
  };
  TumblingWindowOptions good;
  good.destination = "out";
  EXPECT_TRUE(TumblingWindows::Create(good).ok());
  TumblingWindowOptions o = good;
  o.size = absl::ZeroDuration();
  EXPECT_TRUE(invalid(o));
  o.size = -absl::Minutes(1);
  EXPECT_TRUE(invalid(o));
  o = good;
  o.grace = -absl::Seconds(1);
  EXPECT_TRUE(invalid(o));
  o = good;
  o.destination = "";
  EXPECT_TRUE(invalid(o));
  o = good;
  o.name = "a/b";
  EXPECT_TRUE(invalid(o));
}

TEST_F(WindowsTest, AnEventWithoutEventTimeIsRefused) {
  absl::StatusOr<Result> r = harness_.engine().Process(
      Message{.id = "n", .source = kClicks, .offset = 0},
      [&](const Message& m, Txn& txn) {
        return windows_->Add(m, txn, "k").status();
      });
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->error.code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace idem
