// Running idem-bench (bench/idem_bench/idem_bench.h): each layout's run on a
// store of its own (the delivering threads, the shared stream, the time
// series and the figures of its report). The bounds of BenchOptions are in
// options_check.cc.

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

// Write amplification over each whole window of clock time covered by
// `samples` (0 for a window without user writes), in order.
std::vector<double> WaPerWindow(const std::vector<Sample>& samples,
                                double window_s) {
  std::vector<double> wa;
  const Sample& last = samples.back();
  for (int i = 0; (i + 1) * window_s <= last.clock_seconds + 1e-9; ++i) {
    const Sample* a = SampleAtOrAfter(samples, i * window_s);
    const Sample* b = SampleAtOrAfter(samples, (i + 1) * window_s);
    if (a == nullptr || b == nullptr) break;
    wa.push_back(WaBetween(*a, *b).value_or(0));
  }
  return wa;
}

// The steady-state figures of `r`: write amplification, and the mean space
// amplification and disk bytes, over the samples of the last `span_s`
// seconds of clock time. REQUIRES: `samples` is not empty.
void AddSteadyState(const std::vector<Sample>& samples, double span_s,
                    LayoutReport& r) {
  const Sample& last = samples.back();
  const Sample* a = SampleAtOrAfter(samples, last.clock_seconds - span_s);
  if (a == nullptr) return;
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
    r.wa_per_window = WaPerWindow(samples_, window_s);
    if (r.windows_covered >= options_.steady_windows + 1) {
      AddSteadyState(samples_, options_.steady_windows * window_s, r);
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

// The clock of one layout's run: a ManualClock the run advances (simulated)
// or the system clock, and a RocksDB Env on the same clock. Not movable:
// `clock` may point at `manual`.
struct RunClock {
  explicit RunClock(const BenchOptions& options)
      : manual(absl::FromUnixSeconds(absl::ToUnixSeconds(absl::Now()))),
        simulated(options.sim_messages_per_second > 0 ? &manual : nullptr),
        clock(simulated != nullptr ? static_cast<Clock*>(&manual)
                                   : SystemClock()),
        env(NewClockEnv(rocksdb::Env::Default(), clock)) {}
  RunClock(const RunClock&) = delete;
  RunClock& operator=(const RunClock&) = delete;

  ManualClock manual;
  ManualClock* const simulated;  // &manual, or null on the real clock
  Clock* const clock;
  const std::unique_ptr<rocksdb::Env> env;
};

// The options of `layout`'s target, on `clock`.
TargetOptions MakeTargetOptions(const BenchOptions& options, Layout layout,
                                const RunClock& clock) {
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
  t.clock = clock.clock;
  t.env = clock.env.get();
  return t;
}

// The target's byte counters at the end of the run and the store's size on
// disk at `path`.
absl::Status AddCounters(Target& target, const std::string& path,
                         LayoutReport& report) {
  absl::StatusOr<TargetCounters> c = target.Counters();
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
  return absl::OkStatus();
}

// The outbox's figures (options.emit > 0), checked against the messages
// processed: kInternal unless each emitted `emit` entries.
absl::Status AddOutbox(const BenchOptions& options, Target& target,
                       LayoutReport& report) {
  absl::StatusOr<std::optional<OutboxFigures>> outbox = target.Outbox();
  if (!outbox.ok()) return outbox.status();
  report.outbox = *outbox;
  if (!report.outbox.has_value()) return absl::OkStatus();
  const uint64_t expected = static_cast<uint64_t>(report.processed) *
                            static_cast<uint64_t>(options.emit);
  if (report.outbox->emitted != expected) {
    return absl::InternalError(
        absl::StrCat("the engine reports ", report.outbox->emitted,
                     " outbox entries emitted; ", report.processed,
                     " processed messages emitting ", options.emit,
                     " each make ", expected));
  }
  if (options.outbox_ack_every == 0) {
    report.notes.push_back(
        absl::StrCat("outbox never acknowledged (--outbox_ack_every=0): ",
                     report.outbox->pending, " entries pending at the end"));
  }
  return absl::OkStatus();
}

// RocksDB's own figures, or a note that the target could not give them.
void AddInternals(Target& target, LayoutReport& report) {
  std::optional<InternalFigures> internals = target.Internals();
  if (!internals.has_value()) {
    report.notes.push_back(
        "the store's RocksDB figures (Sum W-Amp, memtable and block-cache "
        "usage) could not be read");
    return;
  }
  report.rocksdb_sum_wamp = internals->rocksdb_sum_wamp;
  report.memtable_bytes = internals->memtable_bytes;
  report.block_cache_usage = internals->block_cache_usage;
  report.table_readers_bytes = internals->table_readers_bytes;
}

// Opens the layout's target at `path`, delivers the stream through it and
// fills what the run and the open target tell; the target is closed (and
// its store free to reopen) on return.
absl::Status RunOnTarget(const BenchOptions& options, const TargetOptions& t,
                         const std::string& path, const RunClock& clock,
                         std::ostream* progress, LayoutReport& report) {
  absl::StatusOr<std::unique_ptr<Target>> target = OpenTarget(path, t);
  if (!target.ok()) return target.status();
  LayoutRun run(options, clock.clock, clock.simulated, clock.clock->Now(),
                target->get(), path, std::string(LayoutName(t.layout)),
                progress);
  if (absl::Status s = run.Run(); !s.ok()) return s;
  run.Report(report);
  if (absl::Status s = AddCounters(**target, path, report); !s.ok()) return s;
  if (options.emit > 0) {
    if (absl::Status s = AddOutbox(options, **target, report); !s.ok()) {
      return s;
    }
  }
  AddInternals(**target, report);
  return (*target)->Close();
}

// `options.lookups` IDs the stream never delivered.
std::vector<std::string> NewIds(const BenchOptions& options,
                                const LayoutReport& report) {
  std::vector<std::string> ids;
  for (int64_t i = 0; i < options.lookups; ++i) {
    ids.push_back(IdFor(options.id_shape, options.seed, report.unique_ids + i));
  }
  return ids;
}

// `options.lookups` live IDs, drawn uniformly from the distinct IDs of the
// last window; none if no record is live.
std::vector<std::string> LiveIds(const BenchOptions& options,
                                 const LayoutReport& report) {
  std::vector<std::string> ids;
  const int64_t live = std::min(report.live_records, report.unique_ids);
  if (live <= 0) return ids;
  std::mt19937_64 rng(options.seed);
  std::uniform_int_distribution<int64_t> pick(report.unique_ids - live,
                                              report.unique_ids - 1);
  for (int64_t i = 0; i < options.lookups; ++i) {
    ids.push_back(IdFor(options.id_shape, options.seed, pick(rng)));
  }
  return ids;
}

// The cost of looking up new and live IDs in the closed store at `path`.
absl::Status AddReadCost(const BenchOptions& options, const TargetOptions& t,
                         const std::string& path, LayoutReport& report) {
  absl::StatusOr<ReadCost> cost = MeasureReadCost(
      path, t, NewIds(options, report), LiveIds(options, report));
  if (!cost.ok()) return cost.status();
  report.read_cost = *cost;
  report.table_readers_bytes = cost->table_readers_bytes;
  return absl::OkStatus();
}

// Space amplification: the SST bytes against the live records' logical
// size.
void AddSpaceAmplification(const BenchOptions& options, LayoutReport& report) {
  report.logical_live_bytes =
      LogicalBytes(options, report.live_records, report.processed);
  report.space_amp = Ratio(report.live_sst_bytes, report.logical_live_bytes);
}

// Index, filter and memtable bytes per live record (none without one).
void AddMemoryPerLiveId(LayoutReport& report) {
  if (report.live_records <= 0) return;
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

// Notes on the figures the run could not give.
void AddCaveats(const BenchOptions& options, LayoutReport& report) {
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
}

// Runs `layout` on a fresh store under options.dir (kept, and its path
// reported, with options.keep) and measures it.
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
  const RunClock clock(options);
  const TargetOptions t = MakeTargetOptions(options, layout, clock);
  if (absl::Status s = RunOnTarget(options, t, path, clock, progress, report);
      !s.ok()) {
    return s;
  }
  AddSpaceAmplification(options, report);
  if (options.lookups > 0) {
    if (absl::Status s = AddReadCost(options, t, path, report); !s.ok()) {
      return s;
    }
  }
  AddMemoryPerLiveId(report);
  AddCaveats(options, report);
  return report;
}

}  // namespace

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
