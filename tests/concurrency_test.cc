// Concurrency guarantees of the engine: concurrent deliveries of one ID run
// exactly one handler (and the others get kDuplicate with its result); a
// failed first handler lets another delivery run; read-modify-write state
// updates by handlers are never lost (Process and ProcessBatch); readers
// (Seen, GetState, WaitDurable) work during commits and never see a commit
// half applied.
//
// Each guarantee is a check function run by two tests: against the real
// engine (must pass) and against a deliberately broken engine from
// engine/engine_hooks.h (the same check must report failure): without the
// in-flight ID table, or without the validation of handler reads. Handlers
// run in parallel; in the broken runs they sleep about 1 ms to widen the
// race; detection loops a bounded number of rounds.

#include <atomic>
#include <cstdint>
#include <functional>
#include <latch>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "engine/engine_hooks.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "idem/engine.h"
#include "tests/testing/findings.h"
#include "tests/testing/parallel.h"
#include "util/temp_dir.h"

namespace idem {
namespace {

using ::testing::AnyOf;
using ::testing::HasSubstr;

constexpr int kRacingThreads = 8;
const absl::Duration kRaceWidener = absl::Milliseconds(1);
constexpr int kMaxRacingRounds = 20;

using test::CommittedCounter;
using test::Findings;
using test::ReadCounter;
using test::RunTogether;

absl::StatusOr<std::unique_ptr<Engine>> OpenTestEngine(
    const util::TempDir& dir, const EngineHooks& hooks = {}) {
  Options options;
  // Concurrency, not durability, is under test: skip the fdatasyncs.
  options.durability = Durability::kBuffered;
  return OpenEngineWithHooks(dir.Sub("db"), options, hooks);
}

// Adds one to `key` (read-modify-write), pausing `pause` between the read
// and the write to widen any race.
absl::Status Increment(Txn& txn, const std::string& key, absl::Duration pause) {
  absl::StatusOr<int64_t> n = ReadCounter(txn, key);
  if (!n.ok()) return n.status();
  if (pause > absl::ZeroDuration()) absl::SleepFor(pause);
  txn.Put(key, std::to_string(*n + 1));
  return absl::OkStatus();
}

// ---- Shared checks -------------------------------------------------------

// kRacingThreads threads deliver `id` at once. Exactly one handler runs; every
// other delivery is kDuplicate carrying that handler's result; the handler's
// effect is applied once.
::testing::AssertionResult CheckOneHandlerPerId(Engine& engine,
                                                const std::string& id,
                                                absl::Duration pause) {
  Findings f;
  std::atomic<int> runs{0};
  std::vector<absl::StatusOr<Result>> results(kRacingThreads,
                                              absl::UnknownError("not run"));
  const std::string effect = "effect/" + id;
  RunTogether(kRacingThreads, [&](int i) {
    results[i] =
        engine.Process(Message{.id = id}, [&, i](const Message&, Txn& txn) {
          runs.fetch_add(1);
          txn.SetResult("result-of-thread-" + std::to_string(i));
          return Increment(txn, effect, pause);
        });
  });
  int processed = 0;
  int duplicates = 0;
  std::string first_result;
  for (const absl::StatusOr<Result>& r : results) {
    if (!f.Ok(r.status(), "Process(" + id + ")")) continue;
    if (r->outcome == Outcome::kProcessed) {
      ++processed;
      first_result = r->result;
    }
    if (r->outcome == Outcome::kDuplicate) ++duplicates;
  }
  f.Expect(runs.load() == 1,
           id + ": " + std::to_string(runs.load()) + " handlers ran, want 1");
  f.Expect(processed == 1, id + ": " + std::to_string(processed) +
                               " deliveries were kProcessed, want 1");
  f.Expect(duplicates == kRacingThreads - 1,
           id + ": " + std::to_string(duplicates) + " were kDuplicate, want " +
               std::to_string(kRacingThreads - 1));
  for (const absl::StatusOr<Result>& r : results) {
    if (r.ok() && r->outcome == Outcome::kDuplicate) {
      f.Expect(r->result == first_result,
               id + ": a duplicate returned '" + r->result +
                   "', not the first result '" + first_result + "'");
    }
  }
  absl::StatusOr<int64_t> applied = CommittedCounter(engine, effect);
  if (f.Ok(applied.status(), "GetState")) {
    f.Expect(*applied == 1, id + ": effect applied " +
                                std::to_string(*applied) + " times, want 1");
  }
  return f.Result();
}

// kRacingThreads threads deliver `id` at once and the first handler to run
// fails. Another delivery then runs and succeeds; the rest are duplicates of
// it; the failed handler's writes are discarded.
::testing::AssertionResult CheckFailedFirstHandlerLetsAnotherRun(
    Engine& engine, const std::string& id, absl::Duration pause) {
  Findings f;
  std::atomic<int> runs{0};
  std::vector<absl::StatusOr<Result>> results(kRacingThreads,
                                              absl::UnknownError("not run"));
  const std::string effect = "effect/" + id;
  RunTogether(kRacingThreads, [&](int i) {
    results[i] = engine.Process(
        Message{.id = id}, [&, i](const Message&, Txn& txn) -> absl::Status {
          const int attempt = runs.fetch_add(1);
          if (absl::Status s = Increment(txn, effect, pause); !s.ok()) return s;
          if (attempt == 0)
            return absl::UnavailableError("first attempt fails");
          txn.SetResult("result-of-thread-" + std::to_string(i));
          return absl::OkStatus();
        });
  });
  int processed = 0;
  int failed = 0;
  int duplicates = 0;
  std::string winner;
  for (const absl::StatusOr<Result>& r : results) {
    if (!f.Ok(r.status(), "Process(" + id + ")")) continue;
    switch (r->outcome) {
      case Outcome::kProcessed:
        ++processed;
        winner = r->result;
        break;
      case Outcome::kFailed:
        ++failed;
        f.Expect(r->error.code() == absl::StatusCode::kUnavailable,
                 "the failed delivery's error is " + r->error.ToString());
        break;
      case Outcome::kDuplicate:
        ++duplicates;
        break;
      case Outcome::kConflict:
        f.Expect(false, "Process(" + id + ") was a conflict");
        break;
    }
  }
  f.Expect(runs.load() == 2, id + ": " + std::to_string(runs.load()) +
                                 " handlers ran, want 2 (the failed one and "
                                 "one retry)");
  f.Expect(failed == 1,
           id + ": " + std::to_string(failed) + " kFailed, want 1");
  f.Expect(processed == 1,
           id + ": " + std::to_string(processed) + " kProcessed, want 1");
  f.Expect(duplicates == kRacingThreads - 2,
           id + ": " + std::to_string(duplicates) + " kDuplicate, want " +
               std::to_string(kRacingThreads - 2));
  for (const absl::StatusOr<Result>& r : results) {
    if (r.ok() && r->outcome == Outcome::kDuplicate) {
      f.Expect(r->result == winner, id + ": a duplicate returned '" +
                                        r->result + "', not '" + winner + "'");
    }
  }
  absl::StatusOr<int64_t> applied = CommittedCounter(engine, effect);
  if (f.Ok(applied.status(), "GetState")) {
    f.Expect(*applied == 1, id + ": effect applied " +
                                std::to_string(*applied) + " times, want 1");
  }
  return f.Result();
}

// kRacingThreads threads each make `calls` commits of `batch` messages with
// distinct IDs (Process when batch == 1, else ProcessBatch); every handler
// increments one shared counter. No increment is lost.
::testing::AssertionResult CheckNoLostIncrements(Engine& engine,
                                                 const std::string& prefix,
                                                 int calls, int batch,
                                                 absl::Duration pause) {
  Findings f;
  const std::string counter = "counter/" + prefix;
  absl::StatusOr<int64_t> start = CommittedCounter(engine, counter);
  if (!f.Ok(start.status(), "GetState")) return f.Result();
  auto handler = [&](const Message&, Txn& txn) {
    return Increment(txn, counter, pause);
  };
  std::atomic<int64_t> processed{0};
  RunTogether(kRacingThreads, [&](int t) {
    for (int c = 0; c < calls; ++c) {
      std::vector<std::string> ids;
      for (int m = 0; m < batch; ++m) {
        ids.push_back(prefix + "/" + std::to_string(t) + "/" +
                      std::to_string(c) + "/" + std::to_string(m));
      }
      std::vector<Message> messages;
      for (const std::string& id : ids) messages.push_back(Message{.id = id});
      if (batch == 1) {
        absl::StatusOr<Result> r = engine.Process(messages[0], handler);
        if (!f.Ok(r.status(), "Process")) continue;
        f.Expect(r->outcome == Outcome::kProcessed, "a message was not run");
        if (r->outcome == Outcome::kProcessed) processed.fetch_add(1);
      } else {
        absl::StatusOr<std::vector<Result>> rs =
            engine.ProcessBatch(messages, handler);
        if (!f.Ok(rs.status(), "ProcessBatch")) continue;
        for (const Result& r : *rs) {
          f.Expect(r.outcome == Outcome::kProcessed, "a message was not run");
          if (r.outcome == Outcome::kProcessed) processed.fetch_add(1);
        }
      }
    }
  });
  absl::StatusOr<int64_t> end = CommittedCounter(engine, counter);
  if (f.Ok(end.status(), "GetState")) {
    const int64_t want = int64_t{kRacingThreads} * calls * batch;
    f.Expect(processed.load() == want, "only " +
                                           std::to_string(processed.load()) +
                                           " messages were kProcessed");
    f.Expect(*end - *start == want,
             "lost updates: counter grew by " + std::to_string(*end - *start) +
                 " for " + std::to_string(want) + " increments");
  }
  return f.Result();
}

// kRacingThreads threads each deliver the same `ids` in batches of `batch`,
// each starting at a different point of the list. Every ID runs its handler
// exactly once across all threads, the shared counter equals the number of
// IDs, and every duplicate carries the result of the one run. (A handler
// runs more than once only as a rerun after a stale read, which commits
// nothing of the earlier run: the extra runs must equal the reruns counted.)
::testing::AssertionResult CheckExactlyOnceAcrossThreadsInBatches(
    Engine& engine, const std::string& prefix, int ids, int batch,
    absl::Duration pause) {
  Findings f;
  const std::string counter = "counter/" + prefix;
  std::vector<std::string> all_ids;
  for (int i = 0; i < ids; ++i) {
    all_ids.push_back(prefix + "/" + std::to_string(i));
  }
  absl::StatusOr<Stats> stats_before = engine.GetStats();
  if (!f.Ok(stats_before.status(), "GetStats")) return f.Result();
  const uint64_t reruns_before = stats_before->handler_reruns;
  std::mutex mu;
  std::map<std::string, int> runs;                              // guarded by mu
  std::map<std::string, std::string> run_result;                // guarded by mu
  std::vector<std::pair<std::string, std::string>> duplicates;  // by mu
  RunTogether(kRacingThreads, [&](int t) {
    auto handler = [&, t](const Message& m, Txn& txn) -> absl::Status {
      {
        std::lock_guard<std::mutex> lock(mu);
        ++runs[std::string(m.id)];
      }
      txn.SetResult(std::string(m.id) + "@thread-" + std::to_string(t));
      return Increment(txn, counter, pause);
    };
    const int first = (t * ids) / kRacingThreads;
    for (int done = 0; done < ids; done += batch) {
      std::vector<Message> messages;
      for (int k = done; k < ids && k < done + batch; ++k) {
        messages.push_back(Message{.id = all_ids[(first + k) % ids]});
      }
      absl::StatusOr<std::vector<Result>> rs =
          engine.ProcessBatch(messages, handler);
      if (!f.Ok(rs.status(), "ProcessBatch")) continue;
      std::lock_guard<std::mutex> lock(mu);
      for (size_t k = 0; k < rs->size(); ++k) {
        const std::string id(messages[k].id);
        const Result& r = (*rs)[k];
        if (r.outcome == Outcome::kProcessed) {
          f.Expect(!run_result.contains(id), id + " was kProcessed twice");
          run_result[id] = r.result;
        } else if (r.outcome == Outcome::kDuplicate) {
          duplicates.emplace_back(id, r.result);
        } else {
          f.Fail(id + " failed: " + r.error.ToString());
        }
      }
    }
  });
  // A batch whose reads went stale runs its handlers again (counted in
  // Stats::handler_reruns); any other extra run is a second effect.
  int64_t total_runs = 0;
  for (const std::string& id : all_ids) {
    f.Expect(runs[id] >= 1, id + "'s handler never ran");
    total_runs += runs[id];
  }
  absl::StatusOr<Stats> stats = engine.GetStats();
  if (f.Ok(stats.status(), "GetStats")) {
    const int64_t reruns =
        static_cast<int64_t>(stats->handler_reruns - reruns_before);
    f.Expect(total_runs == ids + reruns,
             "handlers ran " + std::to_string(total_runs) + " times for " +
                 std::to_string(ids) + " IDs and " + std::to_string(reruns) +
                 " reruns");
  }
  for (const auto& [id, result] : duplicates) {
    f.Expect(run_result[id] == result, "a duplicate of " + id + " returned '" +
                                           result + "', want '" +
                                           run_result[id] + "'");
  }
  absl::StatusOr<int64_t> end = CommittedCounter(engine, counter);
  if (f.Ok(end.status(), "GetState")) {
    f.Expect(*end == ids, "counter is " + std::to_string(*end) + " for " +
                              std::to_string(ids) + " distinct IDs");
  }
  return f.Result();
}

// kWriters threads each commit `per_writer` messages in order, each
// incrementing that writer's counter, while kReaders threads read: for a
// counter value c, the message that set it (number c-1) must be Seen, and a
// message Seen must be counted; counters never go backwards; WaitDurable on
// an issued sequence succeeds. All reader calls must succeed.
::testing::AssertionResult CheckReadersDuringCommits(Engine& engine,
                                                     const std::string& prefix,
                                                     int per_writer) {
  constexpr int kWriters = 4;
  constexpr int kReaders = 4;
  Findings f;
  std::atomic<int> writers_left{kWriters};
  std::atomic<uint64_t> last_sequence{0};
  auto id_of = [&](int w, int64_t k) {
    return prefix + "/w" + std::to_string(w) + "/" + std::to_string(k);
  };
  auto counter_of = [&](int w) {
    return "counter/" + prefix + "/w" + std::to_string(w);
  };
  std::atomic<int64_t> reads{0};
  RunTogether(kWriters + kReaders, [&](int t) {
    if (t < kWriters) {
      const std::string counter = counter_of(t);
      for (int k = 0; k < per_writer; ++k) {
        absl::StatusOr<Result> r = engine.Process(
            Message{.id = id_of(t, k)}, [&](const Message&, Txn& txn) {
              return Increment(txn, counter, absl::ZeroDuration());
            });
        if (f.Ok(r.status(), "writer Process")) {
          uint64_t seq = last_sequence.load();
          while (seq < r->sequence &&
                 !last_sequence.compare_exchange_weak(seq, r->sequence)) {
          }
        }
      }
      writers_left.fetch_sub(1);
      return;
    }
    std::vector<int64_t> last_seen(kWriters, 0);
    for (int64_t round = 0; writers_left.load() > 0 || round < 10; ++round) {
      const int w = static_cast<int>((round + t) % kWriters);
      absl::StatusOr<int64_t> c = CommittedCounter(engine, counter_of(w));
      if (!f.Ok(c.status(), "reader GetState")) continue;
      f.Expect(*c >= last_seen[w], "a counter went backwards");
      last_seen[w] = *c;
      if (*c > 0) {
        absl::StatusOr<bool> seen = engine.Seen(id_of(w, *c - 1));
        if (f.Ok(seen.status(), "reader Seen")) {
          f.Expect(*seen, "counter " + counter_of(w) + " is " +
                              std::to_string(*c) + " but message " +
                              id_of(w, *c - 1) +
                              " that set it is not Seen (half a commit)");
        }
      }
      // The opposite direction: once the next message is Seen, its
      // increment must be visible too.
      absl::StatusOr<bool> next = engine.Seen(id_of(w, *c + 1));
      if (f.Ok(next.status(), "reader Seen") && *next) {
        absl::StatusOr<int64_t> after = CommittedCounter(engine, counter_of(w));
        if (f.Ok(after.status(), "reader GetState")) {
          f.Expect(*after >= *c + 2, "message " + id_of(w, *c + 1) +
                                         " is Seen but the counter is " +
                                         std::to_string(*after));
        }
      }
      if (const uint64_t seq = last_sequence.load();
          seq > 0 && round % 8 == 0) {
        f.Ok(engine.WaitDurable(seq), "reader WaitDurable");
      }
      reads.fetch_add(1);
    }
  });
  for (int w = 0; w < kWriters; ++w) {
    absl::StatusOr<int64_t> c = CommittedCounter(engine, counter_of(w));
    if (f.Ok(c.status(), "final GetState")) {
      f.Expect(*c == per_writer, "writer " + std::to_string(w) +
                                     "'s counter ended at " +
                                     std::to_string(*c));
    }
  }
  f.Expect(reads.load() > 0, "readers did not run");
  return f.Result();
}

EngineHooks SkipInflightIds() {
  EngineHooks hooks;
  hooks.skip_inflight_ids = true;
  return hooks;
}

EngineHooks SkipReadValidation() {
  EngineHooks hooks;
  hooks.skip_read_validation = true;
  return hooks;
}

// ---- The real engine -------------------------------------------------------

TEST(ConcurrencyTest, SameIdFromEightThreadsRunsOneHandler) {
  util::TempDir dir;
  auto engine = OpenTestEngine(dir);
  ASSERT_TRUE(engine.ok()) << engine.status();
  for (int round = 0; round < 5; ++round) {
    EXPECT_TRUE(CheckOneHandlerPerId(**engine, "id-" + std::to_string(round),
                                     kRaceWidener));
  }
  for (int round = 5; round < 50; ++round) {  // without the widener
    EXPECT_TRUE(CheckOneHandlerPerId(**engine, "id-" + std::to_string(round),
                                     absl::ZeroDuration()));
  }
}

TEST(ConcurrencyTest, FailedFirstHandlerLetsAnotherDeliveryRun) {
  util::TempDir dir;
  auto engine = OpenTestEngine(dir);
  ASSERT_TRUE(engine.ok()) << engine.status();
  for (int round = 0; round < 5; ++round) {
    EXPECT_TRUE(CheckFailedFirstHandlerLetsAnotherRun(
        **engine, "id-" + std::to_string(round), kRaceWidener));
  }
}

TEST(ConcurrencyTest, ConcurrentIncrementsViaProcessAreNeverLost) {
  util::TempDir dir;
  auto engine = OpenTestEngine(dir);
  ASSERT_TRUE(engine.ok()) << engine.status();
  EXPECT_TRUE(CheckNoLostIncrements(**engine, "slow", /*calls=*/10,
                                    /*batch=*/1, kRaceWidener));
  EXPECT_TRUE(CheckNoLostIncrements(**engine, "fast", /*calls=*/400,
                                    /*batch=*/1, absl::ZeroDuration()));
}

TEST(ConcurrencyTest, ConcurrentIncrementsViaProcessBatchAreNeverLost) {
  util::TempDir dir;
  auto engine = OpenTestEngine(dir);
  ASSERT_TRUE(engine.ok()) << engine.status();
  EXPECT_TRUE(CheckNoLostIncrements(**engine, "slow", /*calls=*/3,
                                    /*batch=*/4, kRaceWidener));
  EXPECT_TRUE(CheckNoLostIncrements(**engine, "fast", /*calls=*/100,
                                    /*batch=*/16, absl::ZeroDuration()));
}

TEST(ConcurrencyTest, OverlappingBatchesRunEachIdExactlyOnce) {
  util::TempDir dir;
  auto engine = OpenTestEngine(dir);
  ASSERT_TRUE(engine.ok()) << engine.status();
  EXPECT_TRUE(CheckExactlyOnceAcrossThreadsInBatches(
      **engine, "slow", /*ids=*/40, /*batch=*/5, kRaceWidener / 4));
  EXPECT_TRUE(CheckExactlyOnceAcrossThreadsInBatches(
      **engine, "fast", /*ids=*/2000, /*batch=*/25, absl::ZeroDuration()));
}

TEST(ConcurrencyTest, ReadersDuringCommitsSeeWholeCommits) {
  util::TempDir dir;
  auto engine = OpenTestEngine(dir);
  ASSERT_TRUE(engine.ok()) << engine.status();
  EXPECT_TRUE(CheckReadersDuringCommits(**engine, "r", /*per_writer=*/500));
}

// ---- The same checks catch an engine without in-flight IDs or validation --

TEST(ConcurrencyBrokenVariantTest, WithoutInflightIdsSameIdRunsManyHandlers) {
  util::TempDir dir;
  auto engine = OpenTestEngine(dir, SkipInflightIds());
  ASSERT_TRUE(engine.ok()) << engine.status();
  ::testing::AssertionResult detected =
      test::FirstFailure(kMaxRacingRounds, [&](int round) {
        return CheckOneHandlerPerId(**engine, "id-" + std::to_string(round),
                                    kRaceWidener);
      });
  EXPECT_FALSE(detected) << "no duplicate effect detected in "
                         << kMaxRacingRounds << " rounds";
  EXPECT_THAT(detected.message(), HasSubstr("handlers ran, want 1"));
}

TEST(ConcurrencyBrokenVariantTest, WithoutInflightIdsFailedFirstCheckFails) {
  util::TempDir dir;
  auto engine = OpenTestEngine(dir, SkipInflightIds());
  ASSERT_TRUE(engine.ok()) << engine.status();
  ::testing::AssertionResult detected =
      test::FirstFailure(kMaxRacingRounds, [&](int round) {
        return CheckFailedFirstHandlerLetsAnotherRun(
            **engine, "id-" + std::to_string(round), kRaceWidener);
      });
  EXPECT_FALSE(detected);
  EXPECT_THAT(detected.message(), HasSubstr("kProcessed, want 1"));
}

TEST(ConcurrencyBrokenVariantTest, WithoutReadValidationIncrementsAreLost) {
  util::TempDir dir;
  auto engine = OpenTestEngine(dir, SkipReadValidation());
  ASSERT_TRUE(engine.ok()) << engine.status();
  ::testing::AssertionResult detected =
      test::FirstFailure(kMaxRacingRounds, [&](int round) {
        return CheckNoLostIncrements(**engine, "slow" + std::to_string(round),
                                     /*calls=*/10, /*batch=*/1, kRaceWidener);
      });
  EXPECT_FALSE(detected);
  EXPECT_THAT(detected.message(), HasSubstr("lost updates"));
}

TEST(ConcurrencyBrokenVariantTest,
     WithoutReadValidationBatchIncrementsAreLost) {
  util::TempDir dir;
  auto engine = OpenTestEngine(dir, SkipReadValidation());
  ASSERT_TRUE(engine.ok()) << engine.status();
  ::testing::AssertionResult detected =
      test::FirstFailure(kMaxRacingRounds, [&](int round) {
        return CheckNoLostIncrements(**engine, "slow" + std::to_string(round),
                                     /*calls=*/3, /*batch=*/4, kRaceWidener);
      });
  EXPECT_FALSE(detected);
  EXPECT_THAT(detected.message(), HasSubstr("lost updates"));
}

TEST(ConcurrencyBrokenVariantTest, WithoutInflightIdsBatchesRunIdsTwice) {
  util::TempDir dir;
  auto engine = OpenTestEngine(dir, SkipInflightIds());
  ASSERT_TRUE(engine.ok()) << engine.status();
  ::testing::AssertionResult detected =
      test::FirstFailure(kMaxRacingRounds, [&](int round) {
        return CheckExactlyOnceAcrossThreadsInBatches(
            **engine, "slow" + std::to_string(round), /*ids=*/40, /*batch=*/5,
            kRaceWidener / 4);
      });
  EXPECT_FALSE(detected);
  // An ID ran twice (seen in its outcomes or its applied count), or
  // concurrent batches lost increments.
  EXPECT_THAT(detected.message(),
              AnyOf(HasSubstr("handlers ran"), HasSubstr("kProcessed twice"),
                    HasSubstr("counter is")));
}

TEST(ConcurrencyBrokenVariantTest, SplitCommitIsSeenHalfAppliedByReaders) {
  // With the state write and the dedupe record write split in two, a reader
  // can observe a counter whose message is not yet Seen.
  util::TempDir dir;
  EngineHooks hooks;
  hooks.split_commit = true;
  auto engine = OpenTestEngine(dir, hooks);
  ASSERT_TRUE(engine.ok()) << engine.status();
  ::testing::AssertionResult detected =
      test::FirstFailure(kMaxRacingRounds, [&](int round) {
        return CheckReadersDuringCommits(**engine, "r" + std::to_string(round),
                                         /*per_writer=*/500);
      });
  EXPECT_FALSE(detected);
  EXPECT_THAT(detected.message(), HasSubstr("half a commit"));
}

}  // namespace
}  // namespace idem
