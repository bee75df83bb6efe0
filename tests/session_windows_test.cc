// SessionWindows (idem/windows.h, engine/session_windows.cc): sessions that
// extend, grow backwards and merge when an event bridges two, each emitted
// once when the partition's stream time passes its last event + gap +
// grace (also for keys that went silent), late events to the side output,
// concurrent handlers of one key, the same message IDs when a fire runs
// again, and open windows carried by a partition's export and import. The
// broken variants (engine/window_spec.h, WindowHooks) show the counts of
// fires and emits catch a merge that leaves the absorbed session's timer
// or state behind.

#include <algorithm>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "engine/window_spec.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "idem/engine.h"
#include "idem/windows.h"
#include "tests/testing/window_test_util.h"

namespace idem {
namespace {

using test::kMinute0;
using test::MicrosText;
using Windows = std::map<std::pair<std::string, std::string>, std::string>;

// Sessions with a 10 s gap and no grace, unless the options say otherwise.
SessionWindowOptions Gap10s() {
  SessionWindowOptions options;
  options.gap = absl::Seconds(10);
  options.destination = "sessions";
  options.late_destination = "late";
  return options;
}

class SessionWindowsTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(bed_.Open().ok()); }

  // Creates the windows; call first.
  void Use(const SessionWindowOptions& options, const WindowHooks& hooks = {}) {
    absl::StatusOr<SessionWindows> w =
        CreateSessionWindowsWithHooks(options, hooks);
    ASSERT_TRUE(w.ok()) << w.status();
    sessions_.emplace(*std::move(w));
  }

  WindowAdd Event(const std::string& key, int second, int32_t partition = 0) {
    return bed_.Add(*sessions_, key, absl::Seconds(second), partition);
  }

  size_t Close(int32_t partition = 0) {
    return bed_.Close(*sessions_, partition);
  }

  // The emitted sessions: (start, key) -> "count@end" (seconds after
  // kMinute0).
  Windows Sessions() {
    Windows out;
    for (const test::Emitted& e : bed_.Outbox()) {
      if (e.destination != "sessions") continue;
      int64_t end = 0;
      EXPECT_TRUE(absl::SimpleAtoi(e.end, &end));
      const int64_t end_s = (end - absl::ToUnixMicros(kMinute0)) /
                            absl::ToInt64Microseconds(absl::Seconds(1));
      EXPECT_TRUE(out.emplace(std::pair{e.start, e.key},
                              absl::StrCat(e.value, "@", end_s))
                      .second)
          << "emitted twice: " << e.key << " " << e.start;
    }
    return out;
  }

  static std::pair<std::string, std::string> At(int second, std::string key) {
    return {MicrosText(kMinute0 + absl::Seconds(second)), std::move(key)};
  }

  test::WindowBed bed_;
  std::optional<SessionWindows> sessions_;
};

TEST_F(SessionWindowsTest, EventsWithinTheGapExtendOneSession) {
  Use(Gap10s());
  EXPECT_EQ(Event("a", 0), WindowAdd::kAccepted);
  EXPECT_EQ(Event("a", 5), WindowAdd::kAccepted);
  EXPECT_EQ(Event("a", 14), WindowAdd::kAccepted);  // 9 s after 5 s: joins
  EXPECT_EQ(Event("a", 3), WindowAdd::kAccepted);   // inside it
  EXPECT_EQ(Event("z", 23), WindowAdd::kAccepted);  // 14 + 10 not reached
  EXPECT_EQ(Close(), 0u);
  EXPECT_EQ(Event("z", 24), WindowAdd::kAccepted);  // closes [0, 14]
  // A whole gap after the last event: a session of its own.
  EXPECT_EQ(Event("a", 24), WindowAdd::kAccepted);
  EXPECT_EQ(Close(), 1u);
  EXPECT_EQ(Close(), 0u);
  EXPECT_EQ(Sessions(), (Windows{{At(0, "a"), "4@14"}}));
}

TEST_F(SessionWindowsTest, AnEventBeforeASessionMovesItsStartAndItsTimer) {
  Use(Gap10s());
  Event("a", 20);
  Event("a", 12);  // within the gap before: the session starts at 12 s now
  Event("a", 3);   // and at 3 s
  Event("z", 100);
  // One timer for one session: the ones of the starts it left were moved.
  EXPECT_EQ(Close(), 1u);  // "a"; "z" is open
  EXPECT_EQ(Sessions(), (Windows{{At(3, "a"), "3@20"}}));
}

// An event between two sessions of a key, within the gap of both, merges
// them; returns (fires, emitted sessions) once the stream time passed all.
struct BridgeRun {
  size_t fires = 0;
  Windows sessions;
};

class SessionBridgeTest : public SessionWindowsTest {
 protected:
  BridgeRun Bridge(const WindowHooks& hooks) {
    SessionWindowOptions options = Gap10s();
    options.grace = absl::Seconds(30);  // the events come out of order
    Use(options, hooks);
    Event("a", 0);
    Event("a", 8);  // [0, 8]
    Event("a", 30);
    Event("a", 25);  // [25, 30]: 17 s after 8, apart
    Event("b", 1);   // another key's session, untouched
    EXPECT_EQ(Event("a", 17), WindowAdd::kAccepted);  // 9 s and 8 s away
    Event("a", 12);  // inside the merged session
    Event("z", 200);
    BridgeRun run;
    run.fires = Close();
    run.sessions = Sessions();
    return run;
  }
};

// What a correct bridge leaves: one session of six events, one fire per
// session emitted.
::testing::AssertionResult BridgedOnce(const BridgeRun& run) {
  const Windows expected = {
      {{MicrosText(kMinute0), "a"}, "6@30"},
      {{MicrosText(kMinute0 + absl::Seconds(1)), "b"}, "1@1"}};
  if (run.sessions != expected) {
    std::string got;
    for (const auto& [window, value] : run.sessions) {
      absl::StrAppend(&got, window.second, "@", window.first, "=", value, " ");
    }
    return ::testing::AssertionFailure() << "sessions emitted: " << got;
  }
  if (run.fires != run.sessions.size()) {
    return ::testing::AssertionFailure()
           << run.fires << " fires for " << run.sessions.size() << " sessions";
  }
  return ::testing::AssertionSuccess();
}

TEST_F(SessionBridgeTest, AnEventBridgingTwoSessionsMergesThemIntoOne) {
  EXPECT_TRUE(BridgedOnce(Bridge({})));
}

TEST_F(SessionBridgeTest, BrokenVariantKeepingTheAbsorbedTimerIsCaught) {
  const BridgeRun run = Bridge({.keep_merged_timers = true});
  const ::testing::AssertionResult r = BridgedOnce(run);
  EXPECT_FALSE(r);
  EXPECT_THAT(r.message(), ::testing::HasSubstr("fires for"));
}

TEST_F(SessionBridgeTest, BrokenVariantKeepingTheAbsorbedSessionIsCaught) {
  const BridgeRun run = Bridge({.keep_merged_sessions = true});
  const ::testing::AssertionResult r = BridgedOnce(run);
  EXPECT_FALSE(r);
  EXPECT_THAT(r.message(), ::testing::HasSubstr("sessions emitted"));
}

TEST_F(SessionWindowsTest, MergedSessionsFoldTheirAggregatesInStartOrder) {
  SessionWindowOptions options = Gap10s();
  options.aggregation = MergeOp::kAppend;
  options.grace = absl::Seconds(30);  // "m" comes after "y"
  Use(options);
  const std::vector<std::pair<std::string, int>> events = {
      {"x;", 0}, {"y;", 18}, {"m;", 9}};  // "m" bridges "x" and "y"
  for (const auto& event : events) {
    ASSERT_TRUE(bed_.Event(
                        [&](const Message& m, Txn& txn) {
                          return sessions_->AddOperand(m, txn, "a",
                                                       event.first);
                        },
                        absl::Seconds(event.second))
                    .ok());
  }
  ASSERT_TRUE(bed_.Event(
                      [&](const Message& m, Txn& txn) {
                        return sessions_->AddOperand(m, txn, "z", "z;");
                      },
                      absl::Seconds(100))
                  .ok());
  EXPECT_EQ(Close(), 1u);
  EXPECT_EQ(bed_.Windows("sessions"), (Windows{{At(0, "a"), "x;y;m;"}}));
}

TEST_F(SessionWindowsTest, ASilentKeysSessionClosesWhenOtherKeysMoveTime) {
  Use(Gap10s());
  Event("a", 0);
  Event("b", 3);
  Event("c", 40, /*partition=*/1);  // another partition's time: no effect
  EXPECT_EQ(Close(), 0u);
  Event("z", 12);  // "z" moves partition 0 past "a" (0 + 10), not "b"
  EXPECT_EQ(Close(), 1u);
  Event("z", 20);
  EXPECT_EQ(Close(), 1u);
  EXPECT_EQ(Sessions(), (Windows{{At(0, "a"), "1@0"}, {At(3, "b"), "1@3"}}));
}

TEST_F(SessionWindowsTest, AnEventAfterItsSessionClosedIsLateToTheSideOutput) {
  SessionWindowOptions options = Gap10s();
  options.grace = absl::Seconds(5);
  Use(options);
  Event("a", 0);
  Event("z", 50);  // "a" [0, 0] closed at 15 s; its timer has not fired
  EXPECT_EQ(Event("a", 4), WindowAdd::kLate);  // 4 + 10 + 5 <= 50
  // Near the closed session, but its own would still be open: a new one.
  EXPECT_EQ(Event("a", 36), WindowAdd::kAccepted);
  EXPECT_EQ(Close(), 1u);
  EXPECT_EQ(Event("a", 2), WindowAdd::kLate);
  Event("z", 100);
  Close();
  EXPECT_EQ(Sessions(), (Windows{{At(0, "a"), "1@0"},
                                 {At(36, "a"), "1@36"},
                                 {At(50, "z"), "1@50"}}));
  std::vector<std::string> late;
  for (const test::Emitted& e : bed_.Outbox()) {
    if (e.destination != "late") continue;
    EXPECT_EQ(e.start, e.event_time);  // the session it alone would open
    EXPECT_EQ(e.end, e.event_time);
    late.push_back(absl::StrCat(e.key, "=", e.value, "@", e.event_time));
  }
  EXPECT_EQ(
      late,
      (std::vector<std::string>{
          absl::StrCat("a=1@", MicrosText(kMinute0 + absl::Seconds(4))),
          absl::StrCat("a=1@", MicrosText(kMinute0 + absl::Seconds(2)))}));
}

// 200 events of one key, 2 s apart, in shuffled order (by `seed`) over
// four threads: every order of merges must end in one session of all of
// them. Returns the emitted sessions and how many handlers ran again.
struct ConcurrentRun {
  Windows sessions;
  uint64_t reruns = 0;
};
ConcurrentRun AddConcurrently(const EngineHooks& hooks, uint32_t seed) {
  ConcurrentRun run;
  test::WindowBed bed(hooks);
  EXPECT_TRUE(bed.Open().ok());
  SessionWindowOptions options = Gap10s();
  options.grace = absl::Hours(1);  // nothing late, whatever the order
  absl::StatusOr<SessionWindows> sessions = SessionWindows::Create(options);
  EXPECT_TRUE(sessions.ok());
  if (!sessions.ok()) return run;
  std::vector<int> seconds;
  for (int i = 0; i < 200; ++i) seconds.push_back(2 * i);
  std::shuffle(seconds.begin(), seconds.end(), std::mt19937(seed));
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (size_t i = t; i < seconds.size(); i += 4) {
        bed.Add(*sessions, "k", absl::Seconds(seconds[i]));
      }
    });
  }
  for (std::thread& t : threads) t.join();
  // An event time further ahead of the engine's clock than
  // kMaxEventTimeAhead would not move the stream time.
  bed.harness().clock().Advance(absl::Hours(2));
  bed.Add(*sessions, "z", absl::Hours(2));
  bed.Close(*sessions);
  run.sessions = bed.Windows("sessions");
  absl::StatusOr<Stats> stats = bed.engine().GetStats();
  if (stats.ok()) run.reruns = stats->handler_reruns;
  return run;
}

const Windows kOneSessionOf200 = {{{MicrosText(kMinute0), "k"}, "200"}};

TEST(SessionWindowsConcurrencyTest, ConcurrentHandlersOfOneKeyBuildOneSession) {
  const ConcurrentRun run = AddConcurrently({}, 49);
  EXPECT_EQ(run.sessions, kOneSessionOf200);
  RecordProperty("handler_reruns", static_cast<int>(run.reruns));
}

TEST(SessionWindowsConcurrencyTest,
     BrokenVariantWithoutReadValidationIsCaught) {
  // Handlers that read a session another commit changed since commit
  // anyway: one of eight shuffled runs must end in other sessions.
  bool caught = false;
  for (uint32_t seed = 1; seed <= 8 && !caught; ++seed) {
    caught = AddConcurrently({.skip_read_validation = true}, seed).sessions !=
             kOneSessionOf200;
  }
  EXPECT_TRUE(caught);
}

// "a" has a session [0 s, 5 s] (closing at 15 s); a handler adds "a" at
// 12 s, joining it, and while it runs another commit moves the stream time
// to 20 s, closing the session. In commit order the event comes after the
// close: it must open a session of its own, not join the closed one.
Windows JoinWhileTheStreamTimeMoves(const WindowHooks& hooks) {
  test::WindowBed bed;
  EXPECT_TRUE(bed.Open().ok());
  absl::StatusOr<SessionWindows> sessions =
      CreateSessionWindowsWithHooks(Gap10s(), hooks);
  EXPECT_TRUE(sessions.ok());
  if (!sessions.ok()) return {};
  bed.Add(*sessions, "a", absl::Seconds(0));
  bed.Add(*sessions, "a", absl::Seconds(5));
  absl::Notification joined, moved;
  std::thread handler([&] {
    absl::StatusOr<WindowAdd> added = bed.Event(
        [&](const Message& m, Txn& txn) {
          absl::StatusOr<WindowAdd> a = sessions->Add(m, txn, "a");
          if (!joined.HasBeenNotified()) {  // the first run only
            joined.Notify();
            moved.WaitForNotification();
          }
          return a;
        },
        absl::Seconds(12));
    EXPECT_TRUE(added.ok()) << added.status();
  });
  joined.WaitForNotification();
  bed.Add(*sessions, "z", absl::Seconds(20));
  moved.Notify();
  handler.join();
  bed.Add(*sessions, "z", absl::Seconds(100));
  bed.Close(*sessions);
  return bed.Windows("sessions");
}

const Windows kJoinedNothingClosed = {
    {{MicrosText(kMinute0), "a"}, "2"},
    {{MicrosText(kMinute0 + absl::Seconds(12)), "a"}, "1"},
    {{MicrosText(kMinute0 + absl::Seconds(20)), "z"}, "1"}};

TEST(SessionWindowsRaceTest, ASessionClosedWhileAHandlerRanIsNotJoined) {
  EXPECT_EQ(JoinWhileTheStreamTimeMoves({}), kJoinedNothingClosed);
}

TEST(SessionWindowsRaceTest, BrokenVariantJoiningWithoutConfirmingIsCaught) {
  EXPECT_NE(JoinWhileTheStreamTimeMoves({.skip_confirm_open = true}),
            kJoinedNothingClosed);
}

TEST_F(SessionWindowsTest, AFireThatRunsAgainEmitsTheSameMessageIds) {
  Use(Gap10s());
  test::WindowBed other;
  ASSERT_TRUE(other.Open().ok());
  for (test::WindowBed* bed : {&bed_, &other}) {
    const std::vector<std::pair<std::string, int>> events = {
        {"a", 0}, {"b", 2}, {"a", 6}, {"z", 40}};
    for (const auto& event : events) {
      ASSERT_TRUE(bed->Event(
                         [&](const Message& m, Txn& txn) {
                           return sessions_->Add(m, txn, event.first);
                         },
                         absl::Seconds(event.second))
                      .ok());
    }
  }
  // The first fire fails after Close emitted: nothing of it commits.
  absl::StatusOr<size_t> failed =
      bed_.Fire([&](const TimerFire& f, Txn& txn) -> absl::StatusOr<bool> {
        absl::StatusOr<bool> closed = sessions_->Close(f, txn);
        if (!closed.ok()) return closed;
        return absl::UnavailableError("the fire fails after emitting");
      });
  EXPECT_EQ(failed.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(bed_.Outbox().empty());
  EXPECT_EQ(Close(), 2u);
  ASSERT_TRUE(other
                  .Fire([&](const TimerFire& f, Txn& txn) {
                    return sessions_->Close(f, txn);
                  })
                  .ok());
  std::vector<std::string> ids, other_ids;
  for (const test::Emitted& e : bed_.Outbox()) ids.push_back(e.message_id);
  for (const test::Emitted& e : other.Outbox()) {
    other_ids.push_back(e.message_id);
  }
  EXPECT_EQ(ids.size(), 2u);
  EXPECT_EQ(ids, other_ids);
  EXPECT_EQ(Sessions(), (Windows{{At(0, "a"), "2@6"}, {At(2, "b"), "1@2"}}));
}

TEST_F(SessionWindowsTest, APartitionsExportCarriesItsOpenWindows) {
  Use(Gap10s());
  TumblingWindowOptions minute;
  minute.destination = "minutes";
  absl::StatusOr<TumblingWindows> minutes = TumblingWindows::Create(minute);
  ASSERT_TRUE(minutes.ok());
  auto both = [&](const std::string& key) {
    return [&, key](const Message& m, Txn& txn) -> absl::StatusOr<WindowAdd> {
      absl::StatusOr<WindowAdd> a = minutes->Add(m, txn, key);
      if (!a.ok()) return a;
      return sessions_->Add(m, txn, key);
    };
  };
  auto close = [&](const TimerFire& f, Txn& txn) -> absl::StatusOr<bool> {
    absl::StatusOr<bool> ours = minutes->Close(f, txn);
    if (!ours.ok() || *ours) return ours;
    return sessions_->Close(f, txn);
  };
  ASSERT_TRUE(bed_.Event(both("a"), absl::Seconds(0)).ok());
  ASSERT_TRUE(bed_.Event(both("a"), absl::Seconds(5)).ok());
  ASSERT_TRUE(bed_.Event(both("z"), absl::Seconds(30)).ok());  // "a" closed
  ASSERT_TRUE(bed_.Event(both("b"), absl::Seconds(40)).ok());  // "z" closed
  absl::StatusOr<PartitionSnapshot> snapshot =
      bed_.engine().ExportPartition(test::WindowBed::kSource, 0);
  ASSERT_TRUE(snapshot.ok()) << snapshot.status();

  test::WindowBed moved;
  ASSERT_TRUE(moved.Open().ok());
  ASSERT_TRUE(moved.engine().ImportPartition(*snapshot).ok());
  moved.set_next_offset(snapshot->offset.value_or(0) + 1);
  ASSERT_TRUE(moved.Event(both("b"), absl::Seconds(45)).ok());  // extends "b"
  ASSERT_TRUE(moved.Event(both("z"), absl::Seconds(100)).ok());
  absl::StatusOr<size_t> fired = moved.Fire(close);
  ASSERT_TRUE(fired.ok()) << fired.status();
  EXPECT_EQ(*fired, 4u);  // minute 0, "a", "b" and "z" at 30 s
  EXPECT_EQ(moved.Windows("minutes"),
            (Windows{{At(0, "a"), "2"}, {At(0, "b"), "2"}, {At(0, "z"), "1"}}));
  EXPECT_EQ(
      moved.Windows("sessions"),
      (Windows{{At(0, "a"), "2"}, {At(40, "b"), "2"}, {At(30, "z"), "1"}}));
}

}  // namespace
}  // namespace idem
