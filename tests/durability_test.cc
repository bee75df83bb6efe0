// Durability and failure atomicity of the engine under injected storage
// faults (idem::crash::CrashFileSystem): a commit that hits an I/O error or a
// full disk returns the right status code and commits nothing; reads keep
// working; the engine recovers once the fault clears; under kBuffered,
// WaitDurable fails during a fault and succeeds after it; a commit is all or
// nothing even when the fault hits between writes; and what was committed
// (kBuffered: acknowledged by WaitDurable, or present when the engine was
// closed) survives a simulated power loss.
//
// Each guarantee is a check function run by two tests: against the real
// engine (must pass) and against a deliberately broken engine from
// engine/engine_hooks.h (the same check must report failure; a
// DurabilityBrokenVariantTest, or SplitCommitIsCaughtHalfApplied).

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "engine/engine_hooks.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "idem/clock.h"
#include "idem/crash/file_system.h"
#include "idem/engine.h"
#include "tests/testing/engine_test_util.h"
#include "tests/testing/findings.h"

namespace idem {
namespace {

using crash::FaultTarget;
using test::EngineHarness;
using test::Findings;
using ::testing::HasSubstr;

// A fault SetFault injects: its status code (kOk: none).
using Fault = absl::StatusCode;

constexpr char kSource[] = "topic";

std::string Name(Durability d) {
  return d == Durability::kSync ? "Sync" : "Buffered";
}
std::string Name(Fault f) {
  switch (f) {
    case Fault::kOk:
      return "None";
    case Fault::kUnavailable:
      return "IoError";
    case Fault::kResourceExhausted:
      return "NoSpace";
    default:
      return "?";
  }
}

// Every harness here is on a CrashFileSystem.
constexpr EngineHarness::Storage kCrashFs =
    EngineHarness::Storage::kCrashFileSystem;

Options WithDurability(Durability durability) {
  Options options;
  options.durability = durability;
  return options;
}

std::string EffectKey(const std::string& id) { return "effect/" + id; }

// Delivers message `id` at `offset` of kSource partition 0. Its handler
// marks its effect (state key effect/<id>) and increments "counter".
absl::StatusOr<Result> Apply(Engine& engine, const std::string& id,
                             int64_t offset) {
  return engine.Process(
      Message{.id = id, .source = kSource, .partition = 0, .offset = offset},
      [&](const Message&, Txn& txn) -> absl::Status {
        absl::StatusOr<std::optional<std::string>> v = txn.Get("counter");
        if (!v.ok()) return v.status();
        int64_t n = 0;
        if (v->has_value() && !absl::SimpleAtoi(**v, &n)) {
          return absl::InternalError("bad counter");
        }
        txn.Put("counter", std::to_string(n + 1));
        txn.Put(EffectKey(id), "applied");
        txn.SetResult("result-" + id);
        return absl::OkStatus();
      });
}

// What the engine reports about message `id`.
struct Observed {
  bool seen = false;
  bool effect = false;
};

absl::StatusOr<Observed> Observe(Engine& engine, const std::string& id) {
  Observed o;
  absl::StatusOr<bool> seen = engine.Seen(id);
  if (!seen.ok()) return seen.status();
  o.seen = *seen;
  absl::StatusOr<std::optional<std::string>> effect =
      engine.GetState(EffectKey(id));
  if (!effect.ok()) return effect.status();
  o.effect = effect->has_value();
  return o;
}

absl::StatusOr<int64_t> Counter(Engine& engine) {
  absl::StatusOr<std::optional<std::string>> v = engine.GetState("counter");
  if (!v.ok()) return v.status();
  int64_t n = 0;
  if (v->has_value() && !absl::SimpleAtoi(**v, &n)) {
    return absl::InternalError("bad counter");
  }
  return n;
}

// Expects messages ids[0..committed) fully committed (Seen, effect present,
// counter == committed, offset == committed) and ids[committed..) not at
// all. Reads must succeed.
void ExpectCommittedPrefix(Findings& f, Engine& engine,
                           const std::vector<std::string>& ids,
                           size_t committed, const std::string& when) {
  for (size_t i = 0; i < ids.size(); ++i) {
    absl::StatusOr<Observed> o = Observe(engine, ids[i]);
    if (!f.Ok(o.status(), "reading " + ids[i] + " " + when)) continue;
    const bool want = i < committed;
    f.Expect(o->seen == want,
             ids[i] + (want ? " is not" : " is") + " Seen " + when);
    f.Expect(o->effect == want, ids[i] + "'s effect is " +
                                    (o->effect ? "present " : "missing ") +
                                    when);
  }
  absl::StatusOr<int64_t> counter = Counter(engine);
  if (f.Ok(counter.status(), "reading the counter " + when)) {
    f.Expect(*counter == static_cast<int64_t>(committed),
             "counter is " + std::to_string(*counter) + " " + when + ", want " +
                 std::to_string(committed));
  }
  absl::StatusOr<std::optional<int64_t>> offset =
      engine.CommittedOffset(kSource, 0);
  if (f.Ok(offset.status(), "reading the offset " + when)) {
    const bool as_expected =
        committed == 0 ? !offset->has_value()
                       : offset->has_value() &&
                             **offset == static_cast<int64_t>(committed);
    f.Expect(as_expected, "committed offset is " +
                              (offset->has_value() ? std::to_string(**offset)
                                                   : std::string("none")) +
                              " " + when);
  }
}

std::vector<std::string> Ids(int n) {
  std::vector<std::string> ids;
  for (int i = 1; i <= n; ++i) ids.push_back("m" + std::to_string(i));
  return ids;
}

// ---- Shared checks -------------------------------------------------------

// The atomicity check: for every message, its dedupe record is present iff
// its state effect is, and the counter counts exactly the committed ones.
void ExpectAllOrNothing(Findings& f, Engine& engine,
                        const std::vector<std::string>& ids,
                        const std::string& when) {
  int64_t committed = 0;
  for (const std::string& id : ids) {
    absl::StatusOr<Observed> o = Observe(engine, id);
    if (!f.Ok(o.status(), "reading " + id + " " + when)) continue;
    f.Expect(o->seen == o->effect,
             id + " half committed " + when + ": record " +
                 (o->seen ? "present" : "absent") + ", effect " +
                 (o->effect ? "present" : "absent"));
    if (o->seen) ++committed;
  }
  absl::StatusOr<int64_t> counter = Counter(engine);
  if (f.Ok(counter.status(), "reading the counter " + when)) {
    f.Expect(*counter == committed, "counter is " + std::to_string(*counter) +
                                        " but " + std::to_string(committed) +
                                        " messages are recorded " + when);
  }
}

// Commits m1, then arms a fault that lets exactly one more WAL append
// through, and delivers m2 and m3 (a one-write commit gets m2 through and
// fails m3; a two-write commit fails in the middle of m2). Each message is
// all or nothing right after m2's commit and after the fault clears and the
// store is reopened; finally every message is redelivered and each effect
// must be applied exactly once.
::testing::AssertionResult CheckAtomicWhenSecondWriteFails(EngineHarness& h,
                                                           Fault fault) {
  Findings f;
  const std::vector<std::string> ids = Ids(3);
  if (!f.Ok(h.Open(), "open")) return f.Result();
  f.Ok(Apply(h.engine(), ids[0], 1).status(), "delivering m1");
  h.fs().FailAfterAppends(1, fault);
  absl::StatusOr<Result> m2 = Apply(h.engine(), ids[1], 2);
  // Checked before m3: a retry during the fault makes the engine try to
  // reopen its store, and reads fail while it is closed (a separate bug,
  // see RetriesDuringFaultFailAndReadsKeepWorking).
  ExpectAllOrNothing(f, h.engine(), ids, "after m2's commit");
  absl::StatusOr<Result> m3 = Apply(h.engine(), ids[2], 3);
  f.Expect(!m2.ok() || !m3.ok(), "the armed fault never tripped");
  h.fs().SetFault(Fault::kOk);
  if (!f.Ok(h.Open(), "reopen after the fault")) return f.Result();
  ExpectAllOrNothing(f, h.engine(), ids, "after reopening");
  for (size_t i = 0; i < ids.size(); ++i) {
    f.Ok(Apply(h.engine(), ids[i], static_cast<int64_t>(i + 1)).status(),
         "redelivering " + ids[i]);
  }
  ExpectCommittedPrefix(f, h.engine(), ids, ids.size(),
                        "after redelivering everything");
  return f.Result();
}

// Commits messages under kBuffered without WaitDurable (singly and in a
// batch), destroys the engine, and expects every one of them both on reopen
// and in what a power loss right after the close would leave.
::testing::AssertionResult CheckCloseMakesCommitsDurable(EngineHarness& h) {
  Findings f;
  const std::vector<std::string> ids = Ids(30);
  if (!f.Ok(h.Open(), "open")) return f.Result();
  for (size_t i = 0; i < 20; ++i) {
    f.Ok(Apply(h.engine(), ids[i], static_cast<int64_t>(i + 1)).status(),
         "delivering " + ids[i]);
  }
  {
    std::vector<Message> batch;
    for (size_t i = 20; i < ids.size(); ++i) {
      batch.push_back(Message{.id = ids[i],
                              .source = kSource,
                              .partition = 0,
                              .offset = static_cast<int64_t>(i + 1)});
    }
    absl::StatusOr<std::vector<Result>> rs = h.engine().ProcessBatch(
        batch, [](const Message& m, Txn& txn) -> absl::Status {
          absl::StatusOr<std::optional<std::string>> v = txn.Get("counter");
          if (!v.ok()) return v.status();
          int64_t n = 0;
          if (v->has_value() && !absl::SimpleAtoi(**v, &n)) {
            return absl::InternalError("bad counter");
          }
          txn.Put("counter", std::to_string(n + 1));
          txn.Put(EffectKey(std::string(m.id)), "applied");
          return absl::OkStatus();
        });
    f.Ok(rs.status(), "delivering the batch");
  }
  h.Close();
  absl::StatusOr<std::unique_ptr<Engine>> image = h.OpenDurableImage();
  if (f.Ok(image.status(), "opening the power-loss image")) {
    ExpectCommittedPrefix(f, **image, ids, ids.size(),
                          "after a power loss following the close");
  }
  if (f.Ok(h.Open(), "reopening")) {
    ExpectCommittedPrefix(f, h.engine(), ids, ids.size(), "after reopening");
  }
  return f.Result();
}

// Under kBuffered, what WaitDurable acknowledged survives a power loss taken
// right after it, while the engine is still open.
::testing::AssertionResult CheckWaitDurableMeansDurable(EngineHarness& h) {
  Findings f;
  const std::vector<std::string> ids = Ids(10);
  if (!f.Ok(h.Open(), "open")) return f.Result();
  uint64_t last = 0;
  for (size_t i = 0; i < ids.size(); ++i) {
    absl::StatusOr<Result> r =
        Apply(h.engine(), ids[i], static_cast<int64_t>(i + 1));
    if (f.Ok(r.status(), "delivering " + ids[i])) last = r->sequence;
  }
  f.Ok(h.engine().WaitDurable(last), "WaitDurable");
  absl::StatusOr<std::unique_ptr<Engine>> image = h.OpenDurableImage();
  if (f.Ok(image.status(), "opening the power-loss image")) {
    ExpectCommittedPrefix(f, **image, ids, ids.size(),
                          "after a power loss following WaitDurable");
  }
  return f.Result();
}

// Under kBuffered, m1 is made durable and m2, m3 are committed but not yet
// synced. Then every file fails; delivering m4 fails 1 + `retries` times.
// While the store is down the OS drops the unsynced log tail (m2 and m3), as
// Linux may after a writeback error. Once the fault clears, the engine must
// not carry on as if m2 and m3 were stored (engine_impl.h: "commits the OS
// lost in between would show as a lower recovered sequence, in which case the
// engine stops with kDataLoss"): it reports kDataLoss, or they are there.
::testing::AssertionResult CheckLostCommitsAreNeverSilent(EngineHarness& h,
                                                          int retries) {
  Findings f;
  const std::vector<std::string> ids = Ids(4);
  if (!f.Ok(h.Open(), "open")) return f.Result();
  absl::StatusOr<Result> r1 = Apply(h.engine(), ids[0], 1);
  if (!f.Ok(r1.status(), "delivering m1")) return f.Result();
  f.Ok(h.engine().WaitDurable(r1->sequence), "WaitDurable(m1)");
  absl::StatusOr<Result> r2 = Apply(h.engine(), ids[1], 2);
  absl::StatusOr<Result> r3 = Apply(h.engine(), ids[2], 3);
  if (!f.Ok(r2.status(), "delivering m2") ||
      !f.Ok(r3.status(), "delivering m3")) {
    return f.Result();
  }
  h.fs().SetFault(Fault::kUnavailable, FaultTarget::kAllFiles);
  for (int attempt = 0; attempt <= retries; ++attempt) {
    absl::StatusOr<Result> r4 = Apply(h.engine(), ids[3], 4);
    f.Expect(!r4.ok(), "m4 committed during the fault");
  }
  f.Ok(h.fs().DropUnsyncedWalData(h.path()), "dropping unsynced log data");
  h.fs().SetFault(Fault::kOk);
  absl::StatusOr<Result> r4 = Apply(h.engine(), ids[3], 4);
  if (!r4.ok()) {
    f.Expect(r4.status().code() == absl::StatusCode::kDataLoss,
             "after the fault cleared m4 failed with " +
                 r4.status().ToString() + ", want kDataLoss");
    return f.Result();
  }
  // The engine carried on, so nothing it acknowledged may be missing.
  for (size_t i : {size_t{1}, size_t{2}}) {
    absl::StatusOr<Observed> o = Observe(h.engine(), ids[i]);
    if (!f.Ok(o.status(), "reading " + ids[i])) continue;
    f.Expect(o->seen && o->effect,
             ids[i] +
                 " was committed but is silently lost: the engine "
                 "carried on after recovery without reporting kDataLoss");
  }
  absl::Status wait = h.engine().WaitDurable(r3->sequence);
  absl::StatusOr<Observed> m3 = Observe(h.engine(), ids[2]);
  if (wait.ok() && m3.ok() && !m3->seen) {
    f.Fail("WaitDurable(" + std::to_string(r3->sequence) +
           ") (m3's sequence) returned OK although m3 is lost; the sequence "
           "now belongs to " +
           std::string(r4->sequence >= r3->sequence ? "a later commit"
                                                    : "nothing"));
  }
  return f.Result();
}

// ---- Faults during commits: every durability x fault ----------------------

struct FaultCase {
  Durability durability;
  Fault fault;
};

class DurabilityFaultTest : public ::testing::TestWithParam<FaultCase> {};

TEST_P(DurabilityFaultTest,
       CommitDuringFaultFailsWithItsCodeAndCommitsNothing) {
  const FaultCase& c = GetParam();
  EngineHarness h(WithDurability(c.durability), kCrashFs);
  ASSERT_TRUE(h.Open().ok());
  const std::vector<std::string> ids = Ids(2);
  absl::StatusOr<Result> first = Apply(h.engine(), ids[0], 1);
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_TRUE(h.engine().WaitDurable(first->sequence).ok());

  h.fs().SetFault(c.fault);
  absl::StatusOr<Result> failed = Apply(h.engine(), ids[1], 2);
  ASSERT_FALSE(failed.ok()) << "a commit succeeded during the fault";
  EXPECT_EQ(failed.status().code(), c.fault) << failed.status();
  EXPECT_GT(h.fs().failures(), 0);
  Findings f;
  ExpectCommittedPrefix(f, h.engine(), ids, 1, "after the failed commit");
  EXPECT_TRUE(f.Result());
}

TEST_P(DurabilityFaultTest, RetriesDuringFaultFailAndReadsKeepWorking) {
  const FaultCase& c = GetParam();
  EngineHarness h(WithDurability(c.durability), kCrashFs);
  ASSERT_TRUE(h.Open().ok());
  const std::vector<std::string> ids = Ids(2);
  ASSERT_TRUE(Apply(h.engine(), ids[0], 1).ok());

  h.fs().SetFault(c.fault);
  for (int attempt = 0; attempt < 3; ++attempt) {
    SCOPED_TRACE("attempt " + std::to_string(attempt));
    absl::StatusOr<Result> failed = Apply(h.engine(), ids[1], 2);
    ASSERT_FALSE(failed.ok());
    EXPECT_EQ(failed.status().code(), c.fault) << failed.status();
    // GetState, Seen and CommittedOffset keep answering from what was
    // committed before the fault.
    Findings f;
    ExpectCommittedPrefix(f, h.engine(), ids, 1, "during the fault");
    EXPECT_TRUE(f.Result());
  }
}

TEST_P(DurabilityFaultTest, EngineIsUsableAgainOnceTheFaultClears) {
  const FaultCase& c = GetParam();
  EngineHarness h(WithDurability(c.durability), kCrashFs);
  ASSERT_TRUE(h.Open().ok());
  const std::vector<std::string> ids = Ids(3);
  ASSERT_TRUE(Apply(h.engine(), ids[0], 1).ok());
  h.fs().SetFault(c.fault);
  EXPECT_FALSE(Apply(h.engine(), ids[1], 2).ok());
  EXPECT_FALSE(Apply(h.engine(), ids[1], 2).ok());
  h.fs().SetFault(Fault::kOk);

  absl::StatusOr<Result> retried = Apply(h.engine(), ids[1], 2);
  ASSERT_TRUE(retried.ok()) << retried.status();
  EXPECT_EQ(retried->outcome, Outcome::kProcessed);
  EXPECT_EQ(retried->result, "result-m2");
  absl::StatusOr<Result> next = Apply(h.engine(), ids[2], 3);
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_TRUE(h.engine().WaitDurable(next->sequence).ok());
  Findings f;
  ExpectCommittedPrefix(f, h.engine(), ids, 3, "after the fault cleared");
  h.Close();
  ASSERT_TRUE(h.Open().ok());
  ExpectCommittedPrefix(f, h.engine(), ids, 3, "after reopening");
  EXPECT_TRUE(f.Result());
  absl::StatusOr<Result> dup = Apply(h.engine(), ids[1], 2);
  ASSERT_TRUE(dup.ok()) << dup.status();
  EXPECT_EQ(dup->outcome, Outcome::kDuplicate);
  EXPECT_EQ(dup->result, "result-m2");
}

TEST_P(DurabilityFaultTest, CommitsAreAllOrNothingWhenTheSecondWriteFails) {
  const FaultCase& c = GetParam();
  EngineHarness h(WithDurability(c.durability), kCrashFs);
  EXPECT_TRUE(CheckAtomicWhenSecondWriteFails(h, c.fault));
}

TEST_P(DurabilityFaultTest, SplitCommitIsCaughtHalfApplied) {
  const FaultCase& c = GetParam();
  EngineHooks hooks;
  hooks.split_commit = true;
  EngineHarness h(WithDurability(c.durability), kCrashFs, hooks);
  ::testing::AssertionResult result =
      CheckAtomicWhenSecondWriteFails(h, c.fault);
  EXPECT_FALSE(result);
  EXPECT_THAT(result.message(), HasSubstr("m2 half committed"));
}

INSTANTIATE_TEST_SUITE_P(
    AllModes, DurabilityFaultTest,
    ::testing::Values(FaultCase{Durability::kSync, Fault::kUnavailable},
                      FaultCase{Durability::kSync, Fault::kResourceExhausted},
                      FaultCase{Durability::kBuffered, Fault::kUnavailable},
                      FaultCase{Durability::kBuffered,
                                Fault::kResourceExhausted}),
    [](const ::testing::TestParamInfo<FaultCase>& info) {
      return Name(info.param.durability) + Name(info.param.fault);
    });

// ---- kSync: a failed sync after a successful append ------------------------

// The WAL append of a kSync commit succeeds and its sync fails: the record
// is in the log, and the reopen before the next call may replay it. The
// call must not claim that nothing committed: it returns kUnknown, and a
// retry, once the fault is gone, returns the committed outcome (kDuplicate
// with the first result, its effect applied once) or runs the message.
TEST(DurabilitySyncFaultTest, FailedSyncLeavesTheOutcomeUnknown) {
  EngineHarness h(WithDurability(Durability::kSync), kCrashFs);
  ASSERT_TRUE(h.Open().ok());
  const std::vector<std::string> ids = Ids(2);
  ASSERT_TRUE(Apply(h.engine(), ids[0], 1).ok());

  h.fs().SetFault(Fault::kUnavailable, FaultTarget::kWalSyncs);
  absl::StatusOr<Result> failed = Apply(h.engine(), ids[1], 2);
  ASSERT_FALSE(failed.ok()) << "a commit succeeded although its sync failed";
  EXPECT_EQ(failed.status().code(), absl::StatusCode::kUnknown)
      << failed.status();
  EXPECT_THAT(failed.status().message(), HasSubstr("outcome is unknown"));
  EXPECT_THAT(failed.status().message(), HasSubstr("retrying is safe"));
  h.fs().SetFault(Fault::kOk);

  absl::StatusOr<Result> retried = Apply(h.engine(), ids[1], 2);
  ASSERT_TRUE(retried.ok()) << retried.status();
  // RocksDB replays the appended record on the reopen: the commit was kept.
  EXPECT_EQ(retried->outcome, Outcome::kDuplicate);
  EXPECT_EQ(retried->result, "result-m2");
  absl::StatusOr<int64_t> counter = Counter(h.engine());
  ASSERT_TRUE(counter.ok()) << counter.status();
  EXPECT_EQ(*counter, 2) << "the message's effect applied other than once";
  EXPECT_EQ(*h.engine().CommittedOffset(kSource, 0), 2);
}

// The twin: an append fault leaves nothing in the log; the call says that
// nothing was committed, and the retry runs the message.
TEST(DurabilitySyncFaultTest, FailedAppendCommitsNothingAndSaysSo) {
  EngineHarness h(WithDurability(Durability::kSync), kCrashFs);
  ASSERT_TRUE(h.Open().ok());
  const std::vector<std::string> ids = Ids(2);
  ASSERT_TRUE(Apply(h.engine(), ids[0], 1).ok());

  h.fs().SetFault(Fault::kUnavailable, FaultTarget::kWal);
  absl::StatusOr<Result> failed = Apply(h.engine(), ids[1], 2);
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.status().code(), absl::StatusCode::kUnavailable)
      << failed.status();
  EXPECT_THAT(failed.status().message(), HasSubstr("nothing committed"));
  h.fs().SetFault(Fault::kOk);

  absl::StatusOr<Result> retried = Apply(h.engine(), ids[1], 2);
  ASSERT_TRUE(retried.ok()) << retried.status();
  EXPECT_EQ(retried->outcome, Outcome::kProcessed);
  absl::StatusOr<int64_t> counter = Counter(h.engine());
  ASSERT_TRUE(counter.ok()) << counter.status();
  EXPECT_EQ(*counter, 2);
}

// ---- kBuffered: WaitDurable ------------------------------------------------

class BufferedFaultTest : public ::testing::TestWithParam<Fault> {};

TEST_P(BufferedFaultTest, WaitDurableFailsDuringFaultAndSucceedsAfter) {
  const Fault fault = GetParam();
  EngineHarness h(WithDurability(Durability::kBuffered), kCrashFs);
  ASSERT_TRUE(h.Open().ok());
  const std::vector<std::string> ids = Ids(2);
  absl::StatusOr<Result> first = Apply(h.engine(), ids[0], 1);
  ASSERT_TRUE(first.ok()) << first.status();

  h.fs().SetFault(fault);
  absl::Status wait = h.engine().WaitDurable(first->sequence);
  EXPECT_FALSE(wait.ok());
  EXPECT_EQ(wait.code(), fault) << wait;
  Findings f;
  ExpectCommittedPrefix(f, h.engine(), ids, 1, "after WaitDurable failed");
  wait = h.engine().WaitDurable(first->sequence);
  EXPECT_FALSE(wait.ok()) << "WaitDurable succeeded during the fault";

  h.fs().SetFault(Fault::kOk);
  EXPECT_TRUE(h.engine().WaitDurable(first->sequence).ok());
  ExpectCommittedPrefix(f, h.engine(), ids, 1, "after the fault cleared");
  absl::StatusOr<std::unique_ptr<Engine>> image = h.OpenDurableImage();
  ASSERT_TRUE(image.ok()) << image.status();
  ExpectCommittedPrefix(f, **image, ids, 1, "after a power loss");
  absl::StatusOr<Result> next = Apply(h.engine(), ids[1], 2);
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_TRUE(h.engine().WaitDurable(next->sequence).ok());
  ExpectCommittedPrefix(f, h.engine(), ids, 2, "after the next commit");
  EXPECT_TRUE(f.Result());
}

TEST_P(BufferedFaultTest, ReadsKeepWorkingWhileWaitDurableIsRetried) {
  const Fault fault = GetParam();
  EngineHarness h(WithDurability(Durability::kBuffered), kCrashFs);
  ASSERT_TRUE(h.Open().ok());
  const std::vector<std::string> ids = Ids(2);
  absl::StatusOr<Result> first = Apply(h.engine(), ids[0], 1);
  ASSERT_TRUE(first.ok()) << first.status();
  h.fs().SetFault(fault);
  for (int attempt = 0; attempt < 3; ++attempt) {
    SCOPED_TRACE("attempt " + std::to_string(attempt));
    absl::Status wait = h.engine().WaitDurable(first->sequence);
    EXPECT_FALSE(wait.ok());
    EXPECT_EQ(wait.code(), fault) << wait;
    Findings f;
    ExpectCommittedPrefix(f, h.engine(), ids, 1, "during the fault");
    EXPECT_TRUE(f.Result());
  }
}

INSTANTIATE_TEST_SUITE_P(Faults, BufferedFaultTest,
                         ::testing::Values(Fault::kUnavailable,
                                           Fault::kResourceExhausted),
                         [](const ::testing::TestParamInfo<Fault>& info) {
                           return Name(info.param);
                         });

// ---- Power loss ------------------------------------------------------------

class DurabilityCloseTest : public ::testing::TestWithParam<Durability> {};

TEST_P(DurabilityCloseTest, CommitsSurviveClosingTheEngine) {
  EngineHarness h(WithDurability(GetParam()), kCrashFs);
  EXPECT_TRUE(CheckCloseMakesCommitsDurable(h));
}

INSTANTIATE_TEST_SUITE_P(Modes, DurabilityCloseTest,
                         ::testing::Values(Durability::kBuffered,
                                           Durability::kSync),
                         [](const ::testing::TestParamInfo<Durability>& info) {
                           return Name(info.param);
                         });

TEST(DurabilityTest, WaitDurableAcknowledgesOnlyDurableCommits) {
  EngineHarness h(WithDurability(Durability::kBuffered), kCrashFs);
  EXPECT_TRUE(CheckWaitDurableMeansDurable(h));
}

TEST(DurabilityTest, PowerLossImageLosesUnsyncedBufferedCommits) {
  // The power-loss simulation itself: without WaitDurable or a close, an
  // image taken now lacks the buffered commits (so the checks above are not
  // vacuous).
  EngineHarness h(WithDurability(Durability::kBuffered), kCrashFs);
  ASSERT_TRUE(h.Open().ok());
  const std::vector<std::string> ids = Ids(3);
  for (size_t i = 0; i < ids.size(); ++i) {
    ASSERT_TRUE(Apply(h.engine(), ids[i], static_cast<int64_t>(i + 1)).ok());
  }
  absl::StatusOr<std::unique_ptr<Engine>> image = h.OpenDurableImage();
  ASSERT_TRUE(image.ok()) << image.status();
  Findings f;
  ExpectCommittedPrefix(f, **image, ids, 0, "in an image of unsynced commits");
  EXPECT_TRUE(f.Result());
}

// The same checks catch an engine that never syncs its write-ahead log.
EngineHooks SkipWalSync(Clock*) {
  EngineHooks hooks;
  hooks.skip_wal_sync = true;
  return hooks;
}

class DurabilityBrokenVariantTest
    : public ::testing::TestWithParam<test::BrokenVariant> {};

TEST_P(DurabilityBrokenVariantTest, CheckCatchesIt) {
  test::ExpectCaught(GetParam(), WithDurability(Durability::kBuffered),
                     kCrashFs);
}

INSTANTIATE_TEST_SUITE_P(
    SkippedSync, DurabilityBrokenVariantTest,
    ::testing::Values(
        test::BrokenVariant{
            .name = "SkippedSyncOnCloseLosesBufferedCommits",
            .hooks = SkipWalSync,
            .check = CheckCloseMakesCommitsDurable,
            .failure = "after a power loss following the close"},
        test::BrokenVariant{.name = "WaitDurableWithoutSyncLosesAcknowledged",
                            .hooks = SkipWalSync,
                            .check = CheckWaitDurableMeansDurable,
                            .failure = "following WaitDurable"}),
    test::BrokenVariantName);

// ---- Group commit ----------------------------------------------------------

// `threads` threads each Apply `per_thread` messages (t<thread>-m<i>, at
// offsets numbered across threads) one at a time, with WaitDurable after
// each if `wait`; ids[t] gets thread t's acknowledged IDs. The first error.
absl::Status ApplyFromThreads(Engine& engine, int threads, int per_thread,
                              bool wait,
                              std::vector<std::vector<std::string>>& ids) {
  std::vector<absl::Status> errors(threads);
  std::vector<std::thread> running;
  for (int t = 0; t < threads; ++t) {
    running.emplace_back([&, t] {
      for (int i = 0; i < per_thread; ++i) {
        const std::string id = absl::StrCat("t", t, "-m", i);
        absl::StatusOr<Result> r = Apply(engine, id, t * per_thread + i);
        absl::Status s =
            r.ok() && wait ? engine.WaitDurable(r->sequence) : r.status();
        if (!s.ok()) {
          errors[t] = s;
          return;
        }
        ids[t].push_back(id);
      }
    });
  }
  for (std::thread& thread : running) thread.join();
  for (const absl::Status& s : errors) {
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

// In `image` (after a power loss): every ID of `ids` committed, and the
// counter at `commits`; a lost one is reported as "<id> was <how> but is
// lost".
void ExpectAcknowledgedSurvive(Findings& f, Engine& image,
                               const std::vector<std::vector<std::string>>& ids,
                               int commits, const std::string& how) {
  for (const std::vector<std::string>& acknowledged : ids) {
    for (const std::string& id : acknowledged) {
      absl::StatusOr<Observed> o = Observe(image, id);
      if (!f.Ok(o.status(), "reading " + id)) continue;
      f.Expect(o->seen && o->effect,
               id + " was " + how + " but is lost after a power loss");
    }
  }
  absl::StatusOr<int64_t> counter = Counter(image);
  if (f.Ok(counter.status(), "reading the counter")) {
    f.Expect(*counter == commits, "counter is " + std::to_string(*counter));
  }
}

// Eight threads each commit messages one at a time and wait for each to be
// durable, on a device whose syncs take 2 ms. Every acknowledged message must
// survive a power loss, and the syncs must be shared: the commits made while
// one sync runs (and those in flight when the next is due) are covered by
// one sync, not one each.
TEST(DurabilityTest, WaitDurableFromManyThreadsSharesSyncs) {
  constexpr int kThreads = 8;
  constexpr int kPerThread = 25;
  EngineHarness h(WithDurability(Durability::kBuffered), kCrashFs);
  ASSERT_TRUE(h.Open().ok());
  h.fs().SetWalSyncDelay(absl::Milliseconds(2));
  const int syncs_before = h.fs().wal_syncs();
  std::vector<std::vector<std::string>> ids(kThreads);
  const absl::Status error =
      ApplyFromThreads(h.engine(), kThreads, kPerThread, /*wait=*/true, ids);
  const int syncs = h.fs().wal_syncs() - syncs_before;
  ASSERT_TRUE(error.ok()) << error;

  constexpr int kCommits = kThreads * kPerThread;
  RecordProperty("wal_syncs", syncs);  // in --gtest_output=json
  EXPECT_LE(syncs, kCommits / 3) << syncs << " syncs for " << kCommits
                                 << " commits from " << kThreads << " threads";
  absl::StatusOr<std::unique_ptr<Engine>> image = h.OpenDurableImage();
  ASSERT_TRUE(image.ok()) << image.status();
  Findings f;
  ExpectAcknowledgedSurvive(f, **image, ids, kCommits, "acknowledged");
  EXPECT_TRUE(f.Result());
}

// Eight threads each commit messages one at a time under kSync, on a device
// whose syncs take 2 ms; every handler increments one shared counter. Every
// outcome returned must survive a power loss (a kSync outcome is durable),
// the counter must count every commit (concurrent read-modify-writes lose
// nothing), and the syncs must be shared: concurrent kSync commits queue
// behind the one whose sync runs and are written and synced together (group
// commit), not one sync each.
::testing::AssertionResult CheckSyncCommitsShareSyncsAndSurvivePowerLoss(
    EngineHarness& h) {
  constexpr int kThreads = 8;
  constexpr int kPerThread = 15;
  Findings f;
  if (!f.Ok(h.Open(), "open")) return f.Result();
  h.fs().SetWalSyncDelay(absl::Milliseconds(2));
  const int syncs_before = h.fs().wal_syncs();
  std::vector<std::vector<std::string>> ids(kThreads);
  f.Ok(ApplyFromThreads(h.engine(), kThreads, kPerThread, /*wait=*/false, ids),
       "a kSync commit");
  const int syncs = h.fs().wal_syncs() - syncs_before;
  constexpr int kCommits = kThreads * kPerThread;
  f.Expect(syncs <= kCommits / 2,
           absl::StrCat(syncs, " syncs for ", kCommits, " kSync commits from ",
                        kThreads, " threads"));
  absl::StatusOr<std::unique_ptr<Engine>> image = h.OpenDurableImage();
  if (!f.Ok(image.status(), "opening the power-loss image")) return f.Result();
  ExpectAcknowledgedSurvive(f, **image, ids, kCommits, "returned under kSync");
  return f.Result();
}

TEST(DurabilityTest, SyncCommitsFromManyThreadsShareSyncsAndSurvivePowerLoss) {
  EngineHarness h(WithDurability(Durability::kSync), kCrashFs);
  EXPECT_TRUE(CheckSyncCommitsShareSyncsAndSurvivePowerLoss(h));
}

class SyncDurabilityBrokenVariantTest
    : public ::testing::TestWithParam<test::BrokenVariant> {};

TEST_P(SyncDurabilityBrokenVariantTest, CheckCatchesIt) {
  test::ExpectCaught(GetParam(), WithDurability(Durability::kSync), kCrashFs);
}

INSTANTIATE_TEST_SUITE_P(
    SkippedGroupSync, SyncDurabilityBrokenVariantTest,
    ::testing::Values(test::BrokenVariant{
        .name = "SyncCommitsWrittenWithoutSyncAreLost",
        .hooks = SkipWalSync,
        .check = CheckSyncCommitsShareSyncsAndSurvivePowerLoss,
        .failure = "returned under kSync but is lost"}),
    test::BrokenVariantName);

// ---- Commits lost by the OS while the store was down -----------------------

TEST(DurabilityTest, LostUnsyncedCommitsAreReportedAsDataLoss) {
  EngineHarness h(WithDurability(Durability::kBuffered), kCrashFs);
  EXPECT_TRUE(CheckLostCommitsAreNeverSilent(h, /*retries=*/0));
}

// Regression test for EngineImpl::RecoverIfNeeded: after one failed reopen
// the store pointer is null, so the next recovery takes "issued" as 0 and no
// longer notices that commits it acknowledged are gone.
TEST(DurabilityTest, LostUnsyncedCommitsAreReportedEvenAfterAFailedReopen) {
  EngineHarness h(WithDurability(Durability::kBuffered), kCrashFs);
  EXPECT_TRUE(CheckLostCommitsAreNeverSilent(h, /*retries=*/1));
}

}  // namespace
}  // namespace idem
