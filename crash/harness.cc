// RunCrashTest: the cycle loop of the crash-recovery harness (fork a worker,
// crash it, simulate power loss, crash the recovery, verify).

#include "idem/crash/harness.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "crash/event_log.h"
#include "crash/outbox_verifier.h"
#include "crash/stream.h"
#include "crash/verifier.h"
#include "crash/worker.h"
#include "engine/latency_histogram.h"
#include "idem/crash/file_system.h"
#include "util/json_writer.h"

namespace idem::crash {
namespace {

using util::JsonWriter;

namespace fs = std::filesystem;

constexpr char kMarkerFile[] = ".idem-crashtest";

// Unique messages per epoch unless CrashTestOptions::messages says otherwise:
// large enough for dozens of cycles, small enough that checking every
// message after every cycle stays cheap.
constexpr size_t kDefaultEpochMessages = 20000;

enum class CycleCrash { kKill, kPowerLoss, kKillPoint };

// A worker run: one that is crashed (a crash cycle, if the crash comes before
// the worker is done), the crash-free check that closes an epoch, or the
// final run.
enum class RunKind { kCrash, kEpochEnd, kFinal };

// One worker run, as Run::RunOnce plans it.
struct RunPlan {
  RunKind kind = RunKind::kCrash;
  bool final = false;  // crash-free, to the end of the stream (not kCrash)
  CycleCrash crash = CycleCrash::kKill;  // kKill when final
  bool power_loss = false;  // unsynced writes are dropped after the crash
  std::string log_path;
};

// How a worker run ended.
struct RunEnd {
  int status = 0;        // the worker's wait status
  bool crashed = false;  // by the run's crash (never when final)
  bool torn = false;     // a power loss that keeps part of the unsynced writes
};

// Worker runs in a row that may end without a crash before RunCrashTest
// gives up: the stream is too short for the crash to land in it.
constexpr int kMaxRunsWithoutCrash = 100;

// How counterexamples name a run.
std::string RunLabel(const CycleProgress& p) {
  switch (p.kind) {
    case CycleProgress::Kind::kCrashCycle:
      return absl::StrCat("cycle ", p.cycle);
    case CycleProgress::Kind::kNoCrash:
      return absl::StrCat("cycle ", p.cycle, " (run without a crash)");
    case CycleProgress::Kind::kEpochEnd:
      return absl::StrCat("end of epoch ", p.epoch);
    case CycleProgress::Kind::kFinalRun:
      return "final run";
  }
  return "";
}

// Forking a process with other threads (e.g. RocksDB's) is unsafe.
absl::Status CheckSingleThreaded() {
  std::error_code ec;
  size_t threads = 0;
  for (auto it = fs::directory_iterator("/proc/self/task", ec);
       !ec && it != fs::directory_iterator(); it.increment(ec)) {
    ++threads;
  }
  if (!ec && threads > 1) {
    return absl::FailedPreconditionError(absl::StrCat(
        "RunCrashTest must be called from a single-threaded process (this one "
        "has ",
        threads,
        " threads): it forks workers, and forking a process "
        "with RocksDB or other threads is unsafe"));
  }
  return absl::OkStatus();
}

// Creates `dir`, or clears the store and logs of an earlier run in it.
absl::Status PrepareDir(const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) {
    return absl::UnavailableError(
        absl::StrCat("creating ", dir, ": ", ec.message()));
  }
  const bool ours = fs::exists(fs::path(dir) / kMarkerFile);
  bool empty = true;
  for (auto it = fs::directory_iterator(dir, ec);
       !ec && it != fs::directory_iterator(); it.increment(ec)) {
    empty = false;
  }
  if (!empty && !ours) {
    return absl::FailedPreconditionError(
        absl::StrCat(dir,
                     " is not empty and was not made by the crash harness; "
                     "use an empty or new directory"));
  }
  for (auto it = fs::directory_iterator(dir, ec);
       !ec && it != fs::directory_iterator(); it.increment(ec)) {
    fs::remove_all(it->path(), ec);
  }
  std::ofstream(fs::path(dir) / kMarkerFile) << "idem crash-test scratch\n";
  return absl::OkStatus();
}

int WaitFor(pid_t pid) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return status;
}

// Waits up to `timeout` for `pid`; SIGKILLs it if still running.
int WaitOrKill(pid_t pid, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  int status = 0;
  while (absl::Now() < deadline) {
    const pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid) return status;
    absl::SleepFor(absl::Milliseconds(1));
  }
  ::kill(pid, SIGKILL);
  return WaitFor(pid);
}

bool KilledBySigkill(int status) {
  return WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL;
}

class Run {
 public:
  Run(const CrashTestOptions& options, const Workload& workload)
      : options_(options),
        workload_(workload),
        store_((fs::path(options.dir) / "store").string()),
        downstream_(workload.downstream() != nullptr
                        ? (fs::path(options.dir) / "downstream").string()
                        : ""),
        journal_((fs::path(options.dir) / "fs-journal").string()),
        messages_per_epoch_(
            options_.messages != 0
                ? options_.messages
                : std::min<size_t>(
                      kDefaultEpochMessages,
                      500 * static_cast<size_t>(std::max(options_.cycles, 1)))),
        rng_(options.seed) {
    report_.seed = options_.seed;
    report_.shards = options_.shards;
    names_.assign(std::begin(kInvariantNames), std::end(kInvariantNames));
    if (!downstream_.empty()) {
      names_.insert(names_.end(), std::begin(kOutboxInvariantNames),
                    std::end(kOutboxInvariantNames));
    }
    if (options_.detect_conflicts) {
      names_.insert(names_.end(), std::begin(kConflictInvariantNames),
                    std::end(kConflictInvariantNames));
    }
    for (const char* name : names_) {
      InvariantResult r;
      r.name = name;
      invariants_[name] = r;
    }
  }

  absl::StatusOr<CrashTestReport> Execute() {
    if (absl::Status s = StartEpoch(); !s.ok()) return s;
    int runs_without_crash = 0;
    while (report_.cycles < options_.cycles) {
      // The stream is consumed: close the epoch with its crash-free
      // completeness check and start a fresh store on a new stream, so that
      // every check stays complete and a cycle's cost does not grow with the
      // run.
      if (StreamConsumed()) {
        if (absl::Status s = RunOnce(RunKind::kEpochEnd).status(); !s.ok()) {
          return s;
        }
        if (absl::Status s = StartEpoch(); !s.ok()) return s;
      }
      absl::StatusOr<bool> crashed = RunOnce(RunKind::kCrash);
      if (!crashed.ok()) return crashed.status();
      if (*crashed) {
        ++report_.cycles;
        runs_without_crash = 0;
        continue;
      }
      // The worker stopped before the crash came. If it consumed its stream,
      // the next attempt runs on a new epoch; if not, it failed on its own
      // (reported under worker_errors) and would fail again: stop here.
      if (!StreamConsumed()) break;
      if (++runs_without_crash >= kMaxRunsWithoutCrash) {
        return absl::FailedPreconditionError(absl::StrCat(
            kMaxRunsWithoutCrash,
            " worker runs in a row consumed their whole stream before the "
            "crash came; raise messages (now ",
            messages_per_epoch_, ")"));
      }
    }
    if (absl::Status s = RunOnce(RunKind::kFinal).status(); !s.ok()) return s;
    if (open_times_.count() > 0) {
      const LatencySummary open = open_times_.Summary();
      report_.open_p50 = absl::Microseconds(open.p50);
      report_.open_max = absl::Microseconds(open.max);
    }
    for (const char* name : names_) {
      report_.invariants.push_back(invariants_[name]);
    }
    return report_;
  }

 private:
  // Builds the next epoch's stream and removes the previous epoch's stores.
  absl::Status StartEpoch() {
    const uint64_t seed =
        options_.seed + 1000003 * static_cast<uint64_t>(report_.epochs);
    std::error_code ec;
    for (const std::string& store : {store_, downstream_}) {
      if (!ec && !store.empty()) fs::remove_all(store, ec);
      if (!ec && !store.empty()) fs::remove_all(store + ".idem-creating", ec);
    }
    if (!ec) fs::resize_file(journal_, 0, ec);
    if (ec && ec != std::errc::no_such_file_or_directory) {
      return absl::UnavailableError(
          absl::StrCat("clearing the previous epoch: ", ec.message()));
    }
    stream_ = BuildStream(workload_.Generate(seed, messages_per_epoch_),
                          options_.partitions, options_.producer_duplicate_rate,
                          seed, options_.detect_conflicts);
    acked_offsets_.assign(options_.partitions, -1);
    delivered_.clear();
    acked_.clear();
    in_flight_.clear();
    published_.clear();
    ++report_.epochs;
    report_.unique_messages += stream_.messages.size();
    report_.stream_entries += stream_.entries();
    return absl::OkStatus();
  }

  // Whether every partition has been acknowledged to its end.
  bool StreamConsumed() const {
    for (size_t p = 0; p < stream_.partitions.size(); ++p) {
      if (acked_offsets_[p] + 1 <
          static_cast<int64_t>(stream_.partitions[p].size())) {
        return false;
      }
    }
    return true;
  }

  CycleCrash PickCrash() {
    switch (options_.mode) {
      case CrashMode::kKill:
        return CycleCrash::kKill;
      case CrashMode::kPowerLoss:
        return CycleCrash::kPowerLoss;
      case CrashMode::kKillPoint:
        return CycleCrash::kKillPoint;
      case CrashMode::kMixed:
        break;
    }
    return static_cast<CycleCrash>(rng_() % 3);
  }

  // A seeded kill point: the Nth append, sync or rename.
  void ArmKillPoint(CrashFsOptions* fs_options) {
    const uint64_t r = rng_() % 100;
    if (r < 60) {
      fs_options->kill_op = FsOp::kAppend;
      fs_options->kill_at = 1 + rng_() % 150;
    } else if (r < 95) {
      fs_options->kill_op = FsOp::kSync;
      fs_options->kill_at = 1 + rng_() % 40;
    } else {
      fs_options->kill_op = FsOp::kRename;
      fs_options->kill_at = 1 + rng_() % 3;
    }
  }

  absl::Duration RandomDelay(absl::Duration max) {
    const int64_t us = absl::ToInt64Microseconds(max);
    return absl::Microseconds(us <= 0 ? 0 : static_cast<int64_t>(rng_() % us));
  }

  // Drops unsynced data (power loss) or just forgets the journal (the OS
  // kept everything: a process kill).
  absl::Status AfterCrash(bool power_loss, bool torn) {
    if (!power_loss) {
      std::error_code ec;
      fs::resize_file(journal_, 0, ec);  // absent journal is fine
      return absl::OkStatus();
    }
    absl::StatusOr<PowerLossReport> cut =
        ApplyPowerLoss(journal_, torn ? (rng_() | 1) : 0);
    if (!cut.ok()) return cut.status();
    report_.unsynced_bytes_dropped += cut->bytes_dropped;
    return absl::OkStatus();
  }

  void Record(const std::string& label, const VerifyOutput& out) {
    for (const std::string& name : out.evaluated) ++invariants_[name].checks;
    for (const InvariantResult& v : out.violations) {
      RecordViolation(v.name, label, v.first_counterexample);
    }
  }

  // Keeps the first counterexample of invariant `name`.
  void RecordViolation(const std::string& name, const std::string& label,
                       const std::string& counterexample) {
    InvariantResult& r = invariants_[name];
    if (r.passed) {
      r.passed = false;
      r.first_counterexample = absl::StrCat(label, ": ", counterexample);
    }
  }

  // Each worker run's event log has its own file: cycle-N.log for the first
  // attempt at crash cycle N (cycle-N-attempt-K.log for a later one, after
  // runs that ended without a crash), epoch-E-end.log, final.log.
  std::string LogPath(RunKind kind) {
    std::string name;
    switch (kind) {
      case RunKind::kCrash:
        name = attempt_ == 1 ? absl::StrCat("cycle-", report_.cycles + 1)
                             : absl::StrCat("cycle-", report_.cycles + 1,
                                            "-attempt-", attempt_);
        break;
      case RunKind::kEpochEnd:
        name = absl::StrCat("epoch-", report_.epochs, "-end");
        break;
      case RunKind::kFinal:
        name = "final";
        break;
    }
    return (fs::path(options_.dir) / absl::StrCat(name, ".log")).string();
  }

  // Runs one worker: for kCrash, crashes it as `mode` says, and returns
  // whether it crashed (false: it stopped before the crash came); the other
  // kinds run crash-free to the end of the stream and return false. Then
  // crashes the recovery now and then, verifies, and reports progress.
  absl::StatusOr<bool> RunOnce(RunKind kind) {
    const RunPlan plan = PlanRun(kind);
    absl::StatusOr<int> status = RunWorkerProcess(plan);
    if (!status.ok()) return status.status();
    const RunEnd end = CountRunEnd(plan, *status);
    if (absl::Status s = AfterCrash(plan.power_loss, end.torn); !s.ok()) {
      return s;
    }
    CycleProgress progress = ProgressOf(plan, end);
    const std::string label = RunLabel(progress);

    absl::StatusOr<CycleEvents> events =
        ReadCycleEvents(plan.log_path, options_.partitions);
    if (!events.ok()) return events.status();
    AddEvents(*events);
    CheckEvents(*events, end, label);

    if (absl::Status s = MaybeCrashRecovery(plan, end); !s.ok()) return s;
    absl::StatusOr<VerifyOutput> out = Verify(plan, *events);
    if (!out.ok()) return out.status();
    Record(label, *out);
    ReportProgress(std::move(progress), *events, *out);
    return end.crashed;
  }

  // The run's crash kind and log file; counts the run.
  RunPlan PlanRun(RunKind kind) {
    RunPlan plan;
    plan.kind = kind;
    plan.final = kind != RunKind::kCrash;
    plan.crash = plan.final ? CycleCrash::kKill : PickCrash();
    plan.power_loss = plan.crash != CycleCrash::kKill;
    if (kind == RunKind::kCrash) {
      ++attempt_;
    }
    plan.log_path = LogPath(kind);
    ++runs_;
    return plan;
  }

  // What every process that opens the stores needs: their paths, the
  // engine's options, the journal.
  WorkerConfig StoreConfig() const {
    WorkerConfig config;
    config.store_path = store_;
    config.downstream_path = downstream_;
    config.durability = options_.durability;
    config.expiry_buckets = options_.expiry_buckets;
    config.dedupe_scope = options_.dedupe_scope;
    config.detect_conflicts = options_.detect_conflicts;
    config.refresh_on_duplicate = options_.refresh_on_duplicate;
    config.shards = options_.shards;
    config.crash_fs.journal_path = journal_;
    return config;
  }

  // The worker of run `plan`: it starts at the acknowledged offsets, and a
  // kill-point run arms its kill point.
  WorkerConfig WorkerConfigFor(const RunPlan& plan) {
    WorkerConfig config = StoreConfig();
    config.log_path = plan.log_path;
    config.self_test = options_.self_test;
    config.threads = options_.threads;
    config.max_batch = options_.max_batch;
    config.concurrent_duplicate_rate = options_.concurrent_duplicate_rate;
    config.seed = options_.seed * 1000003 + static_cast<uint64_t>(runs_);
    for (int p = 0; p < options_.partitions; ++p) {
      config.start_offsets.push_back(acked_offsets_[p] + 1);
    }
    if (plan.crash == CycleCrash::kKillPoint) ArmKillPoint(&config.crash_fs);
    return config;
  }

  // Forks the worker and returns its wait status once it has ended, on its
  // own or by the crash.
  absl::StatusOr<int> RunWorkerProcess(const RunPlan& plan) {
    WorkerConfig config = WorkerConfigFor(plan);
    int ready[2];
    if (::pipe(ready) != 0) {
      return absl::UnavailableError(
          absl::StrCat("pipe: ", std::strerror(errno)));
    }
    config.ready_fd = ready[1];
    const pid_t pid = ::fork();
    if (pid < 0) {
      return absl::UnavailableError(
          absl::StrCat("fork: ", std::strerror(errno)));
    }
    if (pid == 0) {
      ::close(ready[0]);
      RunWorker(config, stream_, workload_);
    }
    ::close(ready[1]);
    const int status = WaitOrCrash(plan, pid, ready[0]);
    ::close(ready[0]);
    return status;
  }

  // Waits for worker `pid`: a crash-free or kill-point run until it ends
  // (SIGKILLed if it hangs), the others until a SIGKILL at a random time.
  // `ready_fd` reads the byte the worker writes once its store is open.
  int WaitOrCrash(const RunPlan& plan, pid_t pid, int ready_fd) {
    if (plan.final || plan.crash == CycleCrash::kKillPoint) {
      return WaitOrKill(pid,
                        plan.final ? absl::Minutes(30) : absl::Seconds(60));
    }
    // One timed kill in five may land in Open (recovery); the others are
    // timed from when the worker starts consuming.
    if (rng_() % 5 != 0) {
      char byte;
      while (::read(ready_fd, &byte, 1) < 0 && errno == EINTR) {
      }
    }
    absl::SleepFor(RandomDelay(options_.max_kill_delay));
    ::kill(pid, SIGKILL);
    return WaitFor(pid);
  }

  // How the run ended, counted in the report: a crash by its kind, or a
  // crash cycle's run that stopped before the crash came.
  RunEnd CountRunEnd(const RunPlan& plan, int status) {
    RunEnd end;
    end.status = status;
    // A crash-free run killed by the timeout did not crash on purpose: it is
    // reported as a worker that died (CheckWorkerErrors), not counted as a
    // crash.
    end.crashed = !plan.final && KilledBySigkill(status);
    end.torn = plan.crash == CycleCrash::kPowerLoss && (rng_() % 2 == 1);
    if (end.crashed) {
      switch (plan.crash) {
        case CycleCrash::kKill:
          ++report_.kills;
          break;
        case CycleCrash::kPowerLoss:
          ++report_.power_losses;
          break;
        case CycleCrash::kKillPoint:
          ++report_.kill_points;
          break;
      }
      if (end.torn) ++report_.torn_writes;
      attempt_ = 0;  // the next crash cycle starts at its first attempt
    } else if (!plan.final) {
      ++report_.cycles_without_crash;
    }
    return end;
  }

  // The run's progress report, without its summary.
  CycleProgress ProgressOf(const RunPlan& plan, const RunEnd& end) const {
    CycleProgress progress;
    progress.kind =
        plan.kind == RunKind::kFinal      ? CycleProgress::Kind::kFinalRun
        : plan.kind == RunKind::kEpochEnd ? CycleProgress::Kind::kEpochEnd
        : end.crashed                     ? CycleProgress::Kind::kCrashCycle
                                          : CycleProgress::Kind::kNoCrash;
    progress.cycle = report_.cycles + (plan.kind == RunKind::kCrash ? 1 : 0);
    progress.cycles = options_.cycles;
    progress.epoch = report_.epochs;
    if (progress.kind == CycleProgress::Kind::kCrashCycle) {
      progress.crash = plan.crash == CycleCrash::kKill ? "kill"
                       : plan.crash == CycleCrash::kPowerLoss
                           ? (end.torn ? "power loss (torn)" : "power loss")
                           : "kill point";
    }
    return progress;
  }

  // Adds what the run's event log says was delivered, acknowledged and
  // published to the epoch's sets and to the report's counts.
  void AddEvents(const CycleEvents& events) {
    for (const std::string& id : events.invoked) {
      delivered_.insert(id);
      if (!events.acked.contains(id)) in_flight_.insert(id);
    }
    for (const std::string& id : events.acked) acked_.insert(id);
    for (int p = 0; p < options_.partitions; ++p) {
      acked_offsets_[p] = std::max(acked_offsets_[p], events.acked_offsets[p]);
    }
    report_.deliveries += events.deliveries;
    report_.acknowledged += events.acked_deliveries;
    report_.duplicates_suppressed += events.duplicates;
    report_.conflicts_rejected += events.conflicts;
    report_.published += events.published.size();
  }

  // The invariants the event log shows by itself: conflicts_rejected,
  // one_content_per_id over the epoch's publications, and worker_errors.
  void CheckEvents(const CycleEvents& events, const RunEnd& end,
                   const std::string& label) {
    if (options_.detect_conflicts) {
      ++invariants_["conflicts_rejected"].checks;
      if (!events.unrejected_conflicts.empty()) {
        RecordViolation("conflicts_rejected", label,
                        absl::StrCat("the conflicting redelivery of ",
                                     events.unrejected_conflicts.front()));
      }
    }
    if (!downstream_.empty()) {
      // One message ID published with two contents, over the epoch's runs.
      const std::string conflict = AddPublished(events.published, published_);
      if (!conflict.empty()) {
        RecordViolation("one_content_per_id", label, conflict);
      }
    }
    CheckWorkerErrors(events, end, label);
  }

  // A worker error in the log, or a worker that neither crashed nor
  // finished.
  void CheckWorkerErrors(const CycleEvents& events, const RunEnd& end,
                         const std::string& label) {
    ++invariants_["worker_errors"].checks;
    if (!events.errors.empty()) {
      RecordViolation("worker_errors", label, events.errors.front());
    }
    if (!end.crashed && !events.done && events.errors.empty()) {
      const int status = end.status;
      RecordViolation("worker_errors", label,
                      absl::StrCat("the worker died unexpectedly (",
                                   WIFSIGNALED(status) ? "signal " : "exit ",
                                   WIFSIGNALED(status) ? WTERMSIG(status)
                                                       : WEXITSTATUS(status),
                                   ")"));
    }
  }

  // Crashes the recovery too, now and then (recovery_crash_rate of the
  // crash cycles).
  absl::Status MaybeCrashRecovery(const RunPlan& plan, const RunEnd& end) {
    std::uniform_real_distribution<double> unit(0.0, 1.0);
    if (!plan.final && end.crashed &&
        unit(rng_) < options_.recovery_crash_rate) {
      return CrashRecovery(plan);
    }
    return absl::OkStatus();
  }

  // Forks a recovery (Open of the stores) and crashes it as the worker was:
  // at a kill point, or by a SIGKILL within 40 ms.
  absl::Status CrashRecovery(const RunPlan& plan) {
    WorkerConfig recovery = StoreConfig();
    if (plan.crash == CycleCrash::kKillPoint) ArmKillPoint(&recovery.crash_fs);
    const pid_t rpid = ::fork();
    if (rpid < 0) {
      return absl::UnavailableError(
          absl::StrCat("fork: ", std::strerror(errno)));
    }
    if (rpid == 0) {
      RunRecovery(recovery);
    }
    if (plan.crash != CycleCrash::kKillPoint) {
      absl::SleepFor(RandomDelay(absl::Milliseconds(40)));
      ::kill(rpid, SIGKILL);
    }
    const int rstatus = WaitOrKill(rpid, absl::Seconds(60));
    if (KilledBySigkill(rstatus)) ++report_.recovery_crashes;
    return AfterCrash(plan.power_loss, false);
  }

  // Checks the store's invariants in a child process; notes the time its
  // Open (recovery) took.
  absl::StatusOr<VerifyOutput> Verify(const RunPlan& plan,
                                      const CycleEvents& events) {
    VerifyInput input;
    input.stream = &stream_;
    input.dedupe_scope = options_.dedupe_scope;
    input.shards = options_.shards;
    input.workload = &workload_;
    input.delivered = &delivered_;
    input.acked = &acked_;
    input.in_flight = &in_flight_;
    input.commits = &events.commits;
    input.final_check = plan.final;
    input.downstream_path = downstream_;
    input.published = &published_;
    absl::StatusOr<VerifyOutput> out = VerifyStoreInChild(store_, input);
    if (out.ok() && out->opened) {
      open_times_.Add(absl::ToDoubleMicroseconds(out->open_time));
    }
    return out;
  }

  // Calls options_.progress, if set, with the run's summary.
  void ReportProgress(CycleProgress progress, const CycleEvents& events,
                      const VerifyOutput& out) {
    if (!options_.progress) return;
    progress.summary = absl::StrFormat(
        "%d delivered, %d acked, %d duplicates; open %s; %s", events.deliveries,
        events.acked_deliveries, events.duplicates,
        out.opened
            ? absl::StrCat(absl::ToInt64Milliseconds(out.open_time), "ms")
            : "no store yet",
        out.violations.empty()
            ? "ok"
            : absl::StrCat(out.violations.size(), " VIOLATION(S)"));
    options_.progress(progress);
  }

  const CrashTestOptions& options_;
  const Workload& workload_;
  const std::string store_;
  const std::string downstream_;  // empty without a Downstream
  const std::string journal_;
  const size_t messages_per_epoch_;
  std::mt19937_64 rng_;
  Stream stream_;
  std::vector<int64_t> acked_offsets_;
  absl::flat_hash_set<std::string> delivered_;
  absl::flat_hash_set<std::string> acked_;
  absl::flat_hash_set<std::string> in_flight_;
  PublishedContents published_;     // over the epoch's runs
  LatencyHistogram open_times_;     // microseconds
  std::vector<const char*> names_;  // the invariants, in report order
  std::map<std::string, InvariantResult> invariants_;
  CrashTestReport report_;
  int runs_ = 0;     // worker runs so far, of every kind
  int attempt_ = 0;  // runs so far at the next crash cycle
};

}  // namespace

bool CrashTestReport::passed() const {
  for (const InvariantResult& r : invariants) {
    if (!r.passed) return false;
  }
  return true;
}

absl::StatusOr<CrashTestReport> RunCrashTest(const CrashTestOptions& options,
                                             const Workload& workload) {
  if (absl::Status s = ValidateCrashTestOptions(options, workload); !s.ok()) {
    return s;
  }
  if (absl::Status s = CheckSingleThreaded(); !s.ok()) return s;
  if (absl::Status s = PrepareDir(options.dir); !s.ok()) return s;
  Run run(options, workload);
  return run.Execute();
}

std::string CrashTestReportToJson(const CrashTestReport& r) {
  JsonWriter j;
  j.BeginObject();
  j.Field("seed", r.seed);
  j.Field("shards", r.shards);
  j.Field("passed", r.passed());
  j.Field("cycles", r.cycles);
  j.Field("epochs", r.epochs);
  j.Key("crashes");
  j.BeginObject();
  j.Field("kill", r.kills);
  j.Field("power_loss", r.power_losses);
  j.Field("torn_write", r.torn_writes);
  j.Field("kill_point", r.kill_points);
  j.Field("recovery", r.recovery_crashes);
  j.Field("none", r.cycles_without_crash);
  j.EndObject();
  j.Key("messages");
  j.BeginObject();
  j.Field("unique", r.unique_messages);
  j.Field("stream_entries", r.stream_entries);
  j.Field("delivered", r.deliveries);
  j.Field("acknowledged", r.acknowledged);
  j.Field("duplicates_suppressed", r.duplicates_suppressed);
  j.Field("conflicts_rejected", r.conflicts_rejected);
  j.Field("published", r.published);
  j.EndObject();
  j.Field("unsynced_bytes_dropped", r.unsynced_bytes_dropped);
  j.Key("open_ms");
  j.BeginObject();
  j.Field("p50", absl::ToDoubleMilliseconds(r.open_p50));
  j.Field("max", absl::ToDoubleMilliseconds(r.open_max));
  j.EndObject();
  j.Key("invariants");
  j.BeginArray();
  for (const InvariantResult& inv : r.invariants) {
    j.BeginObject();
    j.Field("name", inv.name);
    j.Field("passed", inv.passed);
    j.Field("checks", inv.checks);
    if (!inv.passed) {
      j.Field("counterexample", inv.first_counterexample);
    }
    j.EndObject();
  }
  j.EndArray();
  j.EndObject();
  return j.str();
}

}  // namespace idem::crash
