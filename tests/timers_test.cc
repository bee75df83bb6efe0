// Durable timers (idem/timers.h): Txn::SetTimer and CancelTimer commit with
// the handler's write, Engine::FireTimers fires what is due in each domain
// with its handler's effects in the same write as the timer's deletion, and
// the bad inputs of the issue. The broken variants show that the checks
// catch a fire written apart from its effects and a fire that is not
// validated against a concurrent move of its timer.

#include <atomic>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "idem/crash/file_system.h"
#include "idem/engine.h"
#include "tests/testing/engine_test_util.h"

namespace idem {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr char kTimerSource[] = "orders";

// A timer handler that records each fire's key and writes "fired/<key>".
class TimerLog {
 public:
  absl::Status operator()(const TimerFire& fire, Txn& txn) {
    keys.push_back(fire.timer_key);
    txn.Put("fired/" + fire.timer_key, fire.payload);
    return absl::OkStatus();
  }
  std::vector<std::string> keys;
};

class TimersTest : public ::testing::Test {
 protected:
  explicit TimersTest(const EngineHooks& hooks = {},
                      test::EngineHarness::Storage storage =
                          test::EngineHarness::Storage::kDefault)
      : harness_(Options(), storage, hooks) {}

  void SetUp() override { ASSERT_TRUE(harness_.Open().ok()); }

  Engine& engine() { return harness_.engine(); }

  // Processes message `id` of kTimerSource/`partition` at the next offset,
  // with `event_time`, running `body`.
  Result Deliver(const std::string& id, absl::Time event_time,
                 const std::function<absl::Status(Txn&)>& body,
                 int32_t partition = 0) {
    Message m{.id = id,
              .source = kTimerSource,
              .partition = partition,
              .offset = offset_++,
              .event_time = event_time};
    absl::StatusOr<Result> r = engine().Process(
        m, [&](const Message&, Txn& txn) { return body(txn); });
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *std::move(r) : Result();
  }

  // A message that only sets timer `key` in `domain` at `fire_at`.
  Result SetTimerBy(const std::string& id, const std::string& key,
                    TimeDomain domain, absl::Time fire_at,
                    absl::Time event_time = absl::InfinitePast()) {
    return Deliver(id, event_time, [&](Txn& txn) {
      return txn.SetTimer(key, domain, fire_at, "payload-" + key);
    });
  }

  // Fires what is due in `domain` through `log`; returns how many fired.
  size_t Fire(TimeDomain domain, TimerLog& log,
              absl::Time up_to = absl::InfiniteFuture(), size_t max = 100,
              int32_t partition = 0) {
    absl::StatusOr<size_t> fired = engine().FireTimers(
        kTimerSource, partition, domain, up_to, max,
        [&](const TimerFire& fire, Txn& txn) { return log(fire, txn); });
    EXPECT_TRUE(fired.ok()) << fired.status();
    return fired.ok() ? *fired : 0;
  }

  std::optional<std::string> State(const std::string& key) {
    absl::StatusOr<std::optional<std::string>> v = engine().GetState(key);
    EXPECT_TRUE(v.ok()) << v.status();
    return v.ok() ? *v : std::nullopt;
  }

  std::optional<TimerFire> Next(TimeDomain domain, int32_t partition = 0) {
    absl::StatusOr<std::optional<TimerFire>> next =
        engine().NextTimer(kTimerSource, partition, domain);
    EXPECT_TRUE(next.ok()) << next.status();
    return next.ok() ? *next : std::nullopt;
  }

  test::EngineHarness harness_;
  int64_t offset_ = 0;
};

const absl::Time kT0 = absl::FromUnixSeconds(1'000'000);

TEST_F(TimersTest, EventTimerFiresOnlyOnceStreamTimeReachesIt) {
  SetTimerBy("a", "w1", TimeDomain::kEvent, kT0 + absl::Seconds(60), kT0);
  TimerLog log;
  EXPECT_EQ(Fire(TimeDomain::kEvent, log), 0u);  // stream time is kT0
  Deliver("b", kT0 + absl::Seconds(59), [](Txn&) { return absl::OkStatus(); });
  EXPECT_EQ(Fire(TimeDomain::kEvent, log), 0u);
  EXPECT_FALSE(State("fired/w1").has_value());
  Deliver("c", kT0 + absl::Seconds(60), [](Txn&) { return absl::OkStatus(); });
  EXPECT_EQ(Fire(TimeDomain::kEvent, log), 1u);
  EXPECT_THAT(log.keys, ElementsAre("w1"));
  EXPECT_EQ(State("fired/w1"), "payload-w1");
  // Once: the fire deleted it.
  EXPECT_EQ(Fire(TimeDomain::kEvent, log), 0u);
  EXPECT_FALSE(Next(TimeDomain::kEvent).has_value());
  absl::StatusOr<Stats> stats = engine().GetStats();
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->timers_fired, 1u);
}

TEST_F(TimersTest, ProcessingTimerFiresByTheEngineClockAlsoAfterARestart) {
  SetTimerBy("a", "remind", TimeDomain::kProcessing,
             test::kStart + absl::Minutes(5));
  TimerLog log;
  EXPECT_EQ(Fire(TimeDomain::kProcessing, log), 0u);
  // Due while the engine is down: the first call after the restart fires it.
  harness_.Close();
  harness_.clock().Advance(absl::Minutes(6));
  ASSERT_TRUE(harness_.Open().ok());
  EXPECT_EQ(Fire(TimeDomain::kProcessing, log), 1u);
  EXPECT_THAT(log.keys, ElementsAre("remind"));
}

TEST_F(TimersTest, FiresInTimeOrderUpToUpToAndMax) {
  for (int i = 5; i >= 1; --i) {
    SetTimerBy("m" + std::to_string(i), "k" + std::to_string(i),
               TimeDomain::kProcessing, test::kStart - absl::Seconds(10 - i));
  }
  TimerLog log;
  EXPECT_EQ(Fire(TimeDomain::kProcessing, log, test::kStart - absl::Seconds(8)),
            2u);
  EXPECT_EQ(Fire(TimeDomain::kProcessing, log, absl::InfiniteFuture(), 2), 2u);
  EXPECT_EQ(Fire(TimeDomain::kProcessing, log), 1u);
  EXPECT_THAT(log.keys, ElementsAre("k1", "k2", "k3", "k4", "k5"));
}

TEST_F(TimersTest, SettingAKeyAgainMovesItAndCancelRemovesIt) {
  SetTimerBy("a", "k", TimeDomain::kProcessing, test::kStart + absl::Hours(1));
  SetTimerBy("b", "k", TimeDomain::kProcessing, test::kStart - absl::Hours(1));
  std::optional<TimerFire> next = Next(TimeDomain::kProcessing);
  ASSERT_TRUE(next.has_value());
  EXPECT_EQ(next->fire_at, test::kStart - absl::Hours(1));
  SetTimerBy("c", "gone", TimeDomain::kProcessing, test::kStart);
  Deliver("d", absl::InfinitePast(),
          [](Txn& txn) { return txn.CancelTimer("gone"); });
  TimerLog log;
  harness_.clock().Advance(absl::Hours(2));
  EXPECT_EQ(Fire(TimeDomain::kProcessing, log), 1u);  // one timer per key
  EXPECT_THAT(log.keys, ElementsAre("k"));
}

TEST_F(TimersTest, TimersBelongToTheirPartition) {
  SetTimerBy("a", "k", TimeDomain::kProcessing, test::kStart);
  TimerLog log;
  EXPECT_EQ(Fire(TimeDomain::kProcessing, log, absl::InfiniteFuture(), 10,
                 /*partition=*/1),
            0u);
  EXPECT_EQ(Fire(TimeDomain::kProcessing, log), 1u);
}

TEST_F(TimersTest, FireCommitsEmitsWithIdsDerivedFromTheTimer) {
  auto emit_fire = [&](Engine& e) {
    std::vector<std::string> ids;
    absl::StatusOr<size_t> fired = e.FireTimers(
        kTimerSource, 0, TimeDomain::kProcessing, absl::InfiniteFuture(), 10,
        [](const TimerFire& fire, Txn& txn) {
          txn.Emit("out", fire.timer_key, fire.payload);
          return absl::OkStatus();
        });
    EXPECT_TRUE(fired.ok()) << fired.status();
    absl::StatusOr<std::vector<OutboxEntry>> out = e.ReadOutbox(10);
    EXPECT_TRUE(out.ok()) << out.status();
    if (out.ok()) {
      for (const OutboxEntry& entry : *out) ids.push_back(entry.message_id);
    }
    return ids;
  };
  SetTimerBy("a", "k", TimeDomain::kProcessing, test::kStart);
  // The same timer in a second store fires with the same IDs, as a re-fire
  // after a crash would.
  test::EngineHarness other;
  ASSERT_TRUE(other.Open().ok());
  ASSERT_TRUE(other.engine()
                  .Process(Message{.id = "a", .source = kTimerSource},
                           [](const Message&, Txn& txn) {
                             return txn.SetTimer("k", TimeDomain::kProcessing,
                                                 test::kStart, "payload-k");
                           })
                  .ok());
  const std::vector<std::string> first = emit_fire(engine());
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(emit_fire(other.engine()), first);
  // A different timer gets a different ID.
  SetTimerBy("b", "k2", TimeDomain::kProcessing, test::kStart);
  ASSERT_TRUE(engine().AckOutbox(1).ok());
  const std::vector<std::string> second = emit_fire(engine());
  ASSERT_EQ(second.size(), 1u);
  EXPECT_NE(second, first);
}

TEST_F(TimersTest, AFireHandlerMaySetItsOwnKeyAgain) {
  SetTimerBy("a", "tick", TimeDomain::kProcessing, test::kStart);
  absl::StatusOr<size_t> fired = engine().FireTimers(
      kTimerSource, 0, TimeDomain::kProcessing, absl::InfiniteFuture(), 10,
      [](const TimerFire& fire, Txn& txn) {
        return txn.SetTimer(fire.timer_key, TimeDomain::kProcessing,
                            fire.fire_at + absl::Minutes(1), "again");
      });
  ASSERT_TRUE(fired.ok()) << fired.status();
  EXPECT_EQ(*fired, 1u);
  std::optional<TimerFire> next = Next(TimeDomain::kProcessing);
  ASSERT_TRUE(next.has_value());
  EXPECT_EQ(next->fire_at, test::kStart + absl::Minutes(1));
  EXPECT_EQ(next->payload, "again");
}

TEST_F(TimersTest, ATimerSetBelowTheFireCursorStillFires) {
  // Fire a run of timers (the cursor moves past them), then set one below
  // the cursor: it must be found.
  for (int i = 0; i < 20; ++i) {
    SetTimerBy("m" + std::to_string(i), "k" + std::to_string(i),
               TimeDomain::kProcessing, test::kStart - absl::Seconds(i));
  }
  TimerLog log;
  EXPECT_EQ(Fire(TimeDomain::kProcessing, log), 20u);
  SetTimerBy("late", "early", TimeDomain::kProcessing,
             test::kStart - absl::Hours(1));
  EXPECT_EQ(Fire(TimeDomain::kProcessing, log), 1u);
  EXPECT_EQ(log.keys.back(), "early");
}

TEST_F(TimersTest, EventTimerAtOrBelowStreamTimeIsRefusedAndTheMessageCommits) {
  Deliver("a", kT0, [](Txn&) { return absl::OkStatus(); });
  absl::Status refused;
  Result r = Deliver("b", kT0 - absl::Seconds(5), [&](Txn& txn) {
    refused = txn.SetTimer("closed", TimeDomain::kEvent, kT0);
    txn.Put("late", "seen");
    return absl::OkStatus();
  });
  EXPECT_EQ(refused.code(), absl::StatusCode::kOutOfRange) << refused;
  EXPECT_EQ(r.outcome, Outcome::kProcessed);
  EXPECT_EQ(State("late"), "seen");
  EXPECT_FALSE(Next(TimeDomain::kEvent).has_value());
}

TEST_F(TimersTest, InfiniteFireAtFailsTheMessage) {
  for (absl::Time bad : {absl::InfiniteFuture(), absl::InfinitePast()}) {
    absl::Status returned;
    Result r = Deliver(
        "m" + absl::FormatTime(bad), absl::InfinitePast(), [&](Txn& txn) {
          returned = txn.SetTimer("k", TimeDomain::kProcessing, bad);
          return absl::OkStatus();  // goes on regardless
        });
    EXPECT_EQ(returned.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(r.outcome, Outcome::kFailed);
    EXPECT_EQ(r.error.code(), absl::StatusCode::kInvalidArgument);
  }
  EXPECT_FALSE(Next(TimeDomain::kProcessing).has_value());
}

TEST_F(TimersTest, UnknownDomainIsInvalidEverywhere) {
  const auto bad = static_cast<TimeDomain>(7);
  absl::Status returned;
  Result r = Deliver("a", absl::InfinitePast(), [&](Txn& txn) {
    returned = txn.SetTimer("k", bad, test::kStart);
    return absl::OkStatus();
  });
  EXPECT_EQ(returned.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(r.outcome, Outcome::kFailed);
  TimerLog log;
  EXPECT_EQ(
      engine()
          .FireTimers(kTimerSource, 0, bad, absl::InfiniteFuture(), 1,
                      [&](const TimerFire& f, Txn& t) { return log(f, t); })
          .status()
          .code(),
      absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(engine().NextTimer(kTimerSource, 0, bad).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(TimersTest, FireTimersRefusesBadArguments) {
  TimerLog log;
  auto handler = [&](const TimerFire& f, Txn& t) { return log(f, t); };
  EXPECT_EQ(engine()
                .FireTimers(kTimerSource, 0, TimeDomain::kEvent,
                            absl::InfiniteFuture(), 0, handler)
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(engine()
                .FireTimers("", 0, TimeDomain::kEvent, absl::InfiniteFuture(),
                            1, handler)
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(engine()
                .FireTimers(kTimerSource, -1, TimeDomain::kEvent,
                            absl::InfiniteFuture(), 1, handler)
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(TimersTest, AMessageWithoutASourceCannotSetTimers) {
  absl::StatusOr<Result> r =
      engine().Process(Message{.id = "nosource"}, [](const Message&, Txn& txn) {
        return txn.SetTimer("k", TimeDomain::kProcessing, test::kStart);
      });
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->outcome, Outcome::kFailed);
  EXPECT_EQ(r->error.code(), absl::StatusCode::kFailedPrecondition);
}

TEST_F(TimersTest, ATransientHandlerFailureKeepsTheTimerToFireAgain) {
  SetTimerBy("a", "k", TimeDomain::kProcessing, test::kStart);
  int calls = 0;
  absl::StatusOr<size_t> fired = engine().FireTimers(
      kTimerSource, 0, TimeDomain::kProcessing, absl::InfiniteFuture(), 10,
      [&](const TimerFire&, Txn& txn) {
        ++calls;
        txn.Put("effect", "x");
        return absl::UnavailableError("downstream is down");
      });
  EXPECT_EQ(fired.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_FALSE(State("effect").has_value());
  ASSERT_TRUE(Next(TimeDomain::kProcessing).has_value());
  TimerLog log;
  EXPECT_EQ(Fire(TimeDomain::kProcessing, log), 1u);
  EXPECT_EQ(calls, 1);
  absl::StatusOr<Stats> stats = engine().GetStats();
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->timer_failures, 1u);
  EXPECT_EQ(stats->timers_fired, 1u);
}

TEST_F(TimersTest, APermanentHandlerFailureIsDeadLetteredWithoutItsEffects) {
  SetTimerBy("a", "poison", TimeDomain::kProcessing, test::kStart);
  SetTimerBy("b", "fine", TimeDomain::kProcessing,
             test::kStart + absl::Seconds(1));
  harness_.clock().Advance(absl::Seconds(1));
  absl::StatusOr<size_t> fired = engine().FireTimers(
      kTimerSource, 0, TimeDomain::kProcessing, absl::InfiniteFuture(), 10,
      [&](const TimerFire& fire, Txn& txn) {
        txn.Put("effect/" + fire.timer_key, "x");
        if (fire.timer_key == "poison") {
          return PermanentError(absl::InvalidArgumentError("bad payload"));
        }
        return absl::OkStatus();
      });
  ASSERT_TRUE(fired.ok()) << fired.status();
  EXPECT_EQ(*fired, 2u);
  EXPECT_FALSE(State("effect/poison").has_value());
  EXPECT_EQ(State("effect/fine"), "x");
  EXPECT_FALSE(Next(TimeDomain::kProcessing).has_value());
  absl::StatusOr<Stats> stats = engine().GetStats();
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->timers_dead_lettered, 1u);
}

TEST_F(TimersTest, FireTimersIsRefusedInsideAHandler) {
  absl::Status inner;
  Deliver("a", absl::InfinitePast(), [&](Txn&) {
    TimerLog log;
    inner =
        engine()
            .FireTimers(kTimerSource, 0, TimeDomain::kProcessing,
                        absl::InfiniteFuture(), 1,
                        [&](const TimerFire& f, Txn& t) { return log(f, t); })
            .status();
    return absl::OkStatus();
  });
  EXPECT_EQ(inner.code(), absl::StatusCode::kFailedPrecondition);
}

// Fires timer "k" while, inside its handler, another thread moves "k" to
// an hour later and lands; a fire validated like a read runs its handler
// again and leaves the moved timer alone. Fails if the moved timer's index
// entry is lost (a cancel then misses it and it fires).
::testing::AssertionResult FireRacesAMove(test::EngineHarness& harness) {
  Engine& engine = harness.engine();
  if (!engine
           .Process(Message{.id = "set", .source = kTimerSource, .offset = 0},
                    [](const Message&, Txn& txn) {
                      return txn.SetTimer("k", TimeDomain::kProcessing,
                                          test::kStart);
                    })
           .ok()) {
    return ::testing::AssertionFailure() << "setting the timer failed";
  }
  int calls = 0;
  std::thread mover;
  absl::StatusOr<size_t> fired = engine.FireTimers(
      kTimerSource, 0, TimeDomain::kProcessing, absl::InfiniteFuture(), 10,
      [&](const TimerFire&, Txn& txn) {
        if (++calls == 1) {
          mover = std::thread([&] {
            engine
                .Process(
                    Message{.id = "move", .source = kTimerSource, .offset = 1},
                    [](const Message&, Txn& t) {
                      return t.SetTimer("k", TimeDomain::kProcessing,
                                        test::kStart + absl::Hours(1));
                    })
                .IgnoreError();  // checked through NextTimer below
          });
          mover.join();
        }
        txn.Put("fired", std::to_string(calls));
        return absl::OkStatus();
      });
  if (!fired.ok()) {
    return ::testing::AssertionFailure() << fired.status();
  }
  absl::StatusOr<std::optional<TimerFire>> next =
      engine.NextTimer(kTimerSource, 0, TimeDomain::kProcessing);
  if (!next.ok() || !next->has_value() ||
      (*next)->fire_at != test::kStart + absl::Hours(1)) {
    return ::testing::AssertionFailure() << "the moved timer is not queued";
  }
  // Cancelling it finds it through its index entry, so it never fires.
  if (!engine
           .Process(
               Message{.id = "cancel", .source = kTimerSource, .offset = 2},
               [](const Message&, Txn& t) { return t.CancelTimer("k"); })
           .ok()) {
    return ::testing::AssertionFailure() << "cancelling failed";
  }
  harness.clock().Advance(absl::Hours(2));
  absl::StatusOr<size_t> later = engine.FireTimers(
      kTimerSource, 0, TimeDomain::kProcessing, absl::InfiniteFuture(), 10,
      [](const TimerFire&, Txn&) { return absl::OkStatus(); });
  if (!later.ok()) return ::testing::AssertionFailure() << later.status();
  if (*later != 0) {
    return ::testing::AssertionFailure()
           << "the moved timer's index entry was lost by a fire that ran "
              "over its move: cancelling it missed it, and it fired ("
           << *fired << " fired first)";
  }
  return ::testing::AssertionSuccess();
}

TEST_F(TimersTest, AFireConflictsWithAConcurrentMoveOfItsKey) {
  EXPECT_TRUE(FireRacesAMove(harness_));
  absl::StatusOr<Stats> stats = engine().GetStats();
  ASSERT_TRUE(stats.ok());
  EXPECT_GE(stats->handler_reruns, 1u);
}

// Hooks with one broken variant's flag set.
EngineHooks TimerHooksWith(bool EngineHooks::*flag) {
  EngineHooks hooks;
  hooks.*flag = true;
  return hooks;
}

class TimersUnvalidatedTest : public TimersTest {
 protected:
  TimersUnvalidatedTest()
      : TimersTest(TimerHooksWith(&EngineHooks::skip_read_validation)) {}
};

TEST_F(TimersUnvalidatedTest, BrokenVariantLosesTheMovedTimer) {
  ::testing::AssertionResult caught = FireRacesAMove(harness_);
  EXPECT_FALSE(caught);
  EXPECT_THAT(caught.message(), HasSubstr("index entry was lost"));
}

// A handler sets an event-time timer at kT0 + 15 s while the stream time
// is kT0 + 10 s; before its commit, another commit of the partition moves
// the stream time to kT0 + 20 s. The commit must run again, and SetTimer
// then refuses the timer. Fails if the timer is set below the stream time.
::testing::AssertionResult ArmRacesStreamTime(test::EngineHarness& harness) {
  Engine& engine = harness.engine();
  auto deliver = [&](const char* id, int64_t offset, absl::Duration at,
                     Handler handler) {
    return engine.Process(Message{.id = id,
                                  .source = kTimerSource,
                                  .offset = offset,
                                  .event_time = kT0 + at},
                          handler);
  };
  auto nothing = [](const Message&, Txn&) { return absl::OkStatus(); };
  if (!deliver("first", 0, absl::Seconds(10), nothing).ok()) {
    return ::testing::AssertionFailure() << "the first message failed";
  }
  int runs = 0;
  absl::Status refused;
  absl::StatusOr<Result> armed =
      deliver("arm", 1, absl::Seconds(5), [&](const Message&, Txn& txn) {
        refused =
            txn.SetTimer("close", TimeDomain::kEvent, kT0 + absl::Seconds(15));
        if (++runs == 1) {
          std::thread other([&] {
            deliver("later", 2, absl::Seconds(20), nothing).IgnoreError();
          });
          other.join();
        }
        return absl::IsOutOfRange(refused) ? absl::OkStatus() : refused;
      });
  if (!armed.ok()) return ::testing::AssertionFailure() << armed.status();
  absl::StatusOr<std::optional<TimerFire>> next =
      engine.NextTimer(kTimerSource, 0, TimeDomain::kEvent);
  if (!next.ok()) return ::testing::AssertionFailure() << next.status();
  if (next->has_value()) {
    return ::testing::AssertionFailure()
           << "an event-time timer was set below the stream time (" << runs
           << " runs)";
  }
  if (!absl::IsOutOfRange(refused)) {
    return ::testing::AssertionFailure() << "the rerun was not refused";
  }
  return ::testing::AssertionSuccess();
}

TEST_F(TimersTest, AnArmRacingAStreamTimeMoveRunsAgainAndIsRefused) {
  EXPECT_TRUE(ArmRacesStreamTime(harness_));
}

TEST_F(TimersUnvalidatedTest, BrokenVariantArmsBelowTheStreamTime) {
  ::testing::AssertionResult caught = ArmRacesStreamTime(harness_);
  EXPECT_FALSE(caught);
  EXPECT_THAT(caught.message(), HasSubstr("below the stream time"));
}

// Fires one timer whose handler writes "effect" while the write-ahead log
// accepts one more append, then reopens: the fire must be either wholly
// committed (effect, no timer) or not at all (timer, no effect).
::testing::AssertionResult FireSurvivesAFailedWrite(
    test::EngineHarness& harness) {
  Engine& engine = harness.engine();
  if (!engine
           .Process(Message{.id = "set", .source = kTimerSource, .offset = 0},
                    [](const Message&, Txn& txn) {
                      return txn.SetTimer("k", TimeDomain::kProcessing,
                                          test::kStart);
                    })
           .ok()) {
    return ::testing::AssertionFailure() << "setting the timer failed";
  }
  harness.fs().FailAfterAppends(1, absl::StatusCode::kUnavailable,
                                crash::FaultTarget::kWal);
  engine
      .FireTimers(kTimerSource, 0, TimeDomain::kProcessing,
                  absl::InfiniteFuture(), 10,
                  [](const TimerFire&, Txn& txn) {
                    txn.Put("effect", "done");
                    return absl::OkStatus();
                  })
      .IgnoreError();  // failed or not: the state after a reopen tells
  harness.fs().SetFault(absl::StatusCode::kOk);
  if (absl::Status s = harness.Open(); !s.ok()) {
    return ::testing::AssertionFailure() << s;
  }
  absl::StatusOr<std::optional<std::string>> effect =
      harness.engine().GetState("effect");
  absl::StatusOr<std::optional<TimerFire>> timer =
      harness.engine().NextTimer(kTimerSource, 0, TimeDomain::kProcessing);
  if (!effect.ok() || !timer.ok()) {
    return ::testing::AssertionFailure() << "reading after the reopen failed";
  }
  if (effect->has_value() == timer->has_value()) {
    return ::testing::AssertionFailure()
           << (effect->has_value() ? "both the effect and the timer"
                                   : "a lost effect: neither the effect nor "
                                     "the timer")
           << " after the failed write";
  }
  return ::testing::AssertionSuccess();
}

class TimersOnFaultsTest : public TimersTest {
 protected:
  explicit TimersOnFaultsTest(const EngineHooks& hooks = {})
      : TimersTest(hooks, test::EngineHarness::Storage::kCrashFileSystem) {}
};

TEST_F(TimersOnFaultsTest, AFireCommitsItsEffectsWithTheTimersDeletion) {
  EXPECT_TRUE(FireSurvivesAFailedWrite(harness_));
}

class TimersFiredOutsideCommitTest : public TimersOnFaultsTest {
 protected:
  TimersFiredOutsideCommitTest()
      : TimersOnFaultsTest(TimerHooksWith(&EngineHooks::fire_outside_commit)) {}
};

TEST_F(TimersFiredOutsideCommitTest, BrokenVariantLosesTheEffect) {
  ::testing::AssertionResult caught = FireSurvivesAFailedWrite(harness_);
  EXPECT_FALSE(caught);
  EXPECT_THAT(caught.message(), HasSubstr("a lost effect"));
}

// In a store whose state expires (a Put with a ttl marks it format 6), a
// timer handler reads values as a message's handler does (not their
// envelopes), and its own Put with a ttl expires that long after the
// fire's engine time.
TEST_F(TimersTest, ATimerHandlerReadsAndWritesStateThatExpires) {
  Deliver("m", absl::InfinitePast(), [](Txn& txn) {
    if (absl::Status s =
            txn.Put("kept", "v", PutOptions{.ttl = absl::Hours(1)});
        !s.ok()) {
      return s;
    }
    txn.Put("plain", "p");
    return txn.SetTimer("t", TimeDomain::kProcessing, test::kStart, "");
  });
  std::optional<std::string> kept, plain;
  absl::StatusOr<size_t> fired = engine().FireTimers(
      kTimerSource, 0, TimeDomain::kProcessing, absl::InfiniteFuture(), 10,
      [&](const TimerFire&, Txn& txn) -> absl::Status {
        absl::StatusOr<std::optional<std::string>> k = txn.Get("kept");
        absl::StatusOr<std::optional<std::string>> p = txn.Get("plain");
        if (!k.ok()) return k.status();
        if (!p.ok()) return p.status();
        kept = *k;
        plain = *p;
        return txn.Put("written", "w", PutOptions{.ttl = absl::Hours(1)});
      });
  ASSERT_TRUE(fired.ok()) << fired.status();
  EXPECT_EQ(*fired, 1u);
  EXPECT_EQ(kept, "v");
  EXPECT_EQ(plain, "p");
  EXPECT_EQ(State("written"), "w");
}

// A timer handler's Put with a ttl in a store whose state did not expire
// yet marks the store first (the round runs again), so the value expires
// as one a message's handler puts does.
TEST_F(TimersTest, ATimerHandlersPutWithATtlExpiresInAStoreWithoutTtlsYet) {
  SetTimerBy("m", "t", TimeDomain::kProcessing, test::kStart);
  int runs = 0;
  absl::StatusOr<size_t> fired = engine().FireTimers(
      kTimerSource, 0, TimeDomain::kProcessing, absl::InfiniteFuture(), 10,
      [&](const TimerFire&, Txn& txn) {
        ++runs;
        return txn.Put("brief", "b", PutOptions{.ttl = absl::Minutes(1)});
      });
  ASSERT_TRUE(fired.ok()) << fired.status();
  EXPECT_EQ(*fired, 1u);
  EXPECT_EQ(runs, 2);  // once more on the marked store
  EXPECT_EQ(State("brief"), "b");
  harness_.clock().Advance(absl::Minutes(2));
  EXPECT_EQ(State("brief"), std::nullopt);
}

}  // namespace
}  // namespace idem
