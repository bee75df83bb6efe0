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
  // Validated above.
  const std::vector<std::string> only = *ParseOnly(args.only);
  const RedisAddress redis_durable = *ParseRedisAddress(args.redis_durable);
  const RedisAddress redis_memory = *ParseRedisAddress(args.redis_memory);
  auto wanted = [&](const std::string& peer) {
    return std::find(only.begin(), only.end(), peer) != only.end();
  };

  // Reach every selected server before running anything.
  std::vector<std::string> unreachable;
  if (wanted("postgres")) {
    absl::Status reached = PostgresReachable(args.pg);
    if (!reached.ok()) unreachable.push_back(std::string(reached.message()));
  }
  if (wanted("redis")) {
    for (const RedisAddress* a : {&redis_durable, &redis_memory}) {
      absl::Status reached = RedisReachable(*a, a == &redis_durable);
      if (!reached.ok()) unreachable.push_back(std::string(reached.message()));
    }
  }
  if (!unreachable.empty()) {
    for (const std::string& u : unreachable) {
      err << kTool << ": " << u << "\n";
    }
    err << kTool
        << ": start the servers with bench/peers/run.sh (it starts "
           "and stops them), point --pg/--redis_durable/--redis_memory at "
           "yours, or leave those peers out with --only=rocksdb,idem,ceiling\n";
    return cli::kExitUsage;
  }

  // The scratch directory: --dir (created if missing, kept at the end), or a
  // new temporary directory (removed at the end).
  std::string scratch = args.dir;
  std::optional<util::TempDir> temporary;
  if (scratch.empty()) {
    absl::StatusOr<util::TempDir> dir = util::TempDir::Create("idem_peers_");
    if (!dir.ok()) {
      err << kTool
          << ": cannot create a scratch directory: " << dir.status().message()
          << "\n";
      return cli::kExitFailure;
    }
    temporary = *std::move(dir);
    scratch = temporary->path();
  } else {
    std::error_code ignored;  // a directory that cannot be made fails later
    std::filesystem::create_directories(scratch, ignored);
  }

  const std::vector<StreamMessage> stream =
      MakeStream(args.messages, args.duplicate_rate, args.seed, args.accounts);
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

  RunLimits limits;
  limits.messages = args.messages;
  limits.slow_messages = args.slow_messages;
  limits.time_cap_s = absl::ToDoubleSeconds(args.duration);
  limits.accounts = args.accounts;

  std::vector<PeerConfig> configs = MakeConfigs(
      scratch, args.pg, redis_durable, redis_memory, args.batch, args.clients);
  if (args.only_batch > 0) {
    std::erase_if(configs, [&](const PeerConfig& c) {
      return c.batch != args.only_batch;
    });
  }
  size_t total = 0;
  for (const PeerConfig& c : configs) total += wanted(c.peer) ? 1 : 0;
  if (wanted("ceiling")) total += 1;  // the fsync loop

  // Rounds run every config in turn, so drift of the shared machine (its
  // sync rate varies several-fold over minutes) hits every peer alike; each
  // row reports its median round.
  const int rounds = args.rounds;
  std::vector<std::vector<ResultRow>> runs;  // per config, one per round
  size_t done = 0;
  auto report = [&](const ResultRow& r) {
    err << absl::StrFormat(
        "[%d/%d] %s, batch %d, %d client(s): ", ++done,
        total * static_cast<size_t>(rounds) +
            (args.pg_test_fsync.empty() || !wanted("ceiling") ? 0 : 1),
        r.config.name, r.config.batch, r.config.clients);
    if (r.errored()) {
      err << r.check << "\n";
    } else {
      err << absl::StrFormat("%s/s, p99 %s/%s, %s\n", FormatThousands(r.rate),
                             FormatLatency(r.p99_us), r.latency_unit, r.check);
    }
  };
  for (int round = 0; round < rounds; ++round) {
    size_t at = 0;
    auto keep = [&](ResultRow row) {
      report(row);
      if (runs.size() <= at) runs.emplace_back();
      runs[at++].push_back(std::move(row));
    };
    if (wanted("ceiling")) {
      keep(RunFsyncLoop(scratch, absl::ToDoubleSeconds(args.fsync_duration)));
    }
    for (const PeerConfig& config : configs) {
      if (wanted(config.peer)) keep(RunConfig(config, stream, limits));
    }
  }
  std::vector<ResultRow> rows;
  for (std::vector<ResultRow>& config_runs : runs) {
    rows.push_back(MedianRound(config_runs));
  }
  if (wanted("ceiling") && !args.pg_test_fsync.empty()) {
    ResultRow row = RunPgTestFsync(args.pg_test_fsync, scratch);
    report(row);
    row.rate_min = row.rate_max = row.rate;
    rows.push_back(std::move(row));
  }
  AddRatios(rows);
  if (args.json) {
    PrintJson(header, rows, out);
  } else {
    PrintTable(header, rows, out);
  }
  for (const ResultRow& r : rows) {
    if (r.failed()) return cli::kExitFailure;
  }
  return cli::kExitOk;
}

}  // namespace idem::peers
