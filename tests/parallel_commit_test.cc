// Guarantees of parallel commits (docs/design.md, "Concurrency"): handlers of
// concurrent calls run at the same time; transfers between keys conserve
// the total; a partition's committed offset never goes backwards whatever
// order concurrent commits land in; a relay reading the outbox while commits
// land sees every entry once, in position order, never one of a commit that
// was not acknowledged; handlers run again only when they touched a key
// another commit changed; the dedupe policies (partition scope, conflicts,
// permanent failures, refresh_on_duplicate, expiry buckets) give the same
// outcomes under parallel calls.
//
// Handlers sleep, so that on a 2-core machine many of them are in flight at
// once. Each subtle guarantee is a check run against the real engine (must
// pass) and against a deliberately broken one from engine/engine_hooks.h
// (the same check must fail within a bounded number of rounds).

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <functional>
#include <latch>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
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

using test::CommittedCounter;
using test::Findings;
using test::ReadCounter;
using test::RunTogether;
using ::testing::HasSubstr;

constexpr int kThreads = 8;
constexpr int kMaxDetectionRounds = 10;
const absl::Duration kPause = absl::Milliseconds(1);

absl::StatusOr<std::unique_ptr<Engine>> OpenEngine(
    const util::TempDir& dir, Options options = {},
    const EngineHooks& hooks = {}) {
  return OpenEngineWithHooks(dir.Sub("db"), options, hooks);
}

Options WithDurability(Durability durability) {
  Options options;
  options.durability = durability;
  return options;
}

Options Buffered() { return WithDurability(Durability::kBuffered); }

using BrokenCheck =
    std::function<::testing::AssertionResult(Engine& engine, int round)>;

// On a kBuffered engine with `hooks` (a deliberately broken variant),
// `check` must fail within kMaxDetectionRounds rounds, naming `failure`.
void ExpectCaught(const EngineHooks& hooks, const BrokenCheck& check,
                  const std::string& failure) {
  util::TempDir dir;
  auto engine = OpenEngine(dir, Buffered(), hooks);
  ASSERT_TRUE(engine.ok()) << engine.status();
  ::testing::AssertionResult detected = test::FirstFailure(
      kMaxDetectionRounds, [&](int round) { return check(**engine, round); });
  EXPECT_FALSE(detected) << "the broken variant went unnoticed";
  EXPECT_THAT(detected.message(), HasSubstr(failure));
}

// ---- Handlers overlap
// --------------------------------------------------------

TEST(ParallelCommitTest, HandlersOfConcurrentCallsRunAtTheSameTime) {
  for (Durability durability : {Durability::kBuffered, Durability::kSync}) {
    util::TempDir dir;
    auto engine = OpenEngine(dir, WithDurability(durability));
    ASSERT_TRUE(engine.ok()) << engine.status();
    std::atomic<int> running{0};
    std::atomic<int> most{0};
    RunTogether(kThreads, [&](int t) {
      for (int i = 0; i < 3; ++i) {
        absl::StatusOr<Result> r = (*engine)->Process(
            Message{.id = absl::StrCat("m", t, "-", i)},
            [&](const Message&, Txn& txn) {
              const int now = running.fetch_add(1) + 1;
              int seen = most.load();
              while (now > seen && !most.compare_exchange_weak(seen, now)) {
              }
              absl::SleepFor(absl::Milliseconds(20));
              txn.Put(absl::StrCat("k", t), "v");
              running.fetch_sub(1);
              return absl::OkStatus();
            });
        ASSERT_TRUE(r.ok()) << r.status();
        EXPECT_EQ(r->outcome, Outcome::kProcessed);
      }
    });
    // One at a time would give 1; sleeping handlers overlap on any machine.
    EXPECT_GE(most.load(), kThreads / 2)
        << "at most " << most.load() << " handlers ran at once";
  }
}

// ---- Transfers conserve the total ------------------------------------------

constexpr int kAccounts = 4;
constexpr int64_t kInitialBalance = 1000;

std::string Account(const std::string& prefix, int a) {
  return absl::StrCat(prefix, "/account-", a);
}

// kThreads threads each make `per_thread` transfers of 1..5 between two of
// kAccounts shared accounts (read both, pause, write both). The total never
// changes and each account ends at its initial balance plus what the
// committed transfers moved into it, minus what they moved out.
::testing::AssertionResult CheckTransfersConserveTheTotal(
    Engine& engine, const std::string& prefix, int per_thread,
    absl::Duration pause) {
  Findings f;
  absl::StatusOr<Result> setup = engine.Process(
      Message{.id = prefix + "/setup"}, [&](const Message&, Txn& txn) {
        for (int a = 0; a < kAccounts; ++a) {
          txn.Put(Account(prefix, a), std::to_string(kInitialBalance));
        }
        return absl::OkStatus();
      });
  if (!f.Ok(setup.status(), "setup")) return f.Result();
  std::mutex mu;
  std::vector<int64_t> expected(kAccounts, kInitialBalance);  // guarded by mu
  RunTogether(kThreads, [&](int t) {
    for (int i = 0; i < per_thread; ++i) {
      const int from = (t + i) % kAccounts;
      const int to = (t + 2 * i + 1) % kAccounts == from
                         ? (from + 1) % kAccounts
                         : (t + 2 * i + 1) % kAccounts;
      const int64_t amount = 1 + (t + i) % 5;
      absl::StatusOr<Result> r = engine.Process(
          Message{.id = absl::StrCat(prefix, "/t", t, "/", i)},
          [&](const Message&, Txn& txn) -> absl::Status {
            absl::StatusOr<int64_t> a = ReadCounter(txn, Account(prefix, from));
            if (!a.ok()) return a.status();
            absl::StatusOr<int64_t> b = ReadCounter(txn, Account(prefix, to));
            if (!b.ok()) return b.status();
            absl::SleepFor(pause);
            txn.Put(Account(prefix, from), std::to_string(*a - amount));
            txn.Put(Account(prefix, to), std::to_string(*b + amount));
            return absl::OkStatus();
          });
      if (!f.Ok(r.status(), "transfer")) continue;
      if (r->outcome == Outcome::kProcessed) {
        std::lock_guard<std::mutex> lock(mu);
        expected[from] -= amount;
        expected[to] += amount;
      } else {
        f.Fail("a transfer was not processed: " + r->error.ToString());
      }
    }
  });
  int64_t total = 0;
  for (int a = 0; a < kAccounts; ++a) {
    absl::StatusOr<int64_t> balance =
        CommittedCounter(engine, Account(prefix, a));
    if (!f.Ok(balance.status(), "GetState")) continue;
    total += *balance;
    f.Expect(*balance == expected[a],
             absl::StrCat("account ", a, " holds ", *balance,
                          "; the committed transfers say ", expected[a]));
  }
  f.Expect(total == kAccounts * kInitialBalance,
           absl::StrCat("the total is ", total, ", not ",
                        kAccounts * kInitialBalance));
  return f.Result();
}

TEST(ParallelCommitTest, TransfersBetweenKeysConserveTheTotal) {
  util::TempDir dir;
  auto engine = OpenEngine(dir, Buffered());
  ASSERT_TRUE(engine.ok()) << engine.status();
  EXPECT_TRUE(CheckTransfersConserveTheTotal(**engine, "slow", 10, kPause));
  EXPECT_TRUE(CheckTransfersConserveTheTotal(**engine, "fast", 200,
                                             absl::ZeroDuration()));
}

TEST(ParallelCommitTest, TransfersUnderSyncConserveTheTotal) {
  util::TempDir dir;
  auto engine = OpenEngine(dir);
  ASSERT_TRUE(engine.ok()) << engine.status();
  EXPECT_TRUE(CheckTransfersConserveTheTotal(**engine, "sync", 10, kPause));
}

TEST(ParallelCommitBrokenVariantTest, WithoutReadValidationTransfersLoseMoney) {
  EngineHooks hooks;
  hooks.skip_read_validation = true;
  ExpectCaught(
      hooks,
      [](Engine& engine, int round) {
        return CheckTransfersConserveTheTotal(engine, absl::StrCat("r", round),
                                              10, kPause);
      },
      "the committed transfers say");
}

// ---- Reruns
// --------------------------------------------------------------------

// kThreads threads increment `keys` counters (thread t uses key t %
// keys) with a pause between read and write. Returns the handler reruns
// the engine counted; every increment must land.
absl::StatusOr<uint64_t> IncrementWithReruns(Engine& engine,
                                             const std::string& prefix,
                                             int keys, int per_thread) {
  absl::StatusOr<Stats> before = engine.GetStats();
  if (!before.ok()) return before.status();
  std::atomic<int> errors{0};
  RunTogether(kThreads, [&](int t) {
    const std::string key = absl::StrCat(prefix, "/counter-", t % keys);
    for (int i = 0; i < per_thread; ++i) {
      absl::StatusOr<Result> r =
          engine.Process(Message{.id = absl::StrCat(prefix, "/", t, "/", i)},
                         [&](const Message&, Txn& txn) -> absl::Status {
                           absl::StatusOr<int64_t> n = ReadCounter(txn, key);
                           if (!n.ok()) return n.status();
                           absl::SleepFor(kPause);
                           txn.Put(key, std::to_string(*n + 1));
                           return absl::OkStatus();
                         });
      if (!r.ok() || r->outcome != Outcome::kProcessed) errors.fetch_add(1);
    }
  });
  if (errors.load() > 0) return absl::InternalError("a message failed");
  int64_t sum = 0;
  for (int k = 0; k < keys; ++k) {
    absl::StatusOr<int64_t> n =
        CommittedCounter(engine, absl::StrCat(prefix, "/counter-", k));
    if (!n.ok()) return n.status();
    sum += *n;
  }
  if (sum != int64_t{kThreads} * per_thread) {
    return absl::InternalError(absl::StrCat("lost updates: ", sum));
  }
  absl::StatusOr<Stats> after = engine.GetStats();
  if (!after.ok()) return after.status();
  return after->handler_reruns - before->handler_reruns;
}

TEST(ParallelCommitTest, HandlersOnDisjointKeysNeverRunAgain) {
  util::TempDir dir;
  auto engine = OpenEngine(dir, Buffered());
  ASSERT_TRUE(engine.ok()) << engine.status();
  absl::StatusOr<uint64_t> reruns =
      IncrementWithReruns(**engine, "disjoint", kThreads, 20);
  ASSERT_TRUE(reruns.ok()) << reruns.status();
  EXPECT_EQ(*reruns, 0u);
}

TEST(ParallelCommitTest, HandlersOnOneHotKeyRunAgainAndLoseNothing) {
  util::TempDir dir;
  auto engine = OpenEngine(dir, Buffered());
  ASSERT_TRUE(engine.ok()) << engine.status();
  absl::StatusOr<uint64_t> reruns = IncrementWithReruns(**engine, "hot", 1, 10);
  ASSERT_TRUE(reruns.ok()) << reruns.status();
  // Sleeping handlers on one key overlap: some read a value another commit
  // changed before they committed.
  EXPECT_GT(*reruns, 0u);
}

// ---- Offsets never go backwards
// -----------------------------------------------

// kThreads threads commit offsets 0..kThreads*per_thread-1 of one partition,
// thread t the offsets t, t + kThreads, ..., higher offsets pausing less, so
// that commits land out of offset order; a reader polls CommittedOffset.
// The committed offset never decreases and ends at the highest.
::testing::AssertionResult CheckOffsetsNeverGoBack(Engine& engine,
                                                   const std::string& source,
                                                   int per_thread) {
  Findings f;
  const int64_t last = int64_t{kThreads} * per_thread - 1;
  std::atomic<bool> done{false};
  std::thread reader([&] {
    int64_t seen = -1;
    while (!done.load()) {
      absl::StatusOr<std::optional<int64_t>> o =
          engine.CommittedOffset(source, 0);
      if (!f.Ok(o.status(), "CommittedOffset")) return;
      const int64_t now = o->value_or(-1);
      f.Expect(now >= seen, absl::StrCat("the committed offset went from ",
                                         seen, " back to ", now));
      seen = std::max(seen, now);
    }
  });
  RunTogether(kThreads, [&](int t) {
    for (int i = 0; i < per_thread; ++i) {
      const int64_t offset = int64_t{i} * kThreads + t;
      absl::StatusOr<Result> r = engine.Process(
          Message{.id = absl::StrCat(source, "/", offset),
                  .source = source,
                  .partition = 0,
                  .offset = offset},
          [&](const Message&, Txn&) {
            absl::SleepFor(absl::Microseconds(200 * (kThreads - t)));
            return absl::OkStatus();
          });
      f.Ok(r.status(), "Process");
    }
  });
  done.store(true);
  reader.join();
  absl::StatusOr<std::optional<int64_t>> end =
      engine.CommittedOffset(source, 0);
  if (f.Ok(end.status(), "CommittedOffset")) {
    f.Expect(end->value_or(-1) == last,
             absl::StrCat("the committed offset ended at ", end->value_or(-1),
                          ", not ", last));
  }
  return f.Result();
}

TEST(ParallelCommitTest, OffsetsNeverGoBackwards) {
  util::TempDir dir;
  auto engine = OpenEngine(dir, Buffered());
  ASSERT_TRUE(engine.ok()) << engine.status();
  EXPECT_TRUE(CheckOffsetsNeverGoBack(**engine, "topic", 25));
}

TEST(ParallelCommitBrokenVariantTest, WithoutQueuedOffsetsOffsetsGoBack) {
  EngineHooks hooks;
  hooks.skip_queued_offsets = true;
  ExpectCaught(
      hooks,
      [](Engine& engine, int round) {
        return CheckOffsetsNeverGoBack(engine, absl::StrCat("topic", round),
                                       25);
      },
      "committed offset");
}

// ---- The outbox
// ------------------------------------------------------------------

// kThreads threads each commit `per_thread` messages that emit one entry
// each (value: the message ID) while a relay reads and acknowledges the
// outbox. The relay sees positions strictly increasing and without gaps,
// each entry once, only entries of messages whose commit returned or is
// about to (never one that failed), and in the end all of them.
::testing::AssertionResult CheckRelaySeesEveryEntryOnceInOrder(
    Engine& engine, const std::string& prefix) {
  constexpr int kPerThread = 20;
  std::atomic<int> writers_left{kThreads};
  std::vector<std::string> relayed;
  uint64_t last_position = 0;
  Findings f;
  // Positions continue from the previous round's acknowledged ones.
  absl::StatusOr<Stats> stats = engine.GetStats();
  if (!f.Ok(stats.status(), "GetStats")) return f.Result();
  last_position = stats->outbox_acknowledged;
  std::thread relay([&] {
    for (;;) {
      const bool last_round = writers_left.load() == 0;
      absl::StatusOr<std::vector<OutboxEntry>> entries = engine.ReadOutbox(16);
      if (!f.Ok(entries.status(), "ReadOutbox")) return;
      for (const OutboxEntry& e : *entries) {
        f.Expect(
            e.position == last_position + 1,
            absl::StrCat("position ", e.position, " after ", last_position));
        last_position = e.position;
        relayed.push_back(e.value);
      }
      if (!entries->empty()) {
        f.Ok(engine.AckOutbox(entries->back().position), "AckOutbox");
      } else if (last_round) {
        return;
      }
    }
  });
  std::mutex mu;
  std::set<std::string> committed;  // guarded by mu
  RunTogether(kThreads, [&](int t) {
    for (int i = 0; i < kPerThread; ++i) {
      const std::string id = absl::StrCat(prefix, "/m", t, "-", i);
      // Every third message fails after emitting: nothing of it commits.
      const bool fail = i % 3 == 2;
      absl::StatusOr<Result> r =
          engine.Process(Message{.id = id}, [&](const Message&, Txn& txn) {
            absl::SleepFor(absl::Microseconds(100 * (t % 4)));
            txn.Emit("out", "k", id);
            return fail ? absl::UnavailableError("fails") : absl::OkStatus();
          });
      if (f.Ok(r.status(), "Process") && r->outcome == Outcome::kProcessed) {
        std::lock_guard<std::mutex> lock(mu);
        committed.insert(id);
      }
    }
    writers_left.fetch_sub(1);
  });
  relay.join();
  std::set<std::string> relayed_set(relayed.begin(), relayed.end());
  f.Expect(relayed_set.size() == relayed.size(),
           "the relay saw an entry twice");
  f.Expect(relayed_set == committed,
           absl::StrCat("the relay saw ", relayed_set.size(), " entries for ",
                        committed.size(), " processed messages"));
  return f.Result();
}

TEST(ParallelCommitTest, RelayDuringParallelCommitsSeesEveryEntryOnceInOrder) {
  for (Durability durability : {Durability::kBuffered, Durability::kSync}) {
    util::TempDir dir;
    auto engine = OpenEngine(dir, WithDurability(durability));
    ASSERT_TRUE(engine.ok()) << engine.status();
    EXPECT_TRUE(CheckRelaySeesEveryEntryOnceInOrder(**engine, "relay"))
        << (durability == Durability::kSync ? "kSync" : "kBuffered");
  }
}

TEST(ParallelCommitBrokenVariantTest, UnorderedWritesMakeTheRelaySkipEntries) {
  EngineHooks hooks;
  hooks.unordered_writes = true;
  ExpectCaught(
      hooks,
      [](Engine& engine, int round) {
        return CheckRelaySeesEveryEntryOnceInOrder(engine,
                                                   absl::StrCat("r", round));
      },
      "position");
}

// ---- Dedupe policies under parallel calls
// --------------------------------------

// kThreads threads deliver the same IDs on two partitions of a
// partition-scoped store with conflict detection, expiry buckets and
// refresh_on_duplicate: half the deliveries carry a different payload, and
// the handler fails permanently for some IDs. Per (partition, ID): one
// delivery runs, the others are duplicates of its result, conflicts (other
// payload) or the remembered permanent failure.
TEST(ParallelCommitTest, DedupePoliciesGiveTheSameOutcomesUnderParallelCalls) {
  util::TempDir dir;
  Options options = Buffered();
  options.dedupe_scope = DedupeScope::kPartition;
  options.detect_conflicts = true;
  options.refresh_on_duplicate = true;
  options.expiry_buckets = 4;
  auto engine = OpenEngine(dir, options);
  ASSERT_TRUE(engine.ok()) << engine.status();
  constexpr int kIds = 12;
  std::mutex mu;
  // (partition, id) -> outcomes and handler runs, guarded by mu.
  std::map<std::pair<int, int>, std::vector<Result>> outcomes;
  std::map<std::pair<int, int>, int> runs;
  RunTogether(kThreads, [&](int t) {
    for (int i = 0; i < kIds; ++i) {
      const int partition = t % 2;
      const std::string id = absl::StrCat("id-", i);
      const std::string payload = (t / 2) % 2 == 0 ? "a" : "b";
      absl::StatusOr<Result> r = (*engine)->Process(
          Message{.id = id,
                  .payload = payload,
                  .source = "topic",
                  .partition = partition,
                  .offset = t * kIds + i},
          [&](const Message&, Txn& txn) -> absl::Status {
            {
              std::lock_guard<std::mutex> lock(mu);
              ++runs[{partition, i}];
            }
            absl::SleepFor(absl::Microseconds(300));
            if (i % 4 == 3)
              return PermanentError(absl::InvalidArgumentError("bad"));
            txn.SetResult(absl::StrCat("result-", t));
            return absl::OkStatus();
          });
      ASSERT_TRUE(r.ok()) << r.status();
      std::lock_guard<std::mutex> lock(mu);
      outcomes[{partition, i}].push_back(*r);
    }
  });
  for (const auto& [key, results] : outcomes) {
    const auto [partition, i] = key;
    SCOPED_TRACE(absl::StrCat("partition ", partition, " id-", i));
    EXPECT_EQ(runs[key], 1);
    int first = 0;
    std::string first_result;
    for (const Result& r : results) {
      const bool permanent = i % 4 == 3;
      if (r.outcome == Outcome::kProcessed) {
        ++first;
        first_result = r.result;
      }
      if (permanent) {
        EXPECT_TRUE(r.outcome == Outcome::kFailed ||
                    r.outcome == Outcome::kConflict)
            << static_cast<int>(r.outcome);
        if (r.outcome == Outcome::kFailed) {
          EXPECT_TRUE(r.permanent);
        }
      }
    }
    EXPECT_EQ(first, i % 4 == 3 ? 0 : 1);
    for (const Result& r : results) {
      if (r.outcome == Outcome::kDuplicate) {
        EXPECT_EQ(r.result, first_result);
      }
    }
  }
}

}  // namespace
}  // namespace idem
