#include "cli/crashtest.h"

#include <optional>
#include <utility>

#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "absl/time/time.h"
#include "idem/crash/harness.h"
#include "util/temp_dir.h"

namespace idem::cli {
namespace {

bool ParseMode(const std::string& s, crash::CrashMode* mode) {
  if (s == "kill")
    *mode = crash::CrashMode::kKill;
  else if (s == "powerloss")
    *mode = crash::CrashMode::kPowerLoss;
  else if (s == "killpoint")
    *mode = crash::CrashMode::kKillPoint;
  else if (s == "mixed")
    *mode = crash::CrashMode::kMixed;
  else
    return false;
  return true;
}

bool ParseSelfTest(const std::string& s, crash::SelfTest* self_test) {
  if (s == "none")
    *self_test = crash::SelfTest::kNone;
  else if (s == "ack_before_durable")
    *self_test = crash::SelfTest::kAckBeforeDurable;
  else if (s == "split_commit")
    *self_test = crash::SelfTest::kSplitCommit;
  else if (s == "emit_outside_commit")
    *self_test = crash::SelfTest::kEmitOutsideCommit;
  else if (s == "ack_before_publish")
    *self_test = crash::SelfTest::kAckBeforePublish;
  else if (s == "lost_updates")
    *self_test = crash::SelfTest::kLostUpdates;
  else if (s == "ignore_conflicts")
    *self_test = crash::SelfTest::kIgnoreConflicts;
  else if (s == "skip_range_validation")
    *self_test = crash::SelfTest::kSkipRangeValidation;
  else if (s == "fire_outside_commit")
    *self_test = crash::SelfTest::kFireOutsideCommit;
  else if (s == "wrong_shard")
    *self_test = crash::SelfTest::kWrongShard;
  else
    return false;
  return true;
}

std::string ReproduceCommand(const CrashtestArgs& a) {
  return absl::StrFormat(
      "idem-crashtest --workload=%s --cycles=%d --mode=%s --durability=%s "
      "--seed=%d --threads=%d --messages=%d --partitions=%d --batch=%d "
      "--recovery_crash_rate=%g --self_test=%s --expiry_buckets=%d "
      "--dedupe_scope=%s --shards=%d%s%s",
      a.workload, a.cycles, a.mode, a.durability, a.seed, a.threads, a.messages,
      a.partitions, a.batch, a.recovery_crash_rate, a.self_test,
      a.expiry_buckets, a.dedupe_scope, a.shards,
      a.detect_conflicts ? " --detect_conflicts" : "",
      a.refresh_on_duplicate ? " --refresh_on_duplicate" : "");
}

void PrintText(const CrashtestArgs& a, const crash::CrashTestReport& r,
               std::ostream& out) {
  out << absl::StrFormat(
      "idem crash test: workload=%s mode=%s durability=%s threads=%d "
      "shards=%d seed=%d\n",
      a.workload, a.mode, a.durability, a.threads, r.shards, r.seed);
  out << absl::StrFormat(
      "cycles:     %d crash cycles in %d epoch(s): kill %d, power loss %d "
      "(torn "
      "%d), kill point %d; recovery crashed %d\n",
      r.cycles, r.epochs, r.kills, r.power_losses, r.torn_writes, r.kill_points,
      r.recovery_crashes);
  out << absl::StrFormat(
      "no crash:   %d run(s) stopped before their crash came (not cycles)\n",
      r.cycles_without_crash);
  out << absl::StrFormat(
      "messages:   %d unique, %d stream entries, %d delivered, %d "
      "acknowledged, %d duplicates suppressed\n",
      r.unique_messages, r.stream_entries, r.deliveries, r.acknowledged,
      r.duplicates_suppressed);
  if (a.detect_conflicts) {
    out << absl::StrFormat("conflicts:  %d conflicting redeliveries rejected\n",
                           r.conflicts_rejected);
  }
  if (r.published > 0) {
    out << absl::StrFormat("downstream: %d outbox entries published\n",
                           r.published);
  }
  out << absl::StrFormat("unsynced bytes dropped: %d\n",
                         r.unsynced_bytes_dropped);
  out << absl::StrFormat("recovery (Open) time: p50 %.1f ms, max %.1f ms\n",
                         absl::ToDoubleMilliseconds(r.open_p50),
                         absl::ToDoubleMilliseconds(r.open_max));
  out << "invariants:\n";
  for (const crash::InvariantResult& inv : r.invariants) {
    if (inv.passed) {
      out << absl::StrFormat("  PASS %-23s (%d checks)\n", inv.name,
                             inv.checks);
    } else {
      out << absl::StrFormat("  FAIL %-23s %s\n", inv.name,
                             inv.first_counterexample);
    }
  }
  out << "verdict: " << (r.passed() ? "PASS" : "FAIL") << "\n";
  out << "reproduce: " << ReproduceCommand(a) << "\n";
}

std::string ProgressLine(const crash::CycleProgress& p) {
  using Kind = crash::CycleProgress::Kind;
  switch (p.kind) {
    case Kind::kCrashCycle:
      return absl::StrFormat("[cycle %d/%d] %s: %s", p.cycle, p.cycles, p.crash,
                             p.summary);
    case Kind::kNoCrash:
      return absl::StrFormat(
          "[no crash] the worker stopped before the crash of cycle %d: %s",
          p.cycle, p.summary);
    case Kind::kEpochEnd:
      return absl::StrFormat(
          "[epoch %d complete] crash-free completeness check: %s", p.epoch,
          p.summary);
    case Kind::kFinalRun:
      return absl::StrFormat("[final run] %s", p.summary);
  }
  return p.summary;
}

}  // namespace

int RunCrashtest(const CrashtestArgs& args, std::ostream& out,
                 std::ostream& err) {
  crash::CrashTestOptions options;
  if (!ParseMode(args.mode, &options.mode)) {
    err << "idem-crashtest: --mode must be kill, powerloss, killpoint or "
           "mixed, got '"
        << args.mode << "'\n";
    return 2;
  }
  if (args.durability == "sync") {
    options.durability = Durability::kSync;
  } else if (args.durability == "buffered") {
    options.durability = Durability::kBuffered;
  } else {
    err << "idem-crashtest: --durability must be sync or buffered, got '"
        << args.durability << "'\n";
    return 2;
  }
  if (!ParseSelfTest(args.self_test, &options.self_test)) {
    err << "idem-crashtest: --self_test must be none, ack_before_durable, "
           "split_commit, emit_outside_commit, ack_before_publish, "
           "lost_updates, ignore_conflicts, skip_range_validation, "
           "fire_outside_commit or wrong_shard, got '"
        << args.self_test << "'\n";
    return 2;
  }
  absl::StatusOr<std::unique_ptr<crash::Workload>> workload =
      crash::NewBuiltinWorkload(args.workload);
  if (!workload.ok()) {
    err << "idem-crashtest: " << workload.status().message() << "\n";
    return 2;
  }

  options.dir = args.dir.empty() ? "(temporary)" : args.dir;
  options.cycles = args.cycles;
  options.seed = args.seed;
  options.threads = args.threads;
  options.messages = args.messages;
  options.partitions = args.partitions;
  options.max_batch = args.batch;
  options.expiry_buckets = args.expiry_buckets;
  if (args.dedupe_scope == "store") {
    options.dedupe_scope = DedupeScope::kStore;
  } else if (args.dedupe_scope == "partition") {
    options.dedupe_scope = DedupeScope::kPartition;
  } else {
    err << "idem-crashtest: --dedupe_scope must be store or partition, got '"
        << args.dedupe_scope << "'\n";
    return 2;
  }
  options.detect_conflicts = args.detect_conflicts;
  options.refresh_on_duplicate = args.refresh_on_duplicate;
  options.recovery_crash_rate = args.recovery_crash_rate;
  options.shards = args.shards;
  // The option names are the flag names, but for max_batch (--batch).
  if (absl::Status s = crash::ValidateCrashTestOptions(options, **workload);
      !s.ok()) {
    absl::string_view message = s.message();
    if (absl::ConsumePrefix(&message, "max_batch")) {
      err << "idem-crashtest: --batch" << message << "\n";
    } else {
      err << "idem-crashtest: --" << message << "\n";
    }
    return 2;
  }
  options.progress = [&err](const crash::CycleProgress& p) {
    err << ProgressLine(p) << "\n";
    err.flush();
  };

  std::optional<util::TempDir> temporary;
  options.dir = args.dir;
  if (options.dir.empty()) {
    absl::StatusOr<util::TempDir> dir =
        util::TempDir::Create("idem-crashtest-");
    if (!dir.ok()) {
      err << "idem-crashtest: cannot create a temporary directory\n";
      return 2;
    }
    temporary = *std::move(dir);
    options.dir = temporary->path();
  }

  absl::StatusOr<crash::CrashTestReport> report =
      crash::RunCrashTest(options, **workload);
  if (!report.ok()) {
    // Left in place: the harness may have written its logs there.
    if (temporary.has_value()) temporary->Keep();
    err << "idem-crashtest: " << report.status() << "\n";
    return 2;
  }
  if (args.json) {
    out << crash::CrashTestReportToJson(*report) << "\n";
  } else {
    PrintText(args, *report, out);
  }
  // A temporary directory goes (as `temporary` is destroyed) only after a
  // run that passed, and not with --keep.
  if (!temporary.has_value() || args.keep || !report->passed()) {
    if (temporary.has_value()) temporary->Keep();
    err << "idem-crashtest: store and logs kept in " << options.dir << "\n";
  }
  return report->passed() ? 0 : 1;
}

}  // namespace idem::cli
