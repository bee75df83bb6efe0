// Short crash-test runs: real worker processes are killed or power-failed
// mid-stream and every invariant must hold; deliberately broken engines must
// be reported. Labelled "crash" (ctest -L crash).

#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "crash/event_log.h"
#include "crash/relay.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "idem/crash/harness.h"
#include "util/temp_dir.h"

namespace idem::crash {
namespace {

using ::testing::HasSubstr;

const InvariantResult& Invariant(const CrashTestReport& report,
                                 const std::string& name) {
  for (const InvariantResult& r : report.invariants) {
    if (r.name == name) return r;
  }
  static const InvariantResult* missing = new InvariantResult{"missing"};
  ADD_FAILURE() << "no invariant named " << name;
  return *missing;
}

std::string Failures(const CrashTestReport& report) {
  std::string out;
  for (const InvariantResult& r : report.invariants) {
    if (!r.passed)
      absl::StrAppend(&out, r.name, ": ", r.first_counterexample, "\n");
  }
  return out;
}

CrashTestOptions ShortRun(const util::TempDir& dir, CrashMode mode,
                          Durability durability) {
  CrashTestOptions options;
  options.dir = dir.Sub("run");
  options.cycles = 8;
  options.mode = mode;
  options.durability = durability;
  options.messages = 3000;
  return options;
}

// `invariants`: 10, and 3 more for a workload with a downstream.
void ExpectAllPass(const CrashTestReport& report, size_t invariants = 10) {
  EXPECT_TRUE(report.passed()) << Failures(report);
  EXPECT_EQ(report.invariants.size(), invariants);
  EXPECT_GT(report.acknowledged, 0u);
  EXPECT_GT(report.duplicates_suppressed, 0u);
  // Each epoch ended with a crash-free run that checked completeness.
  EXPECT_GE(report.epochs, 1);
  EXPECT_EQ(Invariant(report, "final_complete").checks,
            static_cast<uint64_t>(report.epochs));
  EXPECT_GE(Invariant(report, "no_lost_ack").checks, 1u);
}

TEST(CrashHarnessTest, LedgerSurvivesKillsUnderSyncDurability) {
  util::TempDir dir;
  auto workload = NewLedgerWorkload();
  absl::StatusOr<CrashTestReport> report = RunCrashTest(
      ShortRun(dir, CrashMode::kKill, Durability::kSync), *workload);
  ASSERT_TRUE(report.ok()) << report.status();
  ExpectAllPass(*report);
  EXPECT_GT(report->kills, 0);
}

TEST(CrashHarnessTest, InventorySurvivesPowerLossUnderBufferedDurability) {
  util::TempDir dir;
  auto workload = NewInventoryWorkload();
  absl::StatusOr<CrashTestReport> report = RunCrashTest(
      ShortRun(dir, CrashMode::kPowerLoss, Durability::kBuffered), *workload);
  ASSERT_TRUE(report.ok()) << report.status();
  ExpectAllPass(*report);
  EXPECT_GT(report->power_losses, 0);
}

TEST(CrashHarnessTest, MixedCrashesWithThreeThreadsKeepEveryInvariant) {
  util::TempDir dir;
  auto workload = NewLedgerWorkload();
  CrashTestOptions options =
      ShortRun(dir, CrashMode::kMixed, Durability::kBuffered);
  options.threads = 3;
  options.cycles = 12;
  options.seed = 7;
  absl::StatusOr<CrashTestReport> report = RunCrashTest(options, *workload);
  ASSERT_TRUE(report.ok()) << report.status();
  ExpectAllPass(*report);
}

TEST(CrashHarnessTest, MixedCrashesWithExpiryBucketsKeepEveryInvariant) {
  util::TempDir dir;
  auto workload = NewLedgerWorkload();
  CrashTestOptions options =
      ShortRun(dir, CrashMode::kMixed, Durability::kBuffered);
  options.expiry_buckets = 4;
  options.cycles = 10;
  options.seed = 11;
  absl::StatusOr<CrashTestReport> report = RunCrashTest(options, *workload);
  ASSERT_TRUE(report.ok()) << report.status();
  ExpectAllPass(*report);
}

// Under partition scope every record is looked up on its message's
// partition; a producer duplicate stays in its original's partition, so it
// is still a duplicate.
TEST(CrashHarnessTest, MixedCrashesWithPartitionScopeKeepEveryInvariant) {
  util::TempDir dir;
  auto workload = NewLedgerWorkload();
  CrashTestOptions options =
      ShortRun(dir, CrashMode::kMixed, Durability::kBuffered);
  options.dedupe_scope = DedupeScope::kPartition;
  options.cycles = 10;
  options.seed = 13;
  absl::StatusOr<CrashTestReport> report = RunCrashTest(options, *workload);
  ASSERT_TRUE(report.ok()) << report.status();
  ExpectAllPass(*report);
  EXPECT_GT(report->duplicates_suppressed, 0u);
}

// With detect_conflicts about half the producer duplicates are conflicting
// redeliveries, and with refresh_on_duplicate every duplicate rewrites its
// record: under crashes every invariant holds, and every conflicting
// redelivery is rejected (conflicts_rejected).
TEST(CrashHarnessTest, ConflictsAndRefreshKeepEveryInvariant) {
  util::TempDir dir;
  auto workload = NewLedgerWorkload();
  CrashTestOptions options =
      ShortRun(dir, CrashMode::kMixed, Durability::kBuffered);
  options.detect_conflicts = true;
  options.refresh_on_duplicate = true;
  options.expiry_buckets = 4;
  options.producer_duplicate_rate = 0.2;
  options.cycles = 10;
  options.seed = 17;
  absl::StatusOr<CrashTestReport> report = RunCrashTest(options, *workload);
  ASSERT_TRUE(report.ok()) << report.status();
  ExpectAllPass(*report, 11);
  EXPECT_GT(report->conflicts_rejected, 0u);
  EXPECT_GE(Invariant(*report, "conflicts_rejected").checks, 1u);
}

// ... and it catches an engine that answers them as duplicates.
TEST(CrashHarnessTest, ReportsConflictingRedeliveriesTakenForDuplicates) {
  util::TempDir dir;
  CrashTestOptions options = ShortRun(dir, CrashMode::kKill, Durability::kSync);
  options.self_test = SelfTest::kIgnoreConflicts;
  options.producer_duplicate_rate = 0.2;
  options.cycles = 2;
  auto workload = NewLedgerWorkload();
  EXPECT_EQ(RunCrashTest(options, *workload).status().code(),
            absl::StatusCode::kInvalidArgument);  // needs detect_conflicts
  options.detect_conflicts = true;
  absl::StatusOr<CrashTestReport> report = RunCrashTest(options, *workload);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_FALSE(report->passed());
  EXPECT_FALSE(Invariant(*report, "conflicts_rejected").passed);
  EXPECT_THAT(Invariant(*report, "conflicts_rejected").first_counterexample,
              HasSubstr("the conflicting redelivery of"));
  EXPECT_EQ(report->conflicts_rejected, 0u);
}

// Transfers between four shared accounts from four threads, killed and
// power-failed: every balance equals the committed transfers, the total
// stays zero, and the handlers ran concurrently enough to conflict.
TEST(CrashHarnessTest, TransfersFromParallelThreadsConserveTheTotal) {
  util::TempDir dir;
  auto workload = NewTransfersWorkload();
  CrashTestOptions options =
      ShortRun(dir, CrashMode::kMixed, Durability::kBuffered);
  options.threads = 4;
  options.seed = 23;
  absl::StatusOr<CrashTestReport> report = RunCrashTest(options, *workload);
  ASSERT_TRUE(report.ok()) << report.status();
  ExpectAllPass(*report);
}

// ... and the same run catches an engine that does not check a handler's
// reads at commit: concurrent read-modify-writes lose updates.
TEST(CrashHarnessTest, ReportsLostUpdatesOfTransfersWithoutReadChecks) {
  util::TempDir dir;
  auto workload = NewTransfersWorkload();
  CrashTestOptions options =
      ShortRun(dir, CrashMode::kMixed, Durability::kBuffered);
  options.threads = 1;
  options.self_test = SelfTest::kLostUpdates;
  EXPECT_EQ(RunCrashTest(options, *workload).status().code(),
            absl::StatusCode::kInvalidArgument);  // needs threads >= 2
  options.threads = 4;
  options.seed = 23;
  absl::StatusOr<CrashTestReport> report = RunCrashTest(options, *workload);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_FALSE(report->passed());
  EXPECT_THAT(Failures(*report), HasSubstr("transfers applied"));
}

// The harness must be able to fail: acknowledging before the WAL is synced
// loses acknowledged messages at a power loss.
TEST(CrashHarnessTest, ReportsLostAcksWhenTheEngineAcksBeforeDurability) {
  util::TempDir dir;
  CrashTestOptions options =
      ShortRun(dir, CrashMode::kPowerLoss, Durability::kBuffered);
  options.self_test = SelfTest::kAckBeforeDurable;
  absl::StatusOr<CrashTestReport> report =
      RunCrashTest(options, *NewLedgerWorkload());
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_FALSE(report->passed());
  EXPECT_FALSE(Invariant(*report, "no_lost_ack").passed);
  EXPECT_THAT(Invariant(*report, "no_lost_ack").first_counterexample,
              HasSubstr("was acknowledged but is absent"));
}

// ... and committing the effect and the dedupe record in separate writes
// applies messages twice after a crash between them.
TEST(CrashHarnessTest, ReportsBrokenAtomicityWhenTheCommitIsSplit) {
  util::TempDir dir;
  CrashTestOptions options =
      ShortRun(dir, CrashMode::kKillPoint, Durability::kSync);
  options.self_test = SelfTest::kSplitCommit;
  options.cycles = 20;
  absl::StatusOr<CrashTestReport> report =
      RunCrashTest(options, *NewLedgerWorkload());
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_FALSE(report->passed());
  EXPECT_FALSE(Invariant(*report, "atomicity").passed) << Failures(*report);
  EXPECT_FALSE(Invariant(*report, "exactly_once_effect").passed);
}

// The pipeline: handlers emit through the outbox, a relay in the worker
// publishes to a downstream store that applies by message ID. No committed
// emit is lost, no message ID carries two contents, and every downstream
// effect happens once, whatever the crash.
void ExpectPipelinePasses(const CrashTestReport& report) {
  ExpectAllPass(report, 13);
  EXPECT_GT(report.published, 0u);
  for (const char* name :
       {"no_lost_emit", "one_content_per_id", "downstream_exactly_once"}) {
    EXPECT_EQ(Invariant(report, name).checks,
              Invariant(report, "no_lost_ack").checks)
        << name;
  }
}

TEST(CrashHarnessTest, PipelineSurvivesMixedCrashesUnderBufferedDurability) {
  util::TempDir dir;
  CrashTestOptions options =
      ShortRun(dir, CrashMode::kMixed, Durability::kBuffered);
  options.threads = 3;
  options.cycles = 12;
  options.seed = 5;
  absl::StatusOr<CrashTestReport> report =
      RunCrashTest(options, *NewPipelineWorkload());
  ASSERT_TRUE(report.ok()) << report.status();
  ExpectPipelinePasses(*report);
  EXPECT_GT(report->kill_points, 0);
}

TEST(CrashHarnessTest, PipelineSurvivesPowerLossUnderSyncDurability) {
  util::TempDir dir;
  absl::StatusOr<CrashTestReport> report =
      RunCrashTest(ShortRun(dir, CrashMode::kPowerLoss, Durability::kSync),
                   *NewPipelineWorkload());
  ASSERT_TRUE(report.ok()) << report.status();
  ExpectPipelinePasses(*report);
  EXPECT_GT(report->power_losses, 0);
}

// Runs the pipeline with a broken outbox (`self_test`) through four kill
// points. With one thread (which relays after each batch) the kill points
// are seeded, so a seed's run is the same every time; whether its kill
// points fall where the fault shows depends on how many file operations
// the engine makes, so the seeds from `seed` on are tried, up to eight,
// until one catches it. Returns the invariant `name` of the first run where
// it failed, which must be in a crash cycle (not only in the final run),
// with `counterexample` in its counterexample; the upstream store's
// invariants must hold in every run.
InvariantResult CaughtInACycle(SelfTest self_test, uint64_t seed,
                               const std::string& name,
                               const std::string& counterexample) {
  constexpr int kSeeds = 8;
  for (uint64_t s = seed; s < seed + kSeeds; ++s) {
    util::TempDir dir;
    CrashTestOptions options =
        ShortRun(dir, CrashMode::kKillPoint, Durability::kSync);
    options.self_test = self_test;
    options.threads = 1;
    options.cycles = 4;
    options.messages = 800;  // the final run of emit_outside_commit is slow
    options.seed = s;
    options.recovery_crash_rate = 0;
    absl::StatusOr<CrashTestReport> report =
        RunCrashTest(options, *NewPipelineWorkload());
    EXPECT_TRUE(report.ok()) << report.status();
    if (!report.ok()) return InvariantResult();
    for (const char* upstream :
         {"no_lost_ack", "atomicity", "exactly_once_effect", "worker_errors"}) {
      EXPECT_TRUE(Invariant(*report, upstream).passed)
          << upstream << ": "
          << Invariant(*report, upstream).first_counterexample;
    }
    const InvariantResult& caught = Invariant(*report, name);
    if (caught.passed) continue;
    EXPECT_THAT(caught.first_counterexample, HasSubstr(counterexample));
    EXPECT_EQ(caught.first_counterexample.rfind("cycle ", 0), 0u)
        << caught.first_counterexample;
    return caught;
  }
  ADD_FAILURE() << name << " held under the broken variant for seeds " << seed
                << " to " << seed + kSeeds - 1;
  return InvariantResult();
}

// A handler that publishes its emits itself, before its message commits,
// gives a downstream effect whose input a crash then takes away (the IDs
// are the outbox's own, so the downstream's dedupe does not help). The
// upstream store is fine: only the outbox invariants see it.
TEST(CrashHarnessTest, ReportsEmitsPublishedOutsideTheCommit) {
  const InvariantResult caught =
      CaughtInACycle(SelfTest::kEmitOutsideCommit, 1, "downstream_exactly_once",
                     "is applied downstream but it is emit ");
  EXPECT_THAT(caught.first_counterexample,
              HasSubstr("which is not committed upstream"));
}

// ... and a relay that acknowledges entries before it publishes them loses
// those a crash catches in between: committed emits that are neither in the
// outbox nor downstream.
TEST(CrashHarnessTest, ReportsLostEmitsWhenTheRelayAcksBeforePublishing) {
  CaughtInACycle(SelfTest::kAckBeforePublish, 7, "no_lost_emit",
                 "was committed but is neither in the outbox nor applied "
                 "downstream");
}

TEST(CrashHarnessTest, OutboxSelfTestsNeedAWorkloadWithADownstream) {
  util::TempDir dir;
  CrashTestOptions options = ShortRun(dir, CrashMode::kKill, Durability::kSync);
  for (SelfTest self_test :
       {SelfTest::kEmitOutsideCommit, SelfTest::kAckBeforePublish}) {
    options.self_test = self_test;
    absl::Status s = RunCrashTest(options, *NewLedgerWorkload()).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(s.message(), HasSubstr("downstream"));
  }
  EXPECT_FALSE(std::filesystem::exists(options.dir));
}

// What the relay publishes is logged with each publication and read back
// byte for byte, whatever the bytes (the event log is tab-separated lines).
TEST(CrashHarnessTest, PublishedContentsSurviveTheEventLog) {
  util::TempDir dir;
  OutboxEntry entry;
  entry.message_id = "0123-0";
  entry.destination = "d\tst";
  entry.key = std::string("k\n:9:\0x", 7);
  entry.value = "12:34 \"v\"";
  entry.headers = {{"h:1", "a\tb"}, {"", ""}};
  const std::string content = EntryContent(entry);
  {
    EventLogWriter log(dir.Sub("log"));
    log.Publish(entry.message_id, content);
  }
  absl::StatusOr<CycleEvents> events = ReadCycleEvents(dir.Sub("log"), 1);
  ASSERT_TRUE(events.ok()) << events.status();
  ASSERT_EQ(events->published.size(), 1u);
  EXPECT_EQ(events->published[0].first, entry.message_id);
  EXPECT_EQ(events->published[0].second, content);
  std::optional<OutboxEntry> parsed =
      ParseEntryContent(entry.message_id, content);
  ASSERT_TRUE(parsed.has_value());
  EXPECT_EQ(parsed->destination, entry.destination);
  EXPECT_EQ(parsed->key, entry.key);
  EXPECT_EQ(parsed->value, entry.value);
  EXPECT_EQ(parsed->headers, entry.headers);
  // Another content never encodes alike.
  OutboxEntry moved = entry;
  moved.destination = "d";
  moved.key = "\tst" + entry.key;
  EXPECT_NE(EntryContent(moved), content);
  EXPECT_FALSE(ParseEntryContent("x", "3:ab").has_value());
}

// A long run is cut into epochs (a fresh store on a new stream each time the
// stream is consumed), each closed by a crash-free completeness check.
// Regression: a run whose worker consumed the stream before its kill used to
// count as a cycle, and the progress reported each epoch's check as the
// final run.
TEST(CrashHarnessTest, ConsumedStreamsStartNewEpochsAndCyclesCountCrashes) {
  util::TempDir dir;
  CrashTestOptions options = ShortRun(dir, CrashMode::kKill, Durability::kSync);
  options.messages = 300;
  options.cycles = 10;
  std::vector<CycleProgress> runs;
  options.progress = [&runs](const CycleProgress& p) { runs.push_back(p); };
  absl::StatusOr<CrashTestReport> report =
      RunCrashTest(options, *NewLedgerWorkload());
  ASSERT_TRUE(report.ok()) << report.status();
  ExpectAllPass(*report);
  EXPECT_GT(report->epochs, 1);
  EXPECT_EQ(report->unique_messages, 300u * report->epochs);
  // Exactly `cycles` crash cycles, each ended by a crash.
  EXPECT_EQ(report->cycles, 10);
  EXPECT_EQ(report->kills, 10);
  EXPECT_EQ(report->kills + report->power_losses + report->kill_points,
            report->cycles);
  // A run that ended without a crash consumed its stream, so it closed its
  // epoch.
  EXPECT_LE(report->cycles_without_crash, report->epochs - 1);

  // Progress: cycles 1..10 in order, each once; every other run says what it
  // was; the final run once, last.
  int next_cycle = 1, no_crash = 0, epoch_ends = 0, final_runs = 0;
  for (const CycleProgress& p : runs) {
    EXPECT_EQ(p.cycles, 10);
    switch (p.kind) {
      case CycleProgress::Kind::kCrashCycle:
        EXPECT_EQ(p.cycle, next_cycle++);
        EXPECT_EQ(p.crash, "kill");
        break;
      case CycleProgress::Kind::kNoCrash:
        EXPECT_EQ(p.cycle, next_cycle);
        ++no_crash;
        break;
      case CycleProgress::Kind::kEpochEnd:
        EXPECT_EQ(p.epoch, ++epoch_ends);
        break;
      case CycleProgress::Kind::kFinalRun:
        ++final_runs;
        EXPECT_EQ(p.cycle, 10);
        EXPECT_EQ(p.epoch, report->epochs);
        break;
    }
    EXPECT_THAT(p.summary, HasSubstr("delivered"));
  }
  EXPECT_EQ(next_cycle, 11);
  EXPECT_EQ(no_crash, report->cycles_without_crash);
  EXPECT_EQ(epoch_ends, report->epochs - 1);
  EXPECT_EQ(final_runs, 1);
  ASSERT_FALSE(runs.empty());
  EXPECT_EQ(runs.back().kind, CycleProgress::Kind::kFinalRun);
  // The JSON report agrees.
  const std::string json = CrashTestReportToJson(*report);
  EXPECT_THAT(json, HasSubstr("\"cycles\":10,"));
  EXPECT_THAT(json, HasSubstr("\"kill\":10,"));
}

// A user workload plugs in the same way; a verifier that disagrees with the
// state is reported under exactly_once_effect.
class CounterWorkload : public Workload {
 public:
  explicit CounterWorkload(bool wrong_verifier) : wrong_(wrong_verifier) {}
  std::string name() const override { return "counter"; }
  std::vector<StreamMessage> Generate(uint64_t seed,
                                      size_t count) const override {
    std::vector<StreamMessage> m(count);
    for (size_t i = 0; i < count; ++i) {
      m[i].id = absl::StrCat("c-", seed, "-", i);
      m[i].payload = "1";
    }
    return m;
  }
  absl::Status Handle(const Message& message, Txn& txn) const override {
    auto v = txn.Get("count");
    if (!v.ok()) return v.status();
    int64_t n = 0;
    if (v->has_value() && !absl::SimpleAtoi(**v, &n)) {
      return absl::DataLossError("count");
    }
    txn.Put("count", absl::StrCat(n + 1));
    txn.Put(absl::StrCat("seen/", std::string(message.id)), "");
    return absl::OkStatus();
  }
  absl::StatusOr<bool> EffectPresent(Engine& engine,
                                     const StreamMessage& m) const override {
    auto v = engine.GetState(absl::StrCat("seen/", m.id));
    if (!v.ok()) return v.status();
    return v->has_value();
  }
  absl::Status Verify(Engine& engine,
                      absl::Span<const StreamMessage> applied) const override {
    auto v = engine.GetState("count");
    if (!v.ok()) return v.status();
    int64_t n = 0;
    if (v->has_value() && !absl::SimpleAtoi(**v, &n)) {
      return absl::DataLossError("count");
    }
    const int64_t want =
        static_cast<int64_t>(applied.size()) + (wrong_ ? 1 : 0);
    if (n != want) {
      return absl::DataLossError(absl::StrCat("count ", n, " != ", want));
    }
    return absl::OkStatus();
  }

 private:
  const bool wrong_;
};

TEST(CrashHarnessTest, RunsAUserWorkload) {
  util::TempDir dir;
  CounterWorkload workload(/*wrong_verifier=*/false);
  absl::StatusOr<CrashTestReport> report = RunCrashTest(
      ShortRun(dir, CrashMode::kKill, Durability::kBuffered), workload);
  ASSERT_TRUE(report.ok()) << report.status();
  ExpectAllPass(*report);
}

TEST(CrashHarnessTest, ReportsAUserVerifierThatDisagreesWithTheState) {
  util::TempDir dir;
  CounterWorkload workload(/*wrong_verifier=*/true);
  CrashTestOptions options = ShortRun(dir, CrashMode::kKill, Durability::kSync);
  options.cycles = 2;
  absl::StatusOr<CrashTestReport> report = RunCrashTest(options, workload);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_FALSE(Invariant(*report, "exactly_once_effect").passed);
}

TEST(CrashHarnessTest, RejectsBadOptions) {
  util::TempDir dir;
  auto workload = NewLedgerWorkload();
  CrashTestOptions options;
  EXPECT_EQ(RunCrashTest(options, *workload).status().code(),
            absl::StatusCode::kInvalidArgument);  // no dir
  options.dir = dir.Sub("x");
  options.threads = 0;
  EXPECT_EQ(RunCrashTest(options, *workload).status().code(),
            absl::StatusCode::kInvalidArgument);
  options.threads = 1;
  options.producer_duplicate_rate = 1.5;
  EXPECT_EQ(RunCrashTest(options, *workload).status().code(),
            absl::StatusCode::kInvalidArgument);
  options.producer_duplicate_rate = 0;
  // Upper bounds too, naming the field (idem-crashtest's flag).
  options.threads = 100000;
  absl::Status s = RunCrashTest(options, *workload).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "threads must be in [1, 256], got 100000");
  options.threads = 1;
  options.messages = 100000000000;
  s = RunCrashTest(options, *workload).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("messages must be in [0, "));
  options.messages = 0;
  options.max_batch = 1000000;
  s = RunCrashTest(options, *workload).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("max_batch"));
  options.max_batch = 1;
  options.cycles = 1000001;
  EXPECT_EQ(ValidateCrashTestOptions(options).code(),
            absl::StatusCode::kInvalidArgument);
  options.cycles = 1;
  options.recovery_crash_rate = -0.5;
  EXPECT_THAT(ValidateCrashTestOptions(options).message(),
              HasSubstr("recovery_crash_rate"));
  options.recovery_crash_rate = 0;
  EXPECT_TRUE(ValidateCrashTestOptions(options).ok());
  // Nothing was run: the directory was not even created.
  EXPECT_FALSE(std::filesystem::exists(options.dir));
  EXPECT_EQ(NewBuiltinWorkload("nope").status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(CrashHarnessTest, RefusesADirectoryItDidNotCreate) {
  util::TempDir dir;
  std::ofstream(dir.Sub("precious.txt")) << "user data";
  CrashTestOptions options;
  options.dir = dir.path();
  options.cycles = 1;
  EXPECT_EQ(RunCrashTest(options, *NewLedgerWorkload()).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(std::filesystem::exists(dir.Sub("precious.txt")));
}

TEST(CrashHarnessTest, ReportIsJson) {
  CrashTestReport report;
  report.seed = 3;
  InvariantResult failed;
  failed.name = "no_lost_ack";
  failed.passed = false;
  failed.first_counterexample = "id \"x\"\tlost";
  report.invariants.push_back(failed);
  const std::string json = CrashTestReportToJson(report);
  EXPECT_THAT(json, HasSubstr("\"seed\":3"));
  EXPECT_THAT(json, HasSubstr("\"passed\":false"));
  EXPECT_THAT(json, HasSubstr("\"counterexample\":\"id \\\"x\\\"\\tlost\""));
}

}  // namespace
}  // namespace idem::crash
