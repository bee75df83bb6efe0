// idem-peers-bench's driver (bench/peers/peers_bench.h): checks the
// arguments and the servers, runs every selected config for each round in
// turn, and prints the medians.

#include "bench/peers/peers_bench.h"

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <optional>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "bench/peers/configs.h"
#include "bench/peers/fsync_ceiling.h"
#include "bench/peers/measure.h"
#include "bench/peers/postgres_peer.h"
#include "bench/peers/redis_peer.h"
#include "bench/peers/stream.h"
#include "bench/peers/table.h"
#include "cli/tool_usage.h"
#include "util/temp_dir.h"

namespace idem::peers {
namespace {

constexpr char kTool[] = "idem-peers-bench";

absl::StatusOr<std::vector<std::string>> ParseOnly(const std::string& only) {
  const std::vector<std::string> known = {"postgres", "redis", "rocksdb",
                                          "idem", "ceiling"};
  if (only.empty()) return known;
  std::vector<std::string> out;
  for (absl::string_view piece : absl::StrSplit(only, ',', absl::SkipEmpty())) {
    const std::string name(piece.data(), piece.size());
    if (std::find(known.begin(), known.end(), name) == known.end()) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "--only: unknown peer '%s' (known: postgres, redis, rocksdb, idem, "
          "ceiling)",
          name));
    }
    out.push_back(name);
  }
  return out;
}

std::string MachineDescription() {
  const long cores = sysconf(_SC_NPROCESSORS_ONLN);
  const double memory_gib = static_cast<double>(sysconf(_SC_PHYS_PAGES)) *
                            static_cast<double>(sysconf(_SC_PAGESIZE)) /
                            (1024.0 * 1024.0 * 1024.0);
  return absl::StrFormat("%d cores, %.0f GiB", cores, memory_gib);
}

// The peers --only selects and the Redis servers' addresses, parsed from
// validated arguments.
struct Selection {
  explicit Selection(const PeersBenchArgs& args)
      : only(*ParseOnly(args.only)),
        redis_durable(*ParseRedisAddress(args.redis_durable)),
        redis_memory(*ParseRedisAddress(args.redis_memory)) {}

  bool Wanted(const std::string& peer) const {
    return std::find(only.begin(), only.end(), peer) != only.end();
  }

  const std::vector<std::string> only;
  const RedisAddress redis_durable;
  const RedisAddress redis_memory;
};

// Why each selected server cannot be reached; empty if every one can.
std::vector<std::string> UnreachableServers(const PeersBenchArgs& args,
                                            const Selection& selection) {
  std::vector<std::string> unreachable;
  if (selection.Wanted("postgres")) {
    absl::Status reached = PostgresReachable(args.pg);
    if (!reached.ok()) unreachable.push_back(std::string(reached.message()));
  }
  if (selection.Wanted("redis")) {
    for (const RedisAddress* a :
         {&selection.redis_durable, &selection.redis_memory}) {
      absl::Status reached = RedisReachable(*a, a == &selection.redis_durable);
      if (!reached.ok()) unreachable.push_back(std::string(reached.message()));
    }
  }
  return unreachable;
}

// Names each unreachable server on `err`, with how to start them; returns
// kExitUsage.
int ReportUnreachable(const std::vector<std::string>& unreachable,
                      std::ostream& err) {
  for (const std::string& u : unreachable) err << kTool << ": " << u << "\n";
  err << kTool
      << ": start the servers with bench/peers/run.sh (it starts "
         "and stops them), point --pg/--redis_durable/--redis_memory at "
         "yours, or leave those peers out with --only=rocksdb,idem,ceiling\n";
  return cli::kExitUsage;
}

// The scratch directory: --dir (created if missing, kept at the end), or a
// new temporary directory (removed when this is destroyed).
struct Scratch {
  std::string path;
  std::optional<util::TempDir> temporary;
};

absl::StatusOr<Scratch> OpenScratch(const std::string& dir) {
  Scratch scratch;
  if (!dir.empty()) {
    scratch.path = dir;
    std::error_code ignored;  // a directory that cannot be made fails later
    std::filesystem::create_directories(dir, ignored);
    return scratch;
  }
  absl::StatusOr<util::TempDir> temporary =
      util::TempDir::Create("idem_peers_");
  if (!temporary.ok()) return temporary.status();
  scratch.temporary = *std::move(temporary);
  scratch.path = scratch.temporary->path();
  return scratch;
}

ReportHeader MakeHeader(const PeersBenchArgs& args,
                        const std::vector<StreamMessage>& stream) {
  ReportHeader header;
  header.date =
      absl::FormatTime("%Y-%m-%d %H:%M %Z", absl::Now(), absl::LocalTimeZone());
  header.machine = MachineDescription();
  header.messages = args.messages;
  header.slow_messages = std::min(args.slow_messages, args.messages);
  header.rounds = args.rounds;
  header.duplicate_rate = args.duplicate_rate;
  header.seed = args.seed;
  header.accounts = args.accounts;
  header.stream_duplicates = CountRedeliveries(stream);
  return header;
}

RunLimits MakeLimits(const PeersBenchArgs& args) {
  RunLimits limits;
  limits.messages = args.messages;
  limits.slow_messages = args.slow_messages;
  limits.time_cap_s = absl::ToDoubleSeconds(args.duration);
  limits.accounts = args.accounts;
  return limits;
}

// The configs of the selected peers (all of them: a round runs those of the
// peers wanted), less those of another batch size with --only_batch.
std::vector<PeerConfig> MakeSelectedConfigs(const PeersBenchArgs& args,
                                            const Selection& selection,
                                            const std::string& scratch) {
  std::vector<PeerConfig> configs =
      MakeConfigs(scratch, args.pg, selection.redis_durable,
                  selection.redis_memory, args.batch, args.clients);
  if (args.only_batch > 0) {
    std::erase_if(configs, [&](const PeerConfig& c) {
      return c.batch != args.only_batch;
    });
  }
  return configs;
}

// Progress lines on `err`, one per run: "[done/total] config: result".
class Progress {
 public:
  Progress(size_t total, std::ostream& err) : total_(total), err_(err) {}

  void Report(const ResultRow& r) {
    err_ << absl::StrFormat("[%d/%d] %s, batch %d, %d client(s): ", ++done_,
                            total_, r.config.name, r.config.batch,
                            r.config.clients);
    if (r.errored()) {
      err_ << r.check << "\n";
    } else {
      err_ << absl::StrFormat("%s/s, p99 %s/%s, %s\n", FormatThousands(r.rate),
                              FormatLatency(r.p99_us), r.latency_unit, r.check);
    }
  }

 private:
  const size_t total_;
  std::ostream& err_;
  size_t done_ = 0;
};

// How many runs there will be: every wanted config and the fsync loop per
// round, and pg_test_fsync once.
size_t CountRuns(const PeersBenchArgs& args, const Selection& selection,
                 const std::vector<PeerConfig>& configs) {
  size_t per_round = 0;
  for (const PeerConfig& c : configs) {
    if (selection.Wanted(c.peer)) per_round += 1;
  }
  if (selection.Wanted("ceiling")) per_round += 1;  // the fsync loop
  const bool pg_test_fsync =
      !args.pg_test_fsync.empty() && selection.Wanted("ceiling");
  return per_round * static_cast<size_t>(args.rounds) + (pg_test_fsync ? 1 : 0);
}

// Runs every wanted config (the fsync loop first) `args.rounds` times, the
// configs in turn, so drift of the shared machine (its sync rate varies
// several-fold over minutes) hits every peer alike; one row per config, its
// median round.
std::vector<ResultRow> RunRounds(const PeersBenchArgs& args,
                                 const Selection& selection,
                                 const std::vector<PeerConfig>& configs,
                                 const std::vector<StreamMessage>& stream,
                                 const std::string& scratch,
                                 Progress& progress) {
  const RunLimits limits = MakeLimits(args);
  std::vector<std::vector<ResultRow>> runs;  // per config, one per round
  for (int round = 0; round < args.rounds; ++round) {
    size_t at = 0;
    auto keep = [&](ResultRow row) {
      progress.Report(row);
      if (runs.size() <= at) runs.emplace_back();
      runs[at++].push_back(std::move(row));
    };
    if (selection.Wanted("ceiling")) {
      keep(RunFsyncLoop(scratch, absl::ToDoubleSeconds(args.fsync_duration)));
    }
    for (const PeerConfig& config : configs) {
      if (selection.Wanted(config.peer)) {
        keep(RunConfig(config, stream, limits));
      }
    }
  }
  std::vector<ResultRow> rows;
  for (std::vector<ResultRow>& config_runs : runs) {
    rows.push_back(MedianRound(config_runs));
  }
  return rows;
}

// pg_test_fsync's fdatasync figure, as a row of one round.
ResultRow PgTestFsyncRow(const PeersBenchArgs& args, const std::string& scratch,
                         Progress& progress) {
  ResultRow row = RunPgTestFsync(args.pg_test_fsync, scratch);
  progress.Report(row);
  row.rate_min = row.rate_max = row.rate;
  return row;
}

// kExitFailure if a run failed or a check did not hold, else kExitOk.
int ExitCode(const std::vector<ResultRow>& rows) {
  for (const ResultRow& r : rows) {
    if (r.failed()) return cli::kExitFailure;
  }
  return cli::kExitOk;
}

}  // namespace

absl::Status ValidatePeersBenchArgs(const PeersBenchArgs& args) {
  auto invalid = [](const std::string& what) {
    return absl::InvalidArgumentError(what);
  };
  if (args.messages < 1) return invalid("--messages must be >= 1, got 0");
  if (args.slow_messages < 1) {
    return invalid("--slow_messages must be >= 1, got 0");
  }
  if (!(args.duplicate_rate >= 0 && args.duplicate_rate < 1)) {
    return invalid(absl::StrFormat("--duplicate_rate must be in [0, 1), got %g",
                                   args.duplicate_rate));
  }
  if (args.accounts < 1) {
    return invalid(
        absl::StrFormat("--accounts must be >= 1, got %d", args.accounts));
  }
  if (args.batch < 1) {
    return invalid(absl::StrFormat("--batch must be >= 1, got %d", args.batch));
  }
  if (args.only_batch < 0) {
    return invalid(
        absl::StrFormat("--only_batch must be >= 0, got %d", args.only_batch));
  }
  if (args.clients < 0) {
    return invalid(
        absl::StrFormat("--clients must be >= 0, got %d", args.clients));
  }
  if (args.duration <= absl::ZeroDuration()) {
    return invalid(absl::StrCat("--duration must be positive, got ",
                                absl::FormatDuration(args.duration)));
  }
  if (args.fsync_duration <= absl::ZeroDuration()) {
    return invalid(absl::StrCat("--fsync_duration must be positive, got ",
                                absl::FormatDuration(args.fsync_duration)));
  }
  if (args.rounds < 1) {
    return invalid(
        absl::StrFormat("--rounds must be >= 1, got %d", args.rounds));
  }
  if (absl::Status s = ParseOnly(args.only).status(); !s.ok()) return s;
  if (absl::Status s = ParseRedisAddress(args.redis_durable).status();
      !s.ok()) {
    return invalid(absl::StrCat("--redis_durable: ", s.message()));
  }
  if (absl::Status s = ParseRedisAddress(args.redis_memory).status(); !s.ok()) {
    return invalid(absl::StrCat("--redis_memory: ", s.message()));
  }
  return absl::OkStatus();
}

int RunPeersBench(const PeersBenchArgs& args, std::ostream& out,
                  std::ostream& err) {
  if (absl::Status s = ValidatePeersBenchArgs(args); !s.ok()) {
    return cli::ReportUsageError(kTool, s.message(), err);
  }
  const Selection selection(args);
  // Reach every selected server before running anything.
  if (std::vector<std::string> unreachable =
          UnreachableServers(args, selection);
      !unreachable.empty()) {
    return ReportUnreachable(unreachable, err);
  }
  absl::StatusOr<Scratch> scratch = OpenScratch(args.dir);
  if (!scratch.ok()) {
    err << kTool
        << ": cannot create a scratch directory: " << scratch.status().message()
        << "\n";
    return cli::kExitFailure;
  }

  const std::vector<StreamMessage> stream =
      MakeStream(args.messages, args.duplicate_rate, args.seed, args.accounts);
  const ReportHeader header = MakeHeader(args, stream);
  const std::vector<PeerConfig> configs =
      MakeSelectedConfigs(args, selection, scratch->path);
  Progress progress(CountRuns(args, selection, configs), err);
  std::vector<ResultRow> rows =
      RunRounds(args, selection, configs, stream, scratch->path, progress);
  if (selection.Wanted("ceiling") && !args.pg_test_fsync.empty()) {
    rows.push_back(PgTestFsyncRow(args, scratch->path, progress));
  }
  AddRatios(rows);
  if (args.json) {
    PrintJson(header, rows, out);
  } else {
    PrintTable(header, rows, out);
  }
  return ExitCode(rows);
}

}  // namespace idem::peers
