#include "bench/scaling/scaling_run.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "bench/scaling/cpu_work.h"
#include "idem/engine.h"
#include "nlohmann/json.hpp"
#include "util/temp_dir.h"

namespace idem::scaling {
namespace {

// What one thread of a side did, or the error that stopped it.
struct ThreadTally {
  uint64_t processed = 0;
  absl::Status error;
};

// The messages of one ProcessBatch call of thread `thread`: new IDs, and a
// payload that starts with the state key the handler updates ("t<thread>/
// k<n>", one of keys_per_thread), then padding up to payload_bytes.
class BatchBuilder {
 public:
  BatchBuilder(const ScalingArgs& args, int thread, int batch)
      : args_(args), thread_(thread) {
    ids_.resize(batch);
    payloads_.resize(batch);
    messages_.resize(batch);
  }

  absl::Span<const Message> Next() {
    for (size_t i = 0; i < messages_.size(); ++i, ++seq_) {
      ids_[i] = absl::StrCat("t", thread_, "-", seq_);
      payloads_[i] =
          absl::StrCat("t", thread_, "/k", seq_ % args_.keys_per_thread, "|");
      if (payloads_[i].size() < static_cast<size_t>(args_.payload_bytes)) {
        payloads_[i].resize(args_.payload_bytes, 'p');
      }
      messages_[i] = Message{.id = ids_[i],
                             .payload = payloads_[i],
                             .source = "scaling",
                             .partition = thread_};
    }
    return messages_;
  }

 private:
  const ScalingArgs& args_;
  const int thread_;
  uint64_t seq_ = 0;
  std::vector<std::string> ids_;
  std::vector<std::string> payloads_;
  std::vector<Message> messages_;
};

// One thread's loop: whole batches until `deadline`.
void RunThread(Engine& engine, const ScalingArgs& args, const CpuWork& work,
               int work_us, int batch, int thread, absl::Time deadline,
               ThreadTally& tally) {
  BatchBuilder builder(args, thread, batch);
  auto handler = [&](const Message& message, Txn& txn) -> absl::Status {
    const std::string_view key =
        message.payload.substr(0, message.payload.find('|'));
    absl::StatusOr<std::optional<std::string>> old = txn.Get(key);
    if (!old.ok()) return old.status();
    txn.Put(key, absl::StrCat(work.Run(message.payload, work_us)));
    return absl::OkStatus();
  };
  while (absl::Now() < deadline) {
    absl::StatusOr<std::vector<Result>> results =
        engine.ProcessBatch(builder.Next(), handler);
    if (!results.ok()) {
      tally.error = results.status();
      return;
    }
    for (const Result& r : *results) {
      if (r.outcome != Outcome::kProcessed) {
        tally.error = absl::InternalError(absl::StrCat(
            "a new message was not processed: ", r.error.ToString()));
        return;
      }
    }
    tally.processed += results->size();
  }
}

// `threads` threads for the duration on a fresh store.
absl::StatusOr<SideFigures> RunSide(const ScalingArgs& args,
                                    const CpuWork& work, int work_us, int batch,
                                    int threads, int shards) {
  absl::StatusOr<util::TempDir> dir =
      util::TempDir::Create("idem_scaling_", args.dir);
  if (!dir.ok()) return dir.status();
  Options options;
  options.durability = Durability::kBuffered;
  options.shards = shards;
  if (shards > 1) options.dedupe_scope = DedupeScope::kPartition;
  absl::StatusOr<std::unique_ptr<Engine>> engine =
      Engine::Open(dir->Sub("store"), options);
  if (!engine.ok()) return engine.status();

  std::vector<ThreadTally> tallies(threads);
  std::vector<std::thread> pool;
  const absl::Time start = absl::Now();
  const absl::Time deadline = start + args.duration;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      RunThread(**engine, args, work, work_us, batch, t, deadline, tallies[t]);
    });
  }
  for (std::thread& th : pool) th.join();
  const absl::Duration elapsed = absl::Now() - start;

  uint64_t processed = 0;
  for (const ThreadTally& tally : tallies) {
    if (!tally.error.ok()) return tally.error;
    processed += tally.processed;
  }
  absl::StatusOr<Stats> stats = (*engine)->GetStats();
  if (!stats.ok()) return stats.status();
  SideFigures figures;
  figures.messages_per_s =
      static_cast<double>(processed) / absl::ToDoubleSeconds(elapsed);
  if (stats->processed > 0) {
    figures.reruns_per_1000 = 1000.0 *
                              static_cast<double>(stats->handler_reruns) /
                              static_cast<double>(stats->processed);
  }
  return figures;
}

double Median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

// A configuration's paired rounds.
absl::StatusOr<ScalingRow> RunRow(const ScalingArgs& args, const CpuWork& work,
                                  unsigned cores, int work_us, int batch,
                                  int threads, int shards,
                                  std::ostream& progress) {
  ScalingRow row{
      .work_us = work_us, .batch = batch, .threads = threads, .shards = shards};
  std::vector<double> ones;
  std::vector<double> ns;
  for (int round = 0; round < args.rounds; ++round) {
    absl::StatusOr<SideFigures> one = RunSide(args, work, work_us, batch, 1, 1);
    if (!one.ok()) return one.status();
    absl::StatusOr<SideFigures> n =
        RunSide(args, work, work_us, batch, threads, shards);
    if (!n.ok()) return n.status();
    ones.push_back(one->messages_per_s);
    ns.push_back(n->messages_per_s);
    row.ratios.push_back(n->messages_per_s / one->messages_per_s);
    row.max_reruns_per_1000 = std::max(
        {row.max_reruns_per_1000, one->reruns_per_1000, n->reruns_per_1000});
    progress << absl::StrFormat(
                    "W=%dus batch=%d threads=%d shards=%d round %d/%d: %.0f "
                    "vs %.0f msg/s, %.2fx",
                    work_us, batch, threads, shards, round + 1, args.rounds,
                    one->messages_per_s, n->messages_per_s, row.ratios.back())
             << std::endl;
  }
  row.median_ratio = Median(row.ratios);
  row.median_one_thread = Median(ones);
  row.median_n_threads = Median(ns);
  if (static_cast<unsigned>(threads) <= cores) {
    const double s = KarpFlattSerialFraction(row.median_ratio, threads);
    row.serial_fraction = s;
    row.projected_16 = AmdahlSpeedup(s, 16);
    row.projected_32 = AmdahlSpeedup(s, 32);
  }
  return row;
}

}  // namespace

double KarpFlattSerialFraction(double speedup, int threads) {
  const double n = threads;
  return (1.0 / speedup - 1.0 / n) / (1.0 - 1.0 / n);
}

double AmdahlSpeedup(double serial, int cores) {
  // A measured fraction below 0 (a superlinear round) projects as if none
  // of the work were serial.
  const double s = std::clamp(serial, 0.0, 1.0);
  return 1.0 / (s + (1.0 - s) / cores);
}

absl::Status ValidateScalingArgs(const ScalingArgs& args) {
  auto all_in = [](const std::vector<int>& values, int low, int high) {
    return !values.empty() &&
           std::all_of(values.begin(), values.end(),
                       [&](int v) { return v >= low && v <= high; });
  };
  if (!all_in(args.work_us, 0, 1'000'000)) {
    return absl::InvalidArgumentError(
        "--work_us: give 1 or more values in [0, 1000000]");
  }
  if (!all_in(args.threads, 2, 1024)) {
    return absl::InvalidArgumentError(
        "--threads: give 1 or more values in [2, 1024] (1 thread is every "
        "row's baseline)");
  }
  if (!all_in(args.batches, 1, 100'000)) {
    return absl::InvalidArgumentError(
        "--batch: give 1 or more values in [1, 100000]");
  }
  if (!args.one_shard && !args.shard_per_thread) {
    return absl::InvalidArgumentError(
        "--one_shard=false and --shard_per_thread=false leave no row to run");
  }
  if (args.shard_per_thread &&
      std::any_of(args.threads.begin(), args.threads.end(),
                  [](int t) { return t > 256; })) {
    return absl::InvalidArgumentError(
        "--threads above 256 cannot have a shard each (Options::shards <= "
        "256)");
  }
  if (args.rounds < 1) {
    return absl::InvalidArgumentError("--rounds must be at least 1");
  }
  if (args.duration <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("--duration must be positive");
  }
  if (args.keys_per_thread < 1 || args.payload_bytes < 1) {
    return absl::InvalidArgumentError(
        "--keys_per_thread and --payload_bytes must be at least 1");
  }
  return absl::OkStatus();
}

absl::StatusOr<ScalingReport> RunScaling(const ScalingArgs& args,
                                         std::ostream& progress) {
  if (absl::Status s = ValidateScalingArgs(args); !s.ok()) return s;
  absl::StatusOr<CpuWork> work =
      CpuWork::Calibrate(args.payload_bytes, absl::Milliseconds(200));
  if (!work.ok()) return work.status();
  ScalingReport report;
  report.cores = std::max(1u, std::thread::hardware_concurrency());
  report.hash_rounds_per_us = work->rounds_per_us();
  for (int work_us : args.work_us) {
    for (int batch : args.batches) {
      for (int threads : args.threads) {
        std::vector<int> shard_counts;
        if (args.one_shard) shard_counts.push_back(1);
        if (args.shard_per_thread) shard_counts.push_back(threads);
        for (int shards : shard_counts) {
          absl::StatusOr<ScalingRow> row =
              RunRow(args, *work, report.cores, work_us, batch, threads, shards,
                     progress);
          if (!row.ok()) return row.status();
          report.rows.push_back(*std::move(row));
        }
      }
    }
  }
  return report;
}

void PrintScalingReport(const ScalingReport& report, bool json,
                        std::ostream& out) {
  if (json) {
    nlohmann::json rows = nlohmann::json::array();
    for (const ScalingRow& row : report.rows) {
      nlohmann::json r = {
          {"work_us", row.work_us},
          {"batch", row.batch},
          {"threads", row.threads},
          {"shards", row.shards},
          {"ratios", row.ratios},
          {"median_ratio", row.median_ratio},
          {"median_one_thread_msgs_per_s", row.median_one_thread},
          {"median_n_threads_msgs_per_s", row.median_n_threads},
          {"max_reruns_per_1000", row.max_reruns_per_1000}};
      auto optional = [](const std::optional<double>& v) {
        return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
      };
      r["serial_fraction"] = optional(row.serial_fraction);
      r["projected_speedup_16"] = optional(row.projected_16);
      r["projected_speedup_32"] = optional(row.projected_32);
      rows.push_back(std::move(r));
    }
    out << nlohmann::json{{"cores", report.cores},
                          {"hash_rounds_per_us", report.hash_rounds_per_us},
                          {"rows", rows}}
               .dump(2)
        << "\n";
    return;
  }
  out << absl::StrFormat("cores: %u; hash rounds per µs: %.2f\n", report.cores,
                         report.hash_rounds_per_us);
  out << "W µs | batch | threads | shards | 1 thread msg/s | N threads msg/s | "
         "median ratio | rounds | reruns/1000 | serial | S(16) | S(32)\n";
  for (const ScalingRow& row : report.rows) {
    std::vector<std::string> ratios;
    for (double r : row.ratios) ratios.push_back(absl::StrFormat("%.2f", r));
    // "-" for a row past the machine's cores.
    auto cell = [](const std::optional<double>& v, int digits,
                   const char* suffix) {
      return v ? absl::StrCat(absl::StrFormat("%.*f", digits, *v), suffix)
               : std::string("-");
    };
    out << absl::StrFormat(
        "%d | %d | %d | %d | %.0f | %.0f | %.2fx | %s | %.2f | %s | %s | %s\n",
        row.work_us, row.batch, row.threads, row.shards, row.median_one_thread,
        row.median_n_threads, row.median_ratio, absl::StrJoin(ratios, " "),
        row.max_reruns_per_1000, cell(row.serial_fraction, 3, ""),
        cell(row.projected_16, 1, "x"), cell(row.projected_32, 1, "x"));
  }
}

}  // namespace idem::scaling
