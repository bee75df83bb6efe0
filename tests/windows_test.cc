// TumblingWindows and HoppingWindows (idem/windows.h): per-key aggregates
// in event-time windows, each (key, window) emitted once when the
// partition's stream time passes the window's end plus grace, late events
// reported, dropped or sent to a side output, aggregation by MergeOp, and
// the options' bad inputs. Session windows: tests/session_windows_test.cc.

#include "idem/windows.h"

#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "idem/engine.h"
#include "tests/testing/engine_test_util.h"
#include "tests/testing/window_test_util.h"

namespace idem {
namespace {

using test::kMinute0;
using test::MicrosText;
using Windows = std::map<std::pair<std::string, std::string>, std::string>;

class WindowsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(bed_.Open().ok());
    TumblingWindowOptions options;
    options.size = absl::Minutes(1);
    options.grace = absl::Seconds(10);
    options.destination = "counts";
    options.late_destination = late_destination_;
    absl::StatusOr<TumblingWindows> windows = TumblingWindows::Create(options);
    ASSERT_TRUE(windows.ok()) << windows.status();
    windows_.emplace(*std::move(windows));
  }

  // Counts an event of `key` at kMinute0 + `at` on partition 0; returns
  // what Add said.
  WindowAdd Event(const std::string& key, absl::Duration at) {
    return bed_.Add(*windows_, key, at);
  }

  // Fires the due event-time timers through Close; returns how many.
  size_t Close() { return bed_.Close(*windows_); }

  static std::pair<std::string, std::string> At(absl::Duration start,
                                                std::string key) {
    return {MicrosText(kMinute0 + start), std::move(key)};
  }

  std::string late_destination_;
  test::WindowBed bed_;
  std::optional<TumblingWindows> windows_;
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
  EXPECT_EQ(bed_.Windows("counts"),
            (Windows{{At(absl::ZeroDuration(), "a"), "2"},
                     {At(absl::ZeroDuration(), "b"), "2"}}));
}

TEST_F(WindowsTest, AnEventAfterItsWindowClosedIsLateAndNotCounted) {
  Event("a", absl::Seconds(5));
  Event("z", absl::Seconds(80));  // closes minute 0
  EXPECT_EQ(Close(), 1u);
  EXPECT_EQ(Event("a", absl::Seconds(30)), WindowAdd::kLate);
  Event("z", absl::Seconds(200));  // closes minute 1 ("z" at 80 s)
  EXPECT_EQ(Close(), 1u);
  EXPECT_EQ(bed_.Windows("counts"),
            (Windows{{At(absl::ZeroDuration(), "a"), "1"},
                     {At(absl::Minutes(1), "z"), "1"}}));
  // Without a late_destination a late event is dropped: only windows were
  // emitted.
  EXPECT_EQ(bed_.Outbox().size(), 2u);
}

class LateSideOutputTest : public WindowsTest {
 protected:
  void SetUp() override {
    late_destination_ = "late";
    WindowsTest::SetUp();
  }
};

TEST_F(LateSideOutputTest, ALateEventGoesToTheSideOutputNamingItsWindow) {
  Event("a", absl::Seconds(5));
  Event("z", absl::Seconds(80));  // closes minute 0
  EXPECT_EQ(Close(), 1u);
  EXPECT_EQ(Event("a", absl::Seconds(30)), WindowAdd::kLate);
  std::vector<test::Emitted> late;
  for (const test::Emitted& e : bed_.Outbox()) {
    if (e.destination == "late") late.push_back(e);
  }
  ASSERT_EQ(late.size(), 1u);
  EXPECT_EQ(late[0].key, "a");
  EXPECT_EQ(late[0].value, "1");
  EXPECT_EQ(late[0].start, MicrosText(kMinute0));
  EXPECT_EQ(late[0].end, MicrosText(kMinute0 + absl::Minutes(1)));
  EXPECT_EQ(late[0].event_time, MicrosText(kMinute0 + absl::Seconds(30)));
  // The window itself was emitted once, without the late event.
  EXPECT_EQ(bed_.Windows("counts"),
            (Windows{{At(absl::ZeroDuration(), "a"), "1"}}));
}

TEST_F(WindowsTest, CloseLeavesOtherTimersToTheCaller) {
  TimerFire other{.source = test::WindowBed::kSource,
                  .partition = 0,
                  .domain = TimeDomain::kEvent,
                  .timer_key = "reminder",
                  .fire_at = kMinute0};
  absl::StatusOr<WindowAdd> r = bed_.Event(
      [&](const Message&, Txn& txn) -> absl::StatusOr<WindowAdd> {
        absl::StatusOr<bool> ours = windows_->Close(other, txn);
        if (!ours.ok()) return ours.status();
        EXPECT_FALSE(*ours);
        return WindowAdd::kAccepted;
      },
      absl::Seconds(1));
  ASSERT_TRUE(r.ok()) << r.status();
}

TEST_F(WindowsTest, AnEventWithoutEventTimeIsRefused) {
  absl::StatusOr<Result> r = bed_.engine().Process(
      Message{.id = "n", .source = test::WindowBed::kSource, .offset = 0},
      [&](const Message& m, Txn& txn) {
        return windows_->Add(m, txn, "k").status();
      });
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->error.code(), absl::StatusCode::kInvalidArgument);
}

// Hopping windows of 60 s every 20 s, with 30 s of grace.
class HoppingWindowsTest : public ::testing::Test {
 protected:
  static constexpr int kSize = 60;
  static constexpr int kHop = 20;
  static constexpr int kGrace = 30;

  void SetUp() override {
    ASSERT_TRUE(bed_.Open().ok());
    HoppingWindowOptions options;
    options.size = absl::Seconds(kSize);
    options.hop = absl::Seconds(kHop);
    options.grace = absl::Seconds(kGrace);
    options.destination = "counts";
    options.late_destination = "late";
    absl::StatusOr<HoppingWindows> windows = HoppingWindows::Create(options);
    ASSERT_TRUE(windows.ok()) << windows.status();
    windows_.emplace(*std::move(windows));
  }

  WindowAdd Event(const std::string& key, int second) {
    return bed_.Add(*windows_, key, absl::Seconds(second));
  }

  size_t Close() { return bed_.Close(*windows_); }

  test::WindowBed bed_;
  std::optional<HoppingWindows> windows_;
};

TEST_F(HoppingWindowsTest, EachEventCountsInEveryWindowThatContainsIt) {
  // Out of order by less than the grace.
  const std::vector<std::pair<std::string, int>> events = {
      {"a", 5},  {"b", 0},  {"a", 25}, {"b", 30}, {"a", 20}, {"a", 45},
      {"a", 40}, {"b", 59}, {"a", 65}, {"b", 61}, {"c", 99}, {"c", 120}};
  const int stream = 300;  // "z" moves stream time here at the end
  for (const auto& [key, second] : events) {
    EXPECT_EQ(Event(key, second), WindowAdd::kAccepted);
  }
  EXPECT_EQ(Event("z", stream), WindowAdd::kAccepted);
  // The reference: every window [k * hop, k * hop + size) that closed by
  // `stream`, counted event by event.
  std::map<std::pair<std::string, std::string>, int> expected;
  std::set<int> closed_starts;
  for (const auto& [key, second] : events) {
    for (int start = -kSize; start <= second; start += kHop) {
      if (second < start + kSize && start + kSize + kGrace <= stream) {
        ++expected[{MicrosText(kMinute0 + absl::Seconds(start)), key}];
        closed_starts.insert(start);
      }
    }
  }
  Windows expected_text;
  for (const auto& [window, count] : expected) {
    expected_text[window] = absl::StrCat(count);
  }
  // One timer per window of the partition, whatever its keys.
  EXPECT_EQ(Close(), closed_starts.size());
  EXPECT_EQ(bed_.Windows("counts"), expected_text);
  EXPECT_EQ(Close(), 0u);
}

TEST_F(HoppingWindowsTest, AnEventPartlyLateCountsInItsOpenWindowsOnly) {
  EXPECT_EQ(Event("b", 10), WindowAdd::kAccepted);  // [-40 s, 20 s) .. [0, 60)
  EXPECT_EQ(Event("z", 95), WindowAdd::kAccepted);  // closes them: 60 + 30
  EXPECT_EQ(Close(), 3u);
  // 50 s falls in [0, 60), closed, and [20, 80) and [40, 100), open.
  EXPECT_EQ(Event("a", 50), WindowAdd::kPartlyLate);
  EXPECT_EQ(Event("z", 300), WindowAdd::kAccepted);
  Close();
  Windows counts = bed_.Windows("counts");
  auto window_of_a = [](int start) {
    return std::pair(MicrosText(kMinute0 + absl::Seconds(start)),
                     std::string("a"));
  };
  EXPECT_EQ(counts.count(window_of_a(0)), 0u);
  EXPECT_EQ(counts[window_of_a(20)], "1");
  EXPECT_EQ(counts[window_of_a(40)], "1");
  Windows late = bed_.Windows("late");
  EXPECT_EQ(late, (Windows{{{MicrosText(kMinute0), "a"}, "1"}}));
}

// Aggregation by MergeOp, on tumbling windows of a minute.
absl::StatusOr<std::string> AggregateOf(
    MergeOp op, const std::function<absl::StatusOr<WindowAdd>(
                    const TumblingWindows&, const Message&, Txn&, int)>& add) {
  test::WindowBed bed;
  if (absl::Status s = bed.Open(); !s.ok()) return s;
  TumblingWindowOptions options;
  options.destination = "out";
  options.aggregation = op;
  absl::StatusOr<TumblingWindows> windows = TumblingWindows::Create(options);
  if (!windows.ok()) return windows.status();
  for (int i = 0; i < 3; ++i) {
    absl::StatusOr<WindowAdd> added = bed.Event(
        [&](const Message& m, Txn& txn) { return add(*windows, m, txn, i); },
        absl::Seconds(10 + i));
    if (!added.ok()) return added.status();
  }
  auto ignore = [](const Message&, Txn&) -> absl::StatusOr<WindowAdd> {
    return WindowAdd::kAccepted;
  };
  if (absl::StatusOr<WindowAdd> s = bed.Event(ignore, absl::Minutes(2));
      !s.ok()) {
    return s.status();
  }
  absl::StatusOr<size_t> fired = bed.Fire(
      [&](const TimerFire& f, Txn& txn) { return windows->Close(f, txn); });
  if (!fired.ok()) return fired.status();
  Windows out = bed.Windows("out");
  if (out.size() != 1) return absl::InternalError("not one window");
  return out.begin()->second;
}

TEST(WindowAggregationTest, TheOptionsMergeOpFoldsTheAmounts) {
  auto amounts = [](const TumblingWindows& w, const Message& m, Txn& txn,
                    int i) {
    const int64_t amount[] = {3, 9, -4};
    return w.Add(m, txn, "k", amount[i]);
  };
  EXPECT_EQ(AggregateOf(MergeOp::kAddInt64, amounts).value_or(""), "8");
  EXPECT_EQ(AggregateOf(MergeOp::kMaxInt64, amounts).value_or(""), "9");
  EXPECT_EQ(AggregateOf(MergeOp::kMinInt64, amounts).value_or(""), "-4");
}

TEST(WindowAggregationTest, AppendCollectsTheOperandsInCommitOrder) {
  auto items = [](const TumblingWindows& w, const Message& m, Txn& txn, int i) {
    return w.AddOperand(m, txn, "k", absl::StrCat("item", i, ";"));
  };
  EXPECT_EQ(AggregateOf(MergeOp::kAppend, items).value_or(""),
            "item0;item1;item2;");
}

TEST(WindowAggregationTest, AnOperandThatDoesNotFitTheOpIsRefused) {
  auto amount_into_append = [](const TumblingWindows& w, const Message& m,
                               Txn& txn, int) { return w.Add(m, txn, "k", 1); };
  EXPECT_EQ(AggregateOf(MergeOp::kAppend, amount_into_append).status().code(),
            absl::StatusCode::kInvalidArgument);
  auto short_operand = [](const TumblingWindows& w, const Message& m, Txn& txn,
                          int) { return w.AddOperand(m, txn, "k", "1"); };
  EXPECT_EQ(AggregateOf(MergeOp::kMaxInt64, short_operand).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// Expects kInvalidArgument whose message names `field`.
template <typename W, typename Options>
void ExpectInvalid(const Options& options, const std::string& field) {
  absl::Status s = W::Create(options).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << field;
  EXPECT_THAT(std::string(s.message()), ::testing::HasSubstr(field));
}

// The fields every kind shares, on `good` (which Create accepts).
template <typename W, typename Options>
void ExpectSharedFieldsChecked(const Options& good, const std::string& type) {
  ASSERT_TRUE(W::Create(good).ok()) << W::Create(good).status();
  Options o = good;
  o.grace = -absl::Seconds(1);
  ExpectInvalid<W>(o, type + "::grace");
  o = good;
  o.grace = absl::InfiniteDuration();
  ExpectInvalid<W>(o, type + "::grace");
  o = good;
  o.destination = "";
  ExpectInvalid<W>(o, type + "::destination");
  o = good;
  o.name = "a/b";
  ExpectInvalid<W>(o, type + "::name");
  o = good;
  o.name = "";
  ExpectInvalid<W>(o, type + "::name");
  o = good;
  o.late_destination = std::string(kMaxSourceBytes + 1, 'x');
  ExpectInvalid<W>(o, type + "::late_destination");
  o = good;
  o.aggregation = static_cast<MergeOp>(99);
  ExpectInvalid<W>(o, type + "::aggregation");
}

TEST(TumblingWindowOptionsTest, BadOptionsAreInvalidArguments) {
  TumblingWindowOptions good;
  good.destination = "out";
  ExpectSharedFieldsChecked<TumblingWindows>(good, "TumblingWindowOptions");
  TumblingWindowOptions o = good;
  o.size = absl::ZeroDuration();
  ExpectInvalid<TumblingWindows>(o, "TumblingWindowOptions::size");
  o.size = -absl::Minutes(1);
  ExpectInvalid<TumblingWindows>(o, "TumblingWindowOptions::size");
  o.size = absl::Nanoseconds(10);  // below a microsecond
  ExpectInvalid<TumblingWindows>(o, "TumblingWindowOptions::size");
}

TEST(HoppingWindowOptionsTest, BadOptionsAreInvalidArguments) {
  HoppingWindowOptions good;
  good.destination = "out";
  ExpectSharedFieldsChecked<HoppingWindows>(good, "HoppingWindowOptions");
  HoppingWindowOptions o = good;
  o.size = absl::ZeroDuration();
  ExpectInvalid<HoppingWindows>(o, "HoppingWindowOptions::size");
  o = good;
  o.hop = absl::ZeroDuration();
  ExpectInvalid<HoppingWindows>(o, "HoppingWindowOptions::hop");
  o = good;
  o.hop = o.size + absl::Seconds(1);
  ExpectInvalid<HoppingWindows>(o, "HoppingWindowOptions::hop");
  o = good;
  o.hop = o.size / 10001;  // each event in 10,001 windows
  ExpectInvalid<HoppingWindows>(o, "HoppingWindowOptions::hop");
  o.hop = o.size / 10000;
  EXPECT_TRUE(HoppingWindows::Create(o).ok());
  o = good;
  o.hop = o.size;  // tumbling
  EXPECT_TRUE(HoppingWindows::Create(o).ok());
}

TEST(SessionWindowOptionsTest, BadOptionsAreInvalidArguments) {
  SessionWindowOptions good;
  good.destination = "out";
  ExpectSharedFieldsChecked<SessionWindows>(good, "SessionWindowOptions");
  SessionWindowOptions o = good;
  o.gap = absl::ZeroDuration();
  ExpectInvalid<SessionWindows>(o, "SessionWindowOptions::gap");
  o.gap = -absl::Seconds(5);
  ExpectInvalid<SessionWindows>(o, "SessionWindowOptions::gap");
  o.gap = absl::InfiniteDuration();
  ExpectInvalid<SessionWindows>(o, "SessionWindowOptions::gap");
}

}  // namespace
}  // namespace idem
