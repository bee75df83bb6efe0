// Running idem-bench (bench/idem_bench/idem_bench.h): the bounds of
// BenchOptions, and each layout's run on a store of its own (the delivering
// threads, the shared stream, the time series and the figures of its
// report).

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <deque>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "bench/idem_bench/clock_env.h"
#include "bench/idem_bench/idem_bench.h"
#include "bench/idem_bench/names.h"
#include "bench/idem_bench/read_cost.h"
#include "engine/latency_histogram.h"
#include "engine/record.h"
#include "idem/clock.h"
#include "rocksdb/env.h"
#include "util/directory.h"
#include "util/temp_dir.h"

namespace idem::bench {
namespace {
constexpr absl::Duration kProgressEvery = absl::Seconds(2);

// Bounds of BenchOptions beyond the obvious ones (documented in
// bench/idem_bench/idem_bench.h and in idem-bench's flags).
constexpr int64_t kMaxMessages = 10'000'000'000;  // ~a day at 100k msg/s
constexpr absl::Duration kMaxDuration = absl::Hours(7 * 24);
constexpr int64_t kMaxStateKeys = 1'000'000'000'000;
// The workload keeps 8 bytes per reachable ID: at most 800 MB.
constexpr int64_t kMaxDuplicateReach = 100'000'000;
constexpr absl::Duration kMaxWindow = absl::Hours(365 * 24);
constexpr double kMinSimRate = 0.01;  // keeps clock micros within int64
constexpr double kMaxSimRate = 1e9;
constexpr int kMaxSteadyWindows = 1000;

double Ratio(uint64_t num, uint64_t den) {
  return den == 0 ? 0.0 : static_cast<double>(num) / static_cast<double>(den);
}

// The first sample at or after clock time `t` (samples are in clock order);
// nullptr if none.
const Sample* SampleAtOrAfter(const std::vector<Sample>& samples, double t) {
  auto it = std::lower_bound(
      samples.begin(), samples.end(), t,
      [](const Sample& s, double v) { return s.clock_seconds < v - 1e-9; });
  return it == samples.end() ? nullptr : &*it;
}

std::optional<double> WaBetween(const Sample& a, const Sample& b) {
  if (b.user_bytes <= a.user_bytes) return std::nullopt;
  return static_cast<double>(b.written_bytes - a.written_bytes) /
         static_cast<double>(b.user_bytes - a.user_bytes);
}

// Expected distinct keys after `n` uniform draws from `k`.
double ExpectedDistinct(double k, double n) {
  return k * (1.0 - std::exp(-n / k));
}

// Logical size of `live` dedupe records (key + value) plus the state the
// handler wrote after `processed` messages.
uint64_t LogicalBytes(const BenchOptions& o, int64_t live, int64_t processed) {
  uint64_t bytes =
      static_cast<uint64_t>(live) * (kDedupeKeyBytes + kRecordHeaderBytes);
  if (o.state_bytes > 0) {
    const double keys = ExpectedDistinct(static_cast<double>(o.state_keys),
                                         static_cast<double>(processed));
    const double key_bytes =
        std::strlen("state/") + std::floor(std::log10(o.state_keys)) + 1;
    bytes += static_cast<uint64_t>(keys * (key_bytes + o.state_bytes));
  }
  return bytes;
}

// One layout's run: the delivering threads, the shared stream and the time
// series.
class LayoutRun {
 public:
  LayoutRun(const BenchOptions& options, Clock* clock, ManualClock* manual,
            absl::Time start, Target* target, std::string store_path,
            std::string label, std::ostream* progress)
      : options_(options),
        clock_(clock),
        manual_(manual),
        start_(start),
        target_(target),
        store_path_(std::move(store_path)),
        label_(std::move(label)),
        progress_(progress),
        sample_every_(options.sample_every > absl::ZeroDuration()
                          ? options.sample_every
                      : manual != nullptr ? options.window / 10
                                          : absl::Seconds(1)),
        window_us_(absl::ToInt64Microseconds(options.window)),
        workload_(WorkloadOptions{.shape = options.id_shape,
                                  .seed = options.seed,
                                  .duplicate_rate = options.duplicate_rate,
                                  .duplicate_reach = options.duplicate_reach,
                                  .window = options.window}) {}

  absl::Status Run() {
    {
      absl::MutexLock lock(&mu_);
      wall_start_ = std::chrono::steady_clock::now();
      last_progress_ = absl::Now();
      next_sample_ = start_;
      TakeSampleLocked(start_);
    }
    latencies_.resize(static_cast<size_t>(options_.threads));
    std::vector<std::thread> threads;
    for (int i = 0; i < options_.threads; ++i) {
      threads.emplace_back([this, i] { Worker(i); });
    }
    for (std::thread& t : threads) t.join();
    absl::MutexLock lock(&mu_);
    wall_seconds_ = WallSecondsLocked();
    if (!error_.ok()) return error_;
    TakeSampleLocked(clock_->Now());
    return error_;
  }

  // Fills the stream, outcome, speed and time-series parts of `r`.
  void Report(LayoutReport& r) {
    absl::MutexLock lock(&mu_);
    r.messages = handed_out_;
    r.unique_ids = workload_.unique();
    r.redeliveries = workload_.redeliveries();
    r.expired_redeliveries = workload_.expired_redeliveries();
    r.processed = processed_;
    r.duplicates = duplicates_;
    if (options_.threads == 1 && manual_ != nullptr) {
      r.dedupe_errors = errors_;
    }
    r.wall_seconds = wall_seconds_;
    r.messages_per_second =
        wall_seconds_ > 0 ? static_cast<double>(handed_out_) / wall_seconds_
                          : 0;
    LatencyHistogram batch, message;
    for (const auto& [b, m] : latencies_) {
      batch.Merge(b);
      message.Merge(m);
    }
    r.batch_latency = batch.Summary();
    r.message_latency = message.Summary();
    r.samples = samples_;
    const Sample& last = samples_.back();
    r.clock_seconds = last.clock_seconds;
    const double window_s = absl::ToDoubleSeconds(options_.window);
    r.windows_covered = last.clock_seconds / window_s;
    for (int i = 0; (i + 1) * window_s <= last.clock_seconds + 1e-9; ++i) {
      const Sample* a = SampleAtOrAfter(samples_, i * window_s);
      const Sample* b = SampleAtOrAfter(samples_, (i + 1) * window_s);
      if (a == nullptr || b == nullptr) break;
      r.wa_per_window.push_back(WaBetween(*a, *b).value_or(0));
    }
    if (r.windows_covered >= options_.steady_windows + 1) {
      const Sample* a = SampleAtOrAfter(
          samples_, last.clock_seconds - options_.steady_windows * window_s);
      if (a != nullptr) {
        r.steady_wa = WaBetween(*a, last);
        double amp = 0, disk = 0;
        uint64_t disk_max = 0;
        int n = 0;
        for (const Sample* s = a; s <= &last; ++s) {
          amp += Ratio(s->live_sst_bytes, s->logical_bytes);
          disk += static_cast<double>(s->disk_bytes);
          disk_max = std::max(disk_max, s->disk_bytes);
          ++n;
        }
        r.steady_space_amp = amp / n;
        r.steady_disk_bytes_mean = disk / n;
        r.steady_disk_bytes_max = disk_max;
      }
    }
    r.live_records = last.live_records;
  }

 private:
  void Worker(int index) {
    std::vector<Delivery> batch;
    absl::Time now;
    auto& [batch_latency, message_latency] =
        latencies_[static_cast<size_t>(index)];
    while (Next(&batch, &now)) {
      const auto t0 = std::chrono::steady_clock::now();
      absl::StatusOr<BatchOutcome> outcome = target_->ProcessBatch(batch);
      const double micros = std::chrono::duration<double, std::micro>(
                                std::chrono::steady_clock::now() - t0)
                                .count();
      absl::MutexLock lock(&mu_);
      if (!outcome.ok()) {
        if (error_.ok()) error_ = outcome.status();
        stop_ = true;
        return;
      }
      batch_latency.Add(micros);
      message_latency.Add(micros / static_cast<double>(batch.size()));
      processed_ += outcome->processed;
      duplicates_ += outcome->duplicates;
      errors_ += outcome->missed_duplicates + outcome->false_duplicates;
      processed_total_ += outcome->processed;
      expiries_.emplace_back(absl::ToUnixMicros(now) + window_us_,
                             outcome->processed);
    }
  }

  // Hands out the next batch and the clock time it is committed at; false
  // once the run is over.
  bool Next(std::vector<Delivery>* batch, absl::Time* now) {
    batch->clear();
    absl::MutexLock lock(&mu_);
    if (stop_) return false;
    int64_t n = options_.batch;
    if (options_.messages > 0) {
      n = std::min<int64_t>(n, options_.messages - handed_out_);
    }
    if (n <= 0 ||
        (options_.duration > absl::ZeroDuration() &&
         WallSecondsLocked() >= absl::ToDoubleSeconds(options_.duration))) {
      stop_ = true;
      return false;
    }
    if (manual_ != nullptr) {
      manual_->Set(start_ + absl::Microseconds(static_cast<int64_t>(
                                static_cast<double>(handed_out_ + n) * 1e6 /
                                options_.sim_messages_per_second)));
    }
    *now = clock_->Now();
    if (*now >= next_sample_) {
      TakeSampleLocked(*now);
      if (!error_.ok()) {
        stop_ = true;
        return false;
      }
    }
    workload_.NextBatch(static_cast<int>(n), *now, batch);
    handed_out_ += n;
    MaybeProgressLocked(*now);
    return true;
  }

  double WallSecondsLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                         wall_start_)
        .count();
  }

  void TakeSampleLocked(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    absl::StatusOr<TargetCounters> c = target_->Counters();
    if (!c.ok()) {
      if (error_.ok()) error_ = c.status();
      return;
    }
    const int64_t now_us = absl::ToUnixMicros(now);
    while (!expiries_.empty() && expiries_.front().first <= now_us) {
      expired_total_ += expiries_.front().second;
      expiries_.pop_front();
    }
    Sample s;
    s.clock_seconds = absl::ToDoubleSeconds(now - start_);
    s.wall_seconds = WallSecondsLocked();
    s.messages = handed_out_;
    s.disk_bytes = util::DirectoryBytes(store_path_);
    s.live_sst_bytes = c->live_sst_bytes;
    s.live_records = processed_total_ - expired_total_;
    s.estimated_records = c->estimated_records;
    s.user_bytes = c->user_bytes;
    s.written_bytes = c->written_bytes();
    s.expired_dropped = c->expired_dropped;
    s.expired_dropped_whole = c->expired_dropped_whole;
    s.logical_bytes = LogicalBytes(options_, s.live_records, processed_total_);
    s.cumulative_wa = Ratio(s.written_bytes, s.user_bytes);
    const double window_s = absl::ToDoubleSeconds(options_.window);
    if (s.clock_seconds + 1e-9 >= window_s) {
      const Sample* back =
          SampleAtOrAfter(samples_, s.clock_seconds - window_s);
      if (back != nullptr) s.window_wa = WaBetween(*back, s);
    }
    samples_.push_back(s);
    if (next_sample_ <= now) {  // the next multiple of sample_every after now
      next_sample_ +=
          sample_every_ * ((now - next_sample_) / sample_every_ + 1);
    }
  }

  void MaybeProgressLocked(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (progress_ == nullptr) return;
    const absl::Time wall = absl::Now();
    if (wall - last_progress_ < kProgressEvery) return;
    last_progress_ = wall;
    const Sample& s = samples_.back();
    const double elapsed = WallSecondsLocked();
    *progress_ << absl::StrFormat(
        "idem-bench [%s] %d%s msgs, clock +%.2f h (%.1f windows), %.0f "
        "msg/s, WA %.2f, disk %.1f MiB, live %d\n",
        label_, handed_out_,
        options_.messages > 0 ? absl::StrCat("/", options_.messages) : "",
        absl::ToDoubleHours(now - start_),
        absl::ToDoubleSeconds(now - start_) /
            absl::ToDoubleSeconds(options_.window),
        elapsed > 0 ? static_cast<double>(handed_out_) / elapsed : 0,
        s.cumulative_wa, static_cast<double>(s.disk_bytes) / kMiB,
        s.live_records);
    progress_->flush();
  }

  const BenchOptions options_;
  Clock* const clock_;
  ManualClock* const manual_;  // null on the real clock
  const absl::Time start_;
  Target* const target_;
  const std::string store_path_;
  const std::string label_;
  std::ostream* const progress_;
  const absl::Duration sample_every_;
  const int64_t window_us_;
  // Per worker: batch latencies and per-message latencies. Each worker
  // touches only its own entry until the workers are joined.
  std::vector<std::pair<LatencyHistogram, LatencyHistogram>> latencies_;

  absl::Mutex mu_;
  Workload workload_ ABSL_GUARDED_BY(mu_);
  std::chrono::steady_clock::time_point wall_start_ ABSL_GUARDED_BY(mu_);
  double wall_seconds_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Time last_progress_ ABSL_GUARDED_BY(mu_);
  absl::Time next_sample_ ABSL_GUARDED_BY(mu_);
  int64_t handed_out_ ABSL_GUARDED_BY(mu_) = 0;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status error_ ABSL_GUARDED_BY(mu_);
  int64_t processed_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t duplicates_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t errors_ ABSL_GUARDED_BY(mu_) = 0;
  // Live-record accounting: (expiry micros, records processed) per commit.
  std::deque<std::pair<int64_t, int64_t>> expiries_ ABSL_GUARDED_BY(mu_);
  int64_t processed_total_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t expired_total_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<Sample> samples_ ABSL_GUARDED_BY(mu_);
};

absl::StatusOr<LayoutReport> RunLayout(const BenchOptions& options,
                                       Layout layout, std::ostream* progress) {
  LayoutReport report;
  report.layout = layout;
  absl::StatusOr<util::TempDir> dir = util::TempDir::Create(
      absl::StrCat("idem_bench_", LayoutName(layout), "_"), options.dir);
  if (!dir.ok()) return dir.status();
  const std::string path = dir->Sub("store");
  if (options.keep) {
    dir->Keep();
    report.store_path = path;
  }

  const bool simulated = options.sim_messages_per_second > 0;
  const absl::Time start =
      absl::FromUnixSeconds(absl::ToUnixSeconds(absl::Now()));
  ManualClock manual(start);
  Clock* clock = simulated ? static_cast<Clock*>(&manual) : SystemClock();
  std::unique_ptr<rocksdb::Env> env =
      NewClockEnv(rocksdb::Env::Default(), clock);

  TargetOptions t;
  t.layout = layout;
  t.window = options.window;
  t.durability = options.durability;
  t.ack_durable = options.ack_durable;
  t.state_bytes = options.state_bytes;
  t.state_keys = options.state_keys;
  t.write_buffer_bytes = options.write_buffer_bytes;
  t.expiry_buckets = options.expiry_buckets;
  t.detect_conflicts = options.detect_conflicts;
  t.emit = options.emit;
  t.emit_bytes = options.emit_bytes;
  t.outbox_ack_every = options.outbox_ack_every;
  t.clock = clock;
  t.env = env.get();

  absl::StatusOr<std::unique_ptr<Target>> target = OpenTarget(path, t);
  if (!target.ok()) return target.status();
  LayoutRun run(options, clock, simulated ? &manual : nullptr, clock->Now(),
                target->get(), path, std::string(LayoutName(layout)), progress);
  if (absl::Status s = run.Run(); !s.ok()) return s;
  run.Report(report);

  absl::StatusOr<TargetCounters> c = (*target)->Counters();
  if (!c.ok()) return c.status();
  report.user_bytes = c->user_bytes;
  report.wal_bytes = c->wal_bytes;
  report.flush_bytes = c->flush_bytes;
  report.compaction_bytes = c->compaction_bytes;
  report.cumulative_wa = Ratio(c->written_bytes(), c->user_bytes);
  report.expired_dropped = c->expired_dropped;
  report.expired_dropped_whole = c->expired_dropped_whole;
  report.live_sst_bytes = c->live_sst_bytes;
  report.estimated_records = c->estimated_records;
  report.disk_bytes = util::DirectoryBytes(path);
  if (options.emit > 0) {
    absl::StatusOr<std::optional<OutboxFigures>> outbox = (*target)->Outbox();
    if (!outbox.ok()) return outbox.status();
    report.outbox = *outbox;
    // A self-check: every processed message emitted `emit` entries.
    const uint64_t expected = static_cast<uint64_t>(report.processed) *
                              static_cast<uint64_t>(options.emit);
    if (report.outbox.has_value() && report.outbox->emitted != expected) {
      return absl::InternalError(
          absl::StrCat("the engine reports ", report.outbox->emitted,
                       " outbox entries emitted; ", report.processed,
                       " processed messages emitting ", options.emit,
                       " each make ", expected));
    }
    if (options.outbox_ack_every == 0 && report.outbox.has_value()) {
      report.notes.push_back(
          absl::StrCat("outbox never acknowledged (--outbox_ack_every=0): ",
                       report.outbox->pending, " entries pending at the end"));
    }
  }
  std::optional<InternalFigures> internals = (*target)->Internals();
  if (internals.has_value()) {
    report.rocksdb_sum_wamp = internals->rocksdb_sum_wamp;
    report.memtable_bytes = internals->memtable_bytes;
    report.block_cache_usage = internals->block_cache_usage;
    report.table_readers_bytes = internals->table_readers_bytes;
  } else {
    report.notes.push_back(
        "the store's RocksDB figures (Sum W-Amp, memtable and block-cache "
        "usage) could not be read");
  }
  if (absl::Status s = (*target)->Close(); !s.ok()) return s;
  target->reset();

  report.logical_live_bytes =
      LogicalBytes(options, report.live_records, report.processed);
  report.space_amp = Ratio(report.live_sst_bytes, report.logical_live_bytes);

  if (options.lookups > 0) {
    std::vector<std::string> misses, hits;
    for (int64_t i = 0; i < options.lookups; ++i) {
      misses.push_back(
          IdFor(options.id_shape, options.seed, report.unique_ids + i));
    }
    // Live IDs: drawn uniformly from the distinct IDs of the last window.
    const int64_t live = std::min(report.live_records, report.unique_ids);
    if (live > 0) {
      std::mt19937_64 rng(options.seed);
      std::uniform_int_distribution<int64_t> pick(report.unique_ids - live,
                                                  report.unique_ids - 1);
      for (int64_t i = 0; i < options.lookups; ++i) {
        hits.push_back(IdFor(options.id_shape, options.seed, pick(rng)));
      }
    }
    absl::StatusOr<ReadCost> cost = MeasureReadCost(path, t, misses, hits);
    if (!cost.ok()) return cost.status();
    report.read_cost = *cost;
    report.table_readers_bytes = cost->table_readers_bytes;
  }
  if (report.live_records > 0) {
    const double live = static_cast<double>(report.live_records);
    report.index_filter_bytes_per_live_id =
        static_cast<double>(report.table_readers_bytes) / live;
    if (report.memtable_bytes.has_value()) {
      report.memory_per_live_id =
          static_cast<double>(*report.memtable_bytes +
                              report.table_readers_bytes) /
          live;
    }
  }
  if (!report.dedupe_errors.has_value()) {
    report.notes.push_back(
        "dedupe answers not checked (needs --threads=1 and a simulated "
        "clock)");
  }
  if (report.windows_covered < options.steady_windows + 1) {
    report.notes.push_back(absl::StrFormat(
        "no steady-state WA: the run covered %.1f windows, %d are needed",
        report.windows_covered, options.steady_windows + 1));
  }
  return report;
}

}  // namespace

absl::Status ValidateBenchOptions(const BenchOptions& o) {
  auto bad = [](auto&&... parts) {
    return absl::InvalidArgumentError(absl::StrCat(parts...));
  };
  if (o.layouts.empty()) return bad("--layout names no layout");
  if (o.messages < 0 || o.messages > kMaxMessages) {
    return bad("--messages must be in [0, ", kMaxMessages, "], got ",
               o.messages);
  }
  if (o.duration < absl::ZeroDuration() || o.duration > kMaxDuration) {
    return bad("--duration must be in [0, ", absl::FormatDuration(kMaxDuration),
               "], got ", absl::FormatDuration(o.duration));
  }
  if (o.messages == 0 && o.duration == absl::ZeroDuration()) {
    return bad(
        "set --messages or --duration (both are 0: the run would "
        "never end)");
  }
  if (o.state_bytes < 0 || o.state_bytes > (1 << 20)) {
    return bad("--state_bytes must be in [0, 1048576], got ", o.state_bytes);
  }
  if (o.state_keys < 1 || o.state_keys > kMaxStateKeys) {
    return bad("--state_keys must be in [1, ", kMaxStateKeys, "], got ",
               o.state_keys);
  }
  if (!(o.duplicate_rate >= 0 && o.duplicate_rate < 1)) {
    return bad("--duplicate_rate must be in [0, 1), got ", o.duplicate_rate);
  }
  if (o.duplicate_reach < 1 || o.duplicate_reach > kMaxDuplicateReach) {
    return bad("--duplicate_reach must be in [1, ", kMaxDuplicateReach,
               "], got ", o.duplicate_reach);
  }
  if (o.batch < 1 || o.batch > 100000) {
    return bad("--batch must be in [1, 100000], got ", o.batch);
  }
  if (o.threads < 1 || o.threads > 64) {
    return bad("--threads must be in [1, 64], got ", o.threads);
  }
  if (o.window < absl::Seconds(1) || o.window > kMaxWindow) {
    return bad("--window must be in [1s, ", absl::FormatDuration(kMaxWindow),
               "], got ", absl::FormatDuration(o.window));
  }
  if (!(o.sim_messages_per_second == 0 ||
        (o.sim_messages_per_second >= kMinSimRate &&
         o.sim_messages_per_second <= kMaxSimRate))) {
    return bad("--sim_messages_per_second must be 0 (real clock) or in [",
               kMinSimRate, ", ", kMaxSimRate, "], got ",
               o.sim_messages_per_second);
  }
  if (o.sample_every < absl::ZeroDuration() || o.sample_every > o.window) {
    return bad("--sample_every must be in [0, --window], got ",
               absl::FormatDuration(o.sample_every));
  }
  if (o.steady_windows < 1 || o.steady_windows > kMaxSteadyWindows) {
    return bad("--steady_windows must be in [1, ", kMaxSteadyWindows, "], got ",
               o.steady_windows);
  }
  if (o.lookups < 0 || o.lookups > 10000000) {
    return bad("--lookups must be in [0, 10000000], got ", o.lookups);
  }
  if (o.write_buffer_bytes < (size_t{64} << 10) ||
      o.write_buffer_bytes > (size_t{4} << 30)) {
    return bad("--write_buffer_mib must be in [0.0625, 4096], got ",
               static_cast<double>(o.write_buffer_bytes) / kMiB);
  }
  if (o.expiry_buckets < 0 || o.expiry_buckets > 64) {
    return bad("--expiry_buckets must be in [0, 64], got ", o.expiry_buckets);
  }
  if (o.emit < 0 || o.emit > 1000) {
    return bad("--emit must be in [0, 1000], got ", o.emit);
  }
  if (o.emit > 0) {
    for (Layout layout : o.layouts) {
      if (layout != Layout::kEngine) {
        return bad("--emit needs --layout=engine: the ", LayoutName(layout),
                   " layout has no outbox");
      }
    }
  }
  if (o.emit_bytes < 0 || o.emit_bytes > (1 << 20)) {
    return bad("--emit_bytes must be in [0, 1048576], got ", o.emit_bytes);
  }
  if (o.outbox_ack_every < 0 || o.outbox_ack_every > 1000000) {
    return bad("--outbox_ack_every must be in [0, 1000000], got ",
               o.outbox_ack_every);
  }
  return absl::OkStatus();
}

absl::StatusOr<BenchReport> RunBench(const BenchOptions& options,
                                     std::ostream* progress) {
  if (absl::Status s = ValidateBenchOptions(options); !s.ok()) return s;
  BenchReport report;
  report.options = options;
  report.date =
      absl::FormatTime("%Y-%m-%d %H:%M UTC", absl::Now(), absl::UTCTimeZone());
  for (Layout layout : options.layouts) {
    absl::StatusOr<LayoutReport> r = RunLayout(options, layout, progress);
    if (!r.ok()) {
      return absl::Status(r.status().code(),
                          absl::StrCat("layout ", LayoutName(layout), ": ",
                                       r.status().message()));
    }
    report.layouts.push_back(std::move(*r));
  }
  return report;
}

}  // namespace idem::bench
