// Tests for engine/engine_clock.h, the engine's time: alone (finiteness,
// exceptions, the high-water mark), then through the engine, in both dedupe
// layouts (expiry_buckets 0 and 4): a clock returning a non-finite time or
// throwing fails the calls that read time and commits nothing; the TTL
// filter keeps every record while the clock cannot be read; and when the
// clock goes backwards both layouts give the answers of one model, in which
// time never goes back, so no record is reported unseen before its expiry.
//
// The backwards-clock check also runs against an engine whose time follows
// the clock back (EngineHooks::engine_time_follows_clock; it must fail).

#include "engine/engine_clock.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "engine/engine_hooks.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "idem/clock.h"
#include "idem/engine.h"
#include "tests/testing/engine_test_util.h"
#include "tests/testing/findings.h"
#include "util/temp_dir.h"

namespace idem {
namespace {

using test::AddOne;
using test::Deliver;
using test::Delivered;
using test::Findings;
using ::testing::HasSubstr;

const absl::Time kClockStart = absl::FromUnixSeconds(1'700'000'000);
const int64_t kClockStartMicros = absl::ToUnixMicros(kClockStart);
const absl::Duration kClockWindow = absl::Hours(1);

// A clock that returns a set time, or a non-finite one, or throws, as told.
// Thread-safe (RocksDB's threads read it through the TTL filter).
class ScriptedClock : public Clock {
 public:
  enum class Mode { kTime, kThrow, kThrowNonStandard };

  absl::Time Now() override {
    absl::MutexLock lock(&mu_);
    switch (mode_) {
      case Mode::kTime:
        return now_;
      case Mode::kThrow:
        throw std::runtime_error("clock unavailable");
      case Mode::kThrowNonStandard:
        throw 42;
    }
    return now_;
  }
  // Returns `t` (which may be absl::InfiniteFuture() or InfinitePast()).
  void Set(absl::Time t) {
    absl::MutexLock lock(&mu_);
    mode_ = Mode::kTime;
    now_ = t;
  }
  void Advance(absl::Duration d) {
    absl::MutexLock lock(&mu_);
    now_ += d;
  }
  void SetMode(Mode mode) {
    absl::MutexLock lock(&mu_);
    mode_ = mode;
  }

 private:
  absl::Mutex mu_;
  Mode mode_ ABSL_GUARDED_BY(mu_) = Mode::kTime;
  absl::Time now_ ABSL_GUARDED_BY(mu_) = kClockStart;
};

// ---- EngineClock alone ----------------------------------------------------

TEST(EngineClockTest, ReturnsTheClocksTimeInMicroseconds) {
  ManualClock clock(kClockStart);
  EngineClock time(&clock);
  EXPECT_EQ(time.NowMicros().value(), kClockStartMicros);
  clock.Advance(absl::Microseconds(3));
  EXPECT_EQ(time.NowMicros().value(), kClockStartMicros + 3);
}

TEST(EngineClockTest, NeverGoesBackwards) {
  ManualClock clock(kClockStart + absl::Hours(2));
  EngineClock time(&clock);
  const int64_t high = time.NowMicros().value();
  clock.Set(kClockStart);
  EXPECT_EQ(time.NowMicros().value(), high);
  clock.Set(kClockStart + absl::Hours(2) + absl::Microseconds(1));
  EXPECT_EQ(time.NowMicros().value(), high + 1);
}

TEST(EngineClockTest, NonFiniteTimeFailsWithFailedPreconditionAndMovesNothing) {
  ScriptedClock clock;
  EngineClock time(&clock);
  for (absl::Time t : {absl::InfiniteFuture(), absl::InfinitePast()}) {
    clock.Set(t);
    absl::StatusOr<int64_t> now = time.NowMicros();
    EXPECT_EQ(now.status().code(), absl::StatusCode::kFailedPrecondition)
        << now.status();
    EXPECT_THAT(std::string(now.status().message()),
                HasSubstr("clock returned a non-finite time"));
  }
  // The failed reads left no mark: time is the clock's again.
  clock.Set(kClockStart);
  EXPECT_EQ(time.NowMicros().value(), kClockStartMicros);
}

TEST(EngineClockTest,
     FiniteTimeBeyondStoredExpiriesFailsWithFailedPrecondition) {
  ScriptedClock clock;
  EngineClock time(&clock);
  for (absl::Time t : {absl::FromUnixSeconds(int64_t{1} << 50),
                       absl::FromUnixSeconds(-(int64_t{1} << 50))}) {
    clock.Set(t);
    EXPECT_EQ(time.NowMicros().status().code(),
              absl::StatusCode::kFailedPrecondition)
        << t;
  }
}

TEST(EngineClockTest, ThrowingClockFailsWithUnavailable) {
  ScriptedClock clock;
  EngineClock time(&clock);
  clock.SetMode(ScriptedClock::Mode::kThrow);
  absl::StatusOr<int64_t> now;
  ASSERT_NO_THROW(now = time.NowMicros());
  EXPECT_EQ(now.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(now.status().message()),
              HasSubstr("clock unavailable"));
  clock.SetMode(ScriptedClock::Mode::kThrowNonStandard);
  ASSERT_NO_THROW(now = time.NowMicros());
  EXPECT_EQ(now.status().code(), absl::StatusCode::kUnavailable);
}

TEST(EngineClockBrokenVariantTest, NonMonotonicTimeFollowsTheClockBack) {
  ManualClock clock(kClockStart + absl::Hours(2));
  EngineClock time(&clock, /*monotonic=*/false);
  ASSERT_TRUE(time.NowMicros().ok());
  clock.Set(kClockStart);
  EXPECT_EQ(time.NowMicros().value(), kClockStartMicros);
}

// ---- Through the engine, in both layouts ----------------------------------

// An engine on a ScriptedClock, with expiry_buckets = GetParam().
class EngineTimeTest : public ::testing::TestWithParam<int> {
 protected:
  // Opens (or reopens) the engine of store `name`.
  absl::Status Open(const EngineHooks& hooks = {},
                    const std::string& name = "db") {
    engine_.reset();
    Options options;
    options.clock = &clock_;
    options.dedupe_window = kClockWindow;
    options.expiry_buckets = GetParam();
    options.durability = Durability::kBuffered;
    absl::StatusOr<std::unique_ptr<Engine>> engine =
        OpenEngineWithHooks(dir_.Sub(name), options, hooks);
    if (!engine.ok()) return engine.status();
    engine_ = std::move(*engine);
    return absl::OkStatus();
  }

  // The stored dedupe records (expired or not), by key, from Dump.
  std::map<std::string, DumpEntry> StoredRecords() {
    std::map<std::string, DumpEntry> records;
    absl::Status s = engine_->Dump([&](const DumpEntry& e) {
      if (e.kind == DumpEntry::Kind::kDedupe) records[e.key] = e;
      return absl::OkStatus();
    });
    EXPECT_TRUE(s.ok()) << s;
    return records;
  }

  util::TempDir dir_;
  ScriptedClock clock_;
  std::unique_ptr<Engine> engine_;
};

INSTANTIATE_TEST_SUITE_P(Layouts, EngineTimeTest, ::testing::Values(0, 4),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return absl::StrCat("ExpiryBuckets", info.param);
                         });

// Regression: with absl::InfiniteFuture() every stored record counted as
// expired (and the ID was processed on every delivery); with InfinitePast()
// the record was written already expired.
TEST_P(EngineTimeTest, NonFiniteClockFailsProcessAndCommitsNothing) {
  ASSERT_TRUE(Open().ok());
  for (absl::Time t : {absl::InfiniteFuture(), absl::InfinitePast()}) {
    clock_.Set(t);
    int runs = 0;
    auto handler = [&](const Message& m, Txn& txn) {
      ++runs;
      return AddOne(m, txn);
    };
    const Message m = {.id = "m", .source = "t", .offset = 5};
    for (int delivery = 0; delivery < 2; ++delivery) {
      absl::StatusOr<Result> r = engine_->Process(m, handler);
      EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition)
          << t << ": " << r.status();
      EXPECT_THAT(std::string(r.status().message()),
                  HasSubstr("clock returned a non-finite time"));
    }
    const std::vector<Message> batch = {m, {.id = "n"}};
    EXPECT_EQ(engine_->ProcessBatch(batch, handler).status().code(),
              absl::StatusCode::kFailedPrecondition);
    EXPECT_EQ(engine_->Seen("m").status().code(),
              absl::StatusCode::kFailedPrecondition);
    EXPECT_EQ(runs, 0) << t;
  }
  // Nothing was committed: with a good clock the ID is new, once.
  clock_.Set(kClockStart);
  EXPECT_FALSE(engine_->Seen("m").value());
  EXPECT_EQ(engine_->GetState("counter").value(), std::nullopt);
  EXPECT_EQ(engine_->CommittedOffset("t", 0).value(), std::nullopt);
  EXPECT_TRUE(StoredRecords().empty());
  const Message m = {.id = "m", .source = "t", .offset = 5};
  absl::StatusOr<Result> first = engine_->Process(m, AddOne);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->outcome, Outcome::kProcessed);
  absl::StatusOr<Result> again = engine_->Process(m, AddOne);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->outcome, Outcome::kDuplicate);
  EXPECT_EQ(engine_->GetState("counter").value(),
            std::optional<std::string>("1"));
  EXPECT_EQ(engine_->CommittedOffset("t", 0).value(),
            std::optional<int64_t>(5));
}

// Regression: the clock's exception escaped Process, Seen and Forget.
TEST_P(EngineTimeTest, ThrowingClockFailsCallsThatReadTimeWithUnavailable) {
  ASSERT_TRUE(Open().ok());
  ASSERT_TRUE(
      engine_->Process({.id = "kept", .source = "t", .offset = 1}, AddOne)
          .ok());
  for (ScriptedClock::Mode mode :
       {ScriptedClock::Mode::kThrow, ScriptedClock::Mode::kThrowNonStandard}) {
    clock_.SetMode(mode);
    Findings f;
    int runs = 0;
    auto handler = [&](const Message& m, Txn& txn) {
      ++runs;
      return AddOne(m, txn);
    };
    auto expect_unavailable = [&](const absl::Status& s, const char* call) {
      f.Expect(s.code() == absl::StatusCode::kUnavailable,
               absl::StrCat(call, " returned ", s.ToString()));
      f.Expect(absl::StrContains(s.message(), "clock threw"),
               absl::StrCat(call, "'s message: ", s.message()));
    };
    try {
      expect_unavailable(
          engine_->Process({.id = "new", .source = "t", .offset = 2}, handler)
              .status(),
          "Process");
      const std::vector<Message> batch = {{.id = "new"}, {.id = "kept"}};
      expect_unavailable(engine_->ProcessBatch(batch, handler).status(),
                         "ProcessBatch");
      expect_unavailable(engine_->Seen("kept").status(), "Seen");
      expect_unavailable(engine_->Forget("kept"), "Forget");
      expect_unavailable(engine_->CompactExpired(), "CompactExpired");
      expect_unavailable(
          engine_->Dump([](const DumpEntry&) { return absl::OkStatus(); }),
          "Dump");
      // Calls that do not read time still answer.
      f.Ok(engine_->GetState("counter").status(), "GetState");
      f.Ok(engine_->CommittedOffset("t", 0).status(), "CommittedOffset");
      f.Ok(engine_->GetStats().status(), "GetStats");
    } catch (...) {
      f.Fail("an exception escaped an Engine call");
    }
    f.Expect(runs == 0, absl::StrCat(runs, " handler run(s)"));
    EXPECT_TRUE(f.Result()) << "mode " << static_cast<int>(mode);
  }
  // Nothing changed: "kept" is still a duplicate (Forget did nothing), "new"
  // is new, the offset did not move.
  clock_.Set(kClockStart);
  EXPECT_TRUE(engine_->Seen("kept").value());
  EXPECT_FALSE(engine_->Seen("new").value());
  EXPECT_EQ(engine_->CommittedOffset("t", 0).value(),
            std::optional<int64_t>(1));
  absl::StatusOr<Result> kept = engine_->Process({.id = "kept"}, AddOne);
  ASSERT_TRUE(kept.ok()) << kept.status();
  EXPECT_EQ(kept->outcome, Outcome::kDuplicate);
}

// The TTL filter reads engine time too; while the clock cannot be read it
// keeps every record (Checkpoint flushes memtables through it without
// reading time itself). Regression for InfiniteFuture: the filter removed
// every record, live ones included. Each case has an engine of its own: a
// compaction that RocksDB starts after the flush may run once the clock is
// good again, and then rightly drops the expired record.
TEST_P(EngineTimeTest, FlushWhileTheClockCannotBeReadKeepsEveryRecord) {
  for (const char* what : {"throws", "infinite-future", "infinite-past"}) {
    const std::string w = what;
    clock_.Set(kClockStart);
    ASSERT_TRUE(Open({}, absl::StrCat("db-", what)).ok());
    ASSERT_TRUE(Deliver(*engine_, "expired", "r").status.ok());
    clock_.Advance(kClockWindow);
    ASSERT_TRUE(Deliver(*engine_, "live", "r").status.ok());
    if (w == "throws") clock_.SetMode(ScriptedClock::Mode::kThrow);
    if (w == "infinite-future") clock_.Set(absl::InfiniteFuture());
    if (w == "infinite-past") clock_.Set(absl::InfinitePast());
    absl::Status s = engine_->Checkpoint(dir_.Sub(absl::StrCat("cp-", what)));
    EXPECT_TRUE(s.ok()) << what << ": " << s;
    // Read before the clock is good again (GetStats reads no time).
    EXPECT_EQ(engine_->GetStats().value().expired_dropped, 0u) << what;
    clock_.Set(kClockStart + kClockWindow);
    EXPECT_TRUE(engine_->Seen("live").value()) << what;
    EXPECT_TRUE(StoredRecords().contains(test::HexOfIdHash("live"))) << what;
  }
  // With a good clock the expired record goes, the live one stays.
  ASSERT_TRUE(engine_->CompactExpired().ok());
  const std::map<std::string, DumpEntry> records = StoredRecords();
  EXPECT_EQ(records.size(), 1u);
  EXPECT_TRUE(records.contains(test::HexOfIdHash("live")));
}

// Moves the clock forward and back through several windows: each step
// delivers a new ID, checks Seen of every earlier one and redelivers a third
// of them (so some records were last processed long before the clock went
// back). The model: engine time is the highest clock time so far; a record
// is live while engine time is before its expiry (engine time at processing
// + window). A record whose bucket was dropped while the clock was late and
// that is then run again (or reported unseen) once the clock is set back,
// while the same record in idem.dedupe is still a duplicate, shows as a
// mismatch in one of the layouts; a record reported unseen before its expiry
// shows in both.
::testing::AssertionResult CheckBackwardsClock(Engine& engine,
                                               ScriptedClock& clock) {
  Findings f;
  // Offsets from kClockStart, in minutes: forward past several bucket ends,
  // back into earlier windows, forward again.
  const std::vector<int> steps = {0,   20,  50,  130, 30,  70,  10, 140,
                                  185, 100, 200, 60,  260, 250, 330};
  std::vector<absl::Time> expiry;  // model expiry of ID "m<k>"
  absl::Time engine_now = absl::InfinitePast();
  for (size_t i = 0; i < steps.size(); ++i) {
    const absl::Time now = kClockStart + absl::Minutes(steps[i]);
    clock.Set(now);
    engine_now = std::max(engine_now, now);
    expiry.push_back(absl::InfinitePast());
    for (size_t k = 0; k < expiry.size(); ++k) {
      const std::string id = absl::StrCat("m", k);
      absl::Time& expires = expiry[k];
      const bool live = engine_now < expires;
      const std::string when = absl::StrCat(
          " with the clock at +", steps[i], "m, engine time +",
          absl::FormatDuration(engine_now - kClockStart), ", its expiry +",
          absl::FormatDuration(expires - kClockStart));
      absl::StatusOr<bool> seen = engine.Seen(id);
      if (f.Ok(seen.status(), "Seen " + id)) {
        f.Expect(*seen == live,
                 absl::StrCat(id, live ? " unseen" : " seen", when));
      }
      if (k != i && (i + k) % 3 != 0) continue;
      Delivered d = Deliver(engine, id, absl::StrCat(id, "@", i));
      if (!f.Ok(d.status, "delivering " + id)) continue;
      if (live) {
        f.Expect(d.outcome == Outcome::kDuplicate, id + " ran again" + when);
      } else {
        f.Expect(d.outcome == Outcome::kProcessed,
                 id + " was a duplicate" + when);
        if (d.outcome == Outcome::kProcessed)
          expires = engine_now + kClockWindow;
      }
    }
  }
  return f.Result();
}

// Regression: "a"'s bucket was dropped while the clock was late; with the
// clock set back into a's window, expiry_buckets = 4 ran it again while
// expiry_buckets = 0 still called it a duplicate. Both layouts now judge by
// engine time, which did not go back: "a" has expired, "b" has not.
TEST_P(EngineTimeTest, RecordExpiredBeforeTheClockWentBackStaysExpired) {
  ASSERT_TRUE(Open().ok());
  ASSERT_TRUE(Deliver(*engine_, "a", "a1").status.ok());
  clock_.Set(kClockStart + 2 * kClockWindow);
  ASSERT_TRUE(Deliver(*engine_, "b", "b1").status.ok());  // drops a's bucket
  clock_.Set(kClockStart + kClockWindow / 2);
  EXPECT_FALSE(engine_->Seen("a").value());
  EXPECT_TRUE(engine_->Seen("b").value());
  Delivered a = Deliver(*engine_, "a", "a2");
  ASSERT_TRUE(a.status.ok()) << a.status;
  EXPECT_EQ(a.outcome, Outcome::kProcessed);
  Delivered b = Deliver(*engine_, "b", "b2");
  ASSERT_TRUE(b.status.ok()) << b.status;
  EXPECT_EQ(b.outcome, Outcome::kDuplicate);
  // The new "a" lives a window from engine time, not from the clock.
  clock_.Set(kClockStart + 3 * kClockWindow - absl::Microseconds(1));
  EXPECT_TRUE(engine_->Seen("a").value());
  clock_.Set(kClockStart + 3 * kClockWindow);
  EXPECT_FALSE(engine_->Seen("a").value());
}

TEST_P(EngineTimeTest, BackwardsClockGivesTheAnswersOfMonotonicTime) {
  ASSERT_TRUE(Open().ok());
  EXPECT_TRUE(CheckBackwardsClock(*engine_, clock_));
  // Buckets were dropped on the way (the case that disagreed).
  if (GetParam() > 0) {
    EXPECT_GT(engine_->GetStats().value().expiry_buckets_dropped, 0u);
  }
}

TEST_P(EngineTimeTest, BrokenVariantTimeFollowingTheClockBackIsCaught) {
  EngineHooks hooks;
  hooks.engine_time_follows_clock = true;
  ASSERT_TRUE(Open(hooks).ok());
  EXPECT_FALSE(CheckBackwardsClock(*engine_, clock_));
}

// Txn::record_expires_at is the expiry the commit gives the message's
// dedupe record: engine time plus the window (or the message's ttl), also
// after the clock went back.
TEST(EngineRecordExpiryTest, TxnTellsTheExpiryItsRecordGets) {
  Options options;
  options.dedupe_window = absl::Hours(1);
  test::EngineHarness harness(options);
  ASSERT_TRUE(harness.Open().ok());
  Engine& engine = harness.engine();
  auto expiry_of = [&](const std::string& id, absl::Duration ttl) {
    Message m;
    m.id = id;
    m.ttl = ttl;
    absl::Time told = absl::InfinitePast();
    absl::StatusOr<Result> r = engine.Process(m, [&](const Message&, Txn& txn) {
      told = txn.record_expires_at();
      return absl::OkStatus();
    });
    EXPECT_TRUE(r.ok() && r->outcome == Outcome::kProcessed) << id;
    absl::Time stored = absl::InfinitePast();
    EXPECT_TRUE(engine
                    .Dump([&](const DumpEntry& entry) {
                      if (entry.kind == DumpEntry::Kind::kDedupe &&
                          entry.key == test::HexOfIdHash(id)) {
                        stored = entry.expires_at;
                      }
                      return absl::OkStatus();
                    })
                    .ok());
    EXPECT_EQ(told, stored) << id;
    return told;
  };
  EXPECT_EQ(expiry_of("a", absl::ZeroDuration()),
            test::kStart + absl::Hours(1));
  EXPECT_EQ(expiry_of("b", absl::Minutes(5)), test::kStart + absl::Minutes(5));
  harness.clock().Set(test::kStart - absl::Minutes(30));  // engine time holds
  EXPECT_EQ(expiry_of("c", absl::ZeroDuration()),
            test::kStart + absl::Hours(1));
}

}  // namespace
}  // namespace idem
