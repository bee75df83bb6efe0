#include "tools/idem_bench.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <string_view>
#include <system_error>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "cli/idemctl.h"
#include "engine/record.h"
#include "idem/clock.h"
#include "rocksdb/env.h"
#include "util/directory.h"
#include "util/json_writer.h"
#include "util/latency_histogram.h"
#include "util/temp_dir.h"

namespace idem::tools {
namespace {

using util::JsonWriter;

constexpr double kMiB = 1024.0 * 1024.0;
constexpr absl::Duration kProgressEvery = absl::Seconds(2);

// Bounds of BenchOptions beyond the obvious ones (documented in
// tools/idem_bench.h and in idem-bench's flags).
constexpr int64_t kMaxMessages = 10'000'000'000;  // ~a day at 100k msg/s
constexpr absl::Duration kMaxDuration = absl::Hours(7 * 24);
constexpr int64_t kMaxStateKeys = 1'000'000'000'000;
// The workload keeps 8 bytes per reachable ID: at most 800 MB.
constexpr int64_t kMaxDuplicateReach = 100'000'000;
constexpr absl::Duration kMaxWindow = absl::Hours(365 * 24);
constexpr double kMinSimRate = 0.01;  // keeps clock micros within int64
constexpr double kMaxSimRate = 1e9;
constexpr int kMaxSteadyWindows = 1000;

std::string ParentDir(const BenchOptions& options) {
  return options.dir.empty() ? util::DefaultTempParent() : options.dir;
}

double Ratio(uint64_t num, uint64_t den) {
  return den == 0 ? 0.0
                  : static_cast<double>(num) / static_cast<double>(den);
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
    util::LatencyHistogram batch, message;
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
    if (n <= 0 || (options_.duration > absl::ZeroDuration() &&
                   WallSecondsLocked() >=
                       absl::ToDoubleSeconds(options_.duration))) {
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
      next_sample_ += sample_every_ * ((now - next_sample_) / sample_every_ + 1);
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
  std::vector<std::pair<util::LatencyHistogram, util::LatencyHistogram>> latencies_;

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
  const absl::Time start = absl::FromUnixSeconds(absl::ToUnixSeconds(absl::Now()));
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
  t.clock = clock;
  t.env = env.get();

  absl::StatusOr<std::unique_ptr<Target>> target = OpenTarget(path, t);
  if (!target.ok()) return target.status();
  LayoutRun run(options, clock, simulated ? &manual : nullptr,
                clock->Now(), target->get(), path,
                std::string(LayoutName(layout)), progress);
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
      misses.push_back(IdFor(options.id_shape, options.seed,
                             report.unique_ids + i));
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

// ---- output ----

// Writes an optional figure: null when absent.
template <typename T>
void WriteOptional(JsonWriter& j, const std::optional<T>& v) {
  if (!v.has_value()) {
    j.Null();
  } else if constexpr (std::is_floating_point_v<T>) {
    j.Number(*v);
  } else {
    j.Int(static_cast<int64_t>(*v));
  }
}

const char* ShapeName(IdShape s) {
  return s == IdShape::kKafka ? "kafka" : "uuid";
}
const char* DurabilityName(Durability d) {
  return d == Durability::kSync ? "sync" : "buffered";
}

void JsonLatency(JsonWriter& j, std::string_view key,
                 const util::LatencySummary& l) {
  j.Key(key);
  j.BeginObject();
  j.Key("count");
  j.Int(l.count);
  j.Key("mean_us");
  j.Number(l.mean);
  j.Key("p50_us");
  j.Number(l.p50);
  j.Key("p99_us");
  j.Number(l.p99);
  j.Key("p999_us");
  j.Number(l.p999);
  j.Key("max_us");
  j.Number(l.max);
  j.EndObject();
}

void JsonLookup(JsonWriter& j, std::string_view key, const LookupCost& c) {
  j.Key(key);
  j.BeginObject();
  j.Key("lookups");
  j.Int(c.lookups);
  j.Key("found");
  j.Int(c.found);
  j.Key("filter_probes");
  j.Number(c.filter_probes);
  j.Key("filter_negatives");
  j.Number(c.filter_negatives);
  j.Key("data_blocks_read");
  j.Number(c.data_blocks_read);
  j.Key("micros");
  j.Number(c.micros);
  j.EndObject();
}

void PrintJson(const BenchReport& report, std::ostream& out) {
  const BenchOptions& o = report.options;
  JsonWriter j;
  j.BeginObject();
  j.Key("date");
  j.String(report.date);
  j.Key("config");
  j.BeginObject();
  j.Key("messages");
  j.Int(o.messages);
  j.Key("duration_seconds");
  j.Number(absl::ToDoubleSeconds(o.duration));
  j.Key("id_shape");
  j.String(ShapeName(o.id_shape));
  j.Key("state_bytes");
  j.Int(o.state_bytes);
  j.Key("duplicate_rate");
  j.Number(o.duplicate_rate);
  j.Key("duplicate_reach");
  j.Int(o.duplicate_reach);
  j.Key("batch");
  j.Int(o.batch);
  j.Key("durability");
  j.String(DurabilityName(o.durability));
  j.Key("ack_durable");
  j.Bool(o.ack_durable);
  j.Key("threads");
  j.Int(o.threads);
  j.Key("window_seconds");
  j.Number(absl::ToDoubleSeconds(o.window));
  j.Key("sim_messages_per_second");
  j.Number(o.sim_messages_per_second);
  j.Key("write_buffer_bytes");
  j.Int(static_cast<int64_t>(o.write_buffer_bytes));
  j.Key("expiry_buckets");
  j.Int(o.expiry_buckets);
  j.Key("seed");
  j.Int(static_cast<int64_t>(o.seed));
  j.EndObject();
  j.Key("layouts");
  j.BeginArray();
  for (const LayoutReport& r : report.layouts) {
    j.BeginObject();
    j.Key("layout");
    j.String(LayoutName(r.layout));
    j.Key("messages");
    j.Int(r.messages);
    j.Key("unique_ids");
    j.Int(r.unique_ids);
    j.Key("redeliveries");
    j.Int(r.redeliveries);
    j.Key("expired_redeliveries");
    j.Int(r.expired_redeliveries);
    j.Key("processed");
    j.Int(r.processed);
    j.Key("duplicates");
    j.Int(r.duplicates);
    j.Key("dedupe_errors");
    WriteOptional(j, r.dedupe_errors);
    j.Key("wall_seconds");
    j.Number(r.wall_seconds);
    j.Key("messages_per_second");
    j.Number(r.messages_per_second);
    JsonLatency(j, "batch_latency", r.batch_latency);
    JsonLatency(j, "message_latency", r.message_latency);
    j.Key("clock_seconds");
    j.Number(r.clock_seconds);
    j.Key("windows_covered");
    j.Number(r.windows_covered);
    j.Key("user_bytes");
    j.Int(static_cast<int64_t>(r.user_bytes));
    j.Key("wal_bytes");
    j.Int(static_cast<int64_t>(r.wal_bytes));
    j.Key("flush_bytes");
    j.Int(static_cast<int64_t>(r.flush_bytes));
    j.Key("compaction_bytes");
    j.Int(static_cast<int64_t>(r.compaction_bytes));
    j.Key("write_amplification");
    j.Number(r.cumulative_wa);
    j.Key("steady_state_write_amplification");
    WriteOptional(j, r.steady_wa);
    j.Key("write_amplification_per_window");
    j.BeginArray();
    for (double w : r.wa_per_window) j.Number(w);
    j.EndArray();
    j.Key("rocksdb_sum_w_amp");
    WriteOptional(j, r.rocksdb_sum_wamp);
    j.Key("expired_dropped");
    j.Int(static_cast<int64_t>(r.expired_dropped));
    j.Key("expired_dropped_whole");
    j.Int(static_cast<int64_t>(r.expired_dropped_whole));
    j.Key("live_records");
    j.Int(r.live_records);
    j.Key("estimated_records");
    j.Int(static_cast<int64_t>(r.estimated_records));
    j.Key("logical_live_bytes");
    j.Int(static_cast<int64_t>(r.logical_live_bytes));
    j.Key("live_sst_bytes");
    j.Int(static_cast<int64_t>(r.live_sst_bytes));
    j.Key("disk_bytes");
    j.Int(static_cast<int64_t>(r.disk_bytes));
    j.Key("space_amplification");
    j.Number(r.space_amp);
    j.Key("steady_state_space_amplification");
    WriteOptional(j, r.steady_space_amp);
    j.Key("steady_state_disk_bytes_mean");
    WriteOptional(j, r.steady_disk_bytes_mean);
    j.Key("steady_state_disk_bytes_max");
    WriteOptional(j, r.steady_disk_bytes_max);
    j.Key("memtable_bytes");
    WriteOptional(j, r.memtable_bytes);
    j.Key("block_cache_usage");
    WriteOptional(j, r.block_cache_usage);
    j.Key("table_readers_bytes");
    j.Int(static_cast<int64_t>(r.table_readers_bytes));
    j.Key("index_filter_bytes_per_live_id");
    j.Number(r.index_filter_bytes_per_live_id);
    j.Key("memory_per_live_id_bytes");
    WriteOptional(j, r.memory_per_live_id);
    j.Key("lookup");
    if (r.read_cost.has_value()) {
      j.BeginObject();
      JsonLookup(j, "miss", r.read_cost->miss);
      JsonLookup(j, "hit", r.read_cost->hit);
      j.EndObject();
    } else {
      j.Null();
    }
    if (!r.store_path.empty()) {
      j.Key("store_path");
      j.String(r.store_path);
    }
    j.Key("notes");
    j.BeginArray();
    for (const std::string& n : r.notes) j.String(n);
    j.EndArray();
    j.EndObject();
  }
  j.EndArray();
  j.EndObject();
  out << j.str() << "\n";
}

std::string Fixed(const std::optional<double>& v, int decimals) {
  if (!v.has_value()) return "n/a";
  return absl::StrFormat("%.*f", decimals, *v);
}

std::string Bytes(double b) {
  if (b >= kMiB) return absl::StrFormat("%.1f MiB", b / kMiB);
  if (b >= 1024) return absl::StrFormat("%.1f KiB", b / 1024);
  return absl::StrFormat("%.0f B", b);
}

void PrintText(const BenchReport& report, std::ostream& out) {
  const BenchOptions& o = report.options;
  out << absl::StrFormat(
      "idem-bench %s: %s per layout, ids %s, %.0f%% redeliveries "
      "reaching %d ids back, batch %d, %s%s, %d thread(s), window %s, %s, "
      "memtable %s%s\n",
      report.date,
      absl::StrCat(o.messages > 0 ? absl::StrCat(o.messages, " messages")
                                  : std::string(),
                   o.messages > 0 && o.duration > absl::ZeroDuration()
                       ? " or "
                       : "",
                   o.duration > absl::ZeroDuration()
                       ? absl::StrCat(absl::FormatDuration(o.duration),
                                      " wall time")
                       : std::string()),
      ShapeName(o.id_shape),
      o.duplicate_rate * 100, o.duplicate_reach, o.batch,
      DurabilityName(o.durability),
      o.durability == Durability::kBuffered
          ? (o.ack_durable ? " (sync per batch)" : " (never synced)")
          : "",
      o.threads, absl::FormatDuration(o.window),
      o.sim_messages_per_second > 0
          ? absl::StrFormat("simulated clock at %g msg/s",
                            o.sim_messages_per_second)
          : std::string("real clock"),
      Bytes(static_cast<double>(o.write_buffer_bytes)),
      o.expiry_buckets > 0
          ? absl::StrCat(", engine with expiry_buckets=", o.expiry_buckets)
          : std::string());
  for (const LayoutReport& r : report.layouts) {
    out << absl::StrFormat("\n[%s]\n", LayoutName(r.layout));
    out << absl::StrFormat(
        "  stream        %d deliveries, %d ids, %d redeliveries (%d after "
        "their window)\n"
        "  outcomes      %d processed, %d duplicates, dedupe errors %s\n",
        r.messages, r.unique_ids, r.redeliveries, r.expired_redeliveries,
        r.processed, r.duplicates,
        r.dedupe_errors.has_value() ? absl::StrCat(*r.dedupe_errors)
                                    : "not checked");
    out << absl::StrFormat(
        "  throughput    %.0f msg/s (%.2f s wall)\n"
        "  latency       batch p50 %.0f us, p99 %.0f us, p99.9 %.0f us; per "
        "message p50 %.2f us, p99 %.2f us, p99.9 %.2f us\n",
        r.messages_per_second, r.wall_seconds, r.batch_latency.p50,
        r.batch_latency.p99, r.batch_latency.p999, r.message_latency.p50,
        r.message_latency.p99, r.message_latency.p999);
    out << absl::StrFormat(
        "  clock         %s covered = %.2f windows\n"
        "  write amp     cumulative %.2f = (WAL %s + flush %s + compaction "
        "%s) / user %s\n"
        "                steady state (last %d windows) %s; RocksDB Sum "
        "W-Amp %s\n"
        "                per window: %s\n",
        absl::FormatDuration(absl::Seconds(std::round(r.clock_seconds))),
        r.windows_covered, r.cumulative_wa,
        Bytes(r.wal_bytes), Bytes(r.flush_bytes), Bytes(r.compaction_bytes),
        Bytes(r.user_bytes), o.steady_windows, Fixed(r.steady_wa, 2),
        Fixed(r.rocksdb_sum_wamp, 1),
        absl::StrJoin(r.wa_per_window, " ", [](std::string* s, double w) {
          absl::StrAppend(s, absl::StrFormat("%.2f", w));
        }));
    out << absl::StrFormat(
        "  expiry        %d records dropped by the filter, %d in whole "
        "files/families\n"
        "  space         %d live records (RocksDB estimate %d), logical %s, "
        "live SST %s, disk %s, space amp %.2f at the end\n"
        "                steady state (last %d windows): space amp %s, disk "
        "mean %s, max %s\n",
        r.expired_dropped, r.expired_dropped_whole, r.live_records,
        r.estimated_records, Bytes(r.logical_live_bytes),
        Bytes(r.live_sst_bytes), Bytes(r.disk_bytes), r.space_amp,
        o.steady_windows, Fixed(r.steady_space_amp, 2),
        r.steady_disk_bytes_mean.has_value()
            ? Bytes(*r.steady_disk_bytes_mean)
            : "n/a",
        r.steady_disk_bytes_max.has_value()
            ? Bytes(static_cast<double>(*r.steady_disk_bytes_max))
            : "n/a");
    out << absl::StrFormat(
        "  memory        memtables %s, index+filters %s (%.2f bytes per live "
        "id), block cache %s; memtables+index+filters %s bytes per live id\n",
        r.memtable_bytes.has_value()
            ? Bytes(static_cast<double>(*r.memtable_bytes))
            : "n/a",
        Bytes(r.table_readers_bytes), r.index_filter_bytes_per_live_id,
        r.block_cache_usage.has_value()
            ? Bytes(static_cast<double>(*r.block_cache_usage))
            : "n/a",
        Fixed(r.memory_per_live_id, 1));
    if (r.read_cost.has_value()) {
      auto line = [&out](const char* name, const LookupCost& c) {
        out << absl::StrFormat(
            "  lookup %s %.2f filter probes (%.2f negative), %.3f data "
            "blocks read, %.1f us (%d/%d found)\n",
            name, c.filter_probes, c.filter_negatives, c.data_blocks_read,
            c.micros, c.found, c.lookups);
      };
      line("new id ", r.read_cost->miss);
      line("live id", r.read_cost->hit);
    }
    for (const std::string& n : r.notes) out << "  note          " << n << "\n";
    if (!r.store_path.empty()) out << "  store         " << r.store_path << "\n";
  }
  if (report.layouts.size() > 1) {
    out << "\n| layout | msg/s | batch p99 us | WA cumulative | WA steady | "
           "RocksDB Sum W-Amp | space amp (steady) | disk (steady mean) | "
           "index+filter B/live id | new-id "
           "lookup: probes / blocks / us | expired (filter + whole) |\n"
           "|---|---|---|---|---|---|---|---|---|---|---|\n";
    for (const LayoutReport& r : report.layouts) {
      out << absl::StrFormat(
          "| %s | %.0f | %.0f | %.2f | %s | %s | %s | %s | %.2f | %s | %d "
          "|\n",
          LayoutName(r.layout), r.messages_per_second, r.batch_latency.p99,
          r.cumulative_wa, Fixed(r.steady_wa, 2),
          Fixed(r.rocksdb_sum_wamp, 1),
          r.steady_space_amp.has_value() ? Fixed(r.steady_space_amp, 2)
                                         : Fixed(r.space_amp, 2),
          r.steady_disk_bytes_mean.has_value()
              ? Bytes(*r.steady_disk_bytes_mean)
              : Bytes(r.disk_bytes),
          r.index_filter_bytes_per_live_id,
          r.read_cost.has_value()
              ? absl::StrFormat("%.2f / %.3f / %.1f",
                                r.read_cost->miss.filter_probes,
                                r.read_cost->miss.data_blocks_read,
                                r.read_cost->miss.micros)
              : std::string("n/a"),
          r.expired_dropped + r.expired_dropped_whole);
    }
  }
}

bool FindOnPath(const std::string& name) {
  const char* path = std::getenv("PATH");
  if (path == nullptr) return false;
  for (absl::string_view dir : absl::StrSplit(path, ':', absl::SkipEmpty())) {
    const std::string candidate = absl::StrCat(dir, "/", name);
    if (access(candidate.c_str(), X_OK) == 0) return true;
  }
  return false;
}

std::string GnuplotQuote(const std::string& s) {
  return absl::StrCat("'", absl::StrReplaceAll(s, {{"'", "''"}}), "'");
}

std::string ShellQuote(const std::string& s) {
  return absl::StrCat("'", absl::StrReplaceAll(s, {{"'", "'\\''"}}), "'");
}

// Checks, before the run rather than after it, that the file named by `flag`
// can be written: opens it for appending (creating it, then removing it
// again, if it did not exist). kInvalidArgument naming the flag if not.
absl::Status CheckOutputFile(absl::string_view flag, const std::string& path) {
  std::error_code ec;
  const bool existed = std::filesystem::exists(path, ec);
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC,
                        0644);
  if (fd < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        flag, ": cannot write ", path, ": ", std::strerror(errno)));
  }
  ::close(fd);
  if (!existed) std::filesystem::remove(path, ec);  // best effort
  return absl::OkStatus();
}

// Checks that the stores' parent directory exists and is writable.
absl::Status CheckStoreParent(const BenchOptions& options) {
  const std::string parent = ParentDir(options);
  const std::string flag =
      options.dir.empty() ? "--dir (default $TMPDIR or /tmp)" : "--dir";
  std::error_code ec;
  if (!std::filesystem::is_directory(parent, ec)) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, ": ", parent, " is not a directory"));
  }
  if (::access(parent.c_str(), W_OK | X_OK) != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        flag, ": cannot create stores in ", parent, ": ", std::strerror(errno)));
  }
  return absl::OkStatus();
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
    return bad("set --messages or --duration (both are 0: the run would "
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
    return bad("--steady_windows must be in [1, ", kMaxSteadyWindows,
               "], got ", o.steady_windows);
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

void PrintBenchReport(const BenchReport& report, bool json,
                      std::ostream& out) {
  if (json) {
    PrintJson(report, out);
  } else {
    PrintText(report, out);
  }
}

absl::Status WriteBenchCsv(const BenchReport& report,
                           const std::string& path) {
  std::ofstream f(path);
  if (!f) return absl::UnavailableError(absl::StrCat("cannot write ", path));
  f << "layout,clock_seconds,wall_seconds,messages,disk_bytes,live_sst_bytes,"
       "live_records,estimated_records,user_bytes,written_bytes,"
       "logical_bytes,cumulative_wa,window_wa,expired_dropped,"
       "expired_dropped_whole\n";
  for (const LayoutReport& r : report.layouts) {
    for (const Sample& s : r.samples) {
      f << absl::StrFormat(
          "%s,%.3f,%.3f,%d,%d,%d,%d,%d,%d,%d,%d,%.4f,%s,%d,%d\n",
          LayoutName(r.layout), s.clock_seconds, s.wall_seconds, s.messages,
          s.disk_bytes, s.live_sst_bytes, s.live_records, s.estimated_records,
          s.user_bytes, s.written_bytes, s.logical_bytes, s.cumulative_wa,
          s.window_wa.has_value() ? absl::StrFormat("%.4f", *s.window_wa)
                                  : "",
          s.expired_dropped, s.expired_dropped_whole);
    }
  }
  f.close();
  if (!f) return absl::UnavailableError(absl::StrCat("error writing ", path));
  return absl::OkStatus();
}

absl::Status WriteBenchPlot(const BenchReport& report,
                            const std::string& path) {
  if (!FindOnPath("gnuplot")) {
    return absl::UnavailableError(
        "gnuplot is not on $PATH; skipping the plot (install it with "
        "'apt-get install gnuplot-nox')");
  }
  absl::StatusOr<util::TempDir> plot_dir =
      util::TempDir::Create("idem_bench_plot_");
  if (!plot_dir.ok()) return plot_dir.status();
  const std::string& dir = plot_dir->path();
  const double window_s = absl::ToDoubleSeconds(report.options.window);
  std::vector<std::string> disk_plots, wa_plots;
  // Colour-blind-safe (Okabe-Ito) colours, one per layout.
  static constexpr const char* kColors[] = {"#9400d3", "#009e73", "#56b4e9",
                                            "#e69f00", "#d55e00", "#000000"};
  size_t color = 0;
  for (const LayoutReport& r : report.layouts) {
    const std::string data =
        absl::StrCat(dir, "/", LayoutName(r.layout), ".dat");
    std::ofstream f(data);
    for (const Sample& s : r.samples) {
      f << absl::StrFormat(
          "%.4f %.4f %.4f %s\n", s.clock_seconds / window_s,
          static_cast<double>(s.disk_bytes) / kMiB, s.cumulative_wa,
          s.window_wa.has_value() ? absl::StrFormat("%.4f", *s.window_wa)
                                  : "NaN");
    }
    f.close();
    const std::string name(LayoutName(r.layout));
    disk_plots.push_back(absl::StrFormat(
        "%s using 1:2 with lines lw 2 lc rgb '%s' title '%s'",
        GnuplotQuote(data), kColors[color % 6], name));
    wa_plots.push_back(absl::StrFormat(
        "%s using 1:3 with lines lw 2 lc rgb '%s' title '%s cumulative'",
        GnuplotQuote(data), kColors[color % 6], name));
    wa_plots.push_back(absl::StrFormat(
        "%s using 1:4 with lines lw 1 dt 2 lc rgb '%s' title '%s last window'",
        GnuplotQuote(data), kColors[color % 6], name));
    ++color;
  }
  const BenchOptions& o = report.options;
  const std::string script = absl::StrCat(
      "set terminal png size 1100,800 font 'DejaVuSans,9'\n",
      "set output ", GnuplotQuote(path), "\n",
      "set multiplot layout 2,1 title ",
      GnuplotQuote(absl::StrFormat(
          "idem-bench %s: window %s, %g msg/s %s, batch %d, %s", report.date,
          absl::FormatDuration(o.window), o.sim_messages_per_second,
          o.sim_messages_per_second > 0 ? "simulated" : "(real clock)",
          o.batch, DurabilityName(o.durability))),
      "\n", "set grid\nset key outside right top\nset lmargin at screen 0.07\n"
      "set rmargin at screen 0.78\n",
      "set xlabel 'time (dedupe windows)'\n",
      "set ylabel 'disk (MiB)'\n", "plot ", absl::StrJoin(disk_plots, ", "),
      "\n", "set ylabel 'write amplification'\nset yrange [0:*]\n",
      "plot ", absl::StrJoin(wa_plots, ", "), "\n", "unset multiplot\n");
  const std::string script_path = dir + "/plot.gp";
  {
    std::ofstream f(script_path);
    f << script;
    if (!f) return absl::UnavailableError("cannot write the gnuplot script");
  }
  const int rc = std::system(absl::StrCat("gnuplot ", ShellQuote(script_path))
                                 .c_str());
  if (rc != 0) {
    return absl::InternalError(
        absl::StrCat("gnuplot failed (exit status ", rc, ")"));
  }
  return absl::OkStatus();
}

int RunBenchTool(const BenchToolArgs& args, std::ostream& out,
                 std::ostream& err) {
  BenchOptions options = args.options;
  auto usage = [&err](const absl::Status& s) {
    err << "idem-bench: " << s.message()
        << "\nRun 'idem-bench --help' for usage.\n";
    return cli::kExitUsage;
  };
  options.layouts.clear();
  if (args.layout == "all") {
    options.layouts = {Layout::kEngine, Layout::kLeveled, Layout::kUniversal,
                       Layout::kFifo, Layout::kBuckets};
  } else {
    for (absl::string_view name :
         absl::StrSplit(args.layout, ',', absl::SkipEmpty())) {
      absl::StatusOr<Layout> layout =
          ParseLayout(std::string_view(name.data(), name.size()));
      if (!layout.ok()) {
        return usage(absl::InvalidArgumentError(
            absl::StrCat("--layout: ", layout.status().message())));
      }
      options.layouts.push_back(*layout);
    }
  }
  if (args.id_shape == "uuid") {
    options.id_shape = IdShape::kUuid;
  } else if (args.id_shape == "kafka") {
    options.id_shape = IdShape::kKafka;
  } else {
    return usage(absl::InvalidArgumentError(absl::StrCat(
        "--id_shape must be uuid or kafka, got '", args.id_shape, "'")));
  }
  if (args.durability == "sync") {
    options.durability = Durability::kSync;
  } else if (args.durability == "buffered") {
    options.durability = Durability::kBuffered;
  } else {
    return usage(absl::InvalidArgumentError(absl::StrCat(
        "--durability must be sync or buffered, got '", args.durability,
        "'")));
  }
  if (!(args.write_buffer_mib > 0) || args.write_buffer_mib > 4096) {
    return usage(absl::InvalidArgumentError(absl::StrCat(
        "--write_buffer_mib must be in [0.0625, 4096], got ",
        args.write_buffer_mib)));
  }
  options.write_buffer_bytes =
      static_cast<size_t>(args.write_buffer_mib * kMiB);
  if (absl::Status s = ValidateBenchOptions(options); !s.ok()) {
    return usage(s);
  }
  // Output paths are checked now, not after a run of minutes.
  if (absl::Status s = CheckStoreParent(options); !s.ok()) return usage(s);
  if (!args.csv.empty()) {
    if (absl::Status s = CheckOutputFile("--csv", args.csv); !s.ok()) {
      return usage(s);
    }
  }
  if (!args.plot.empty()) {
    if (absl::Status s = CheckOutputFile("--plot", args.plot); !s.ok()) {
      return usage(s);
    }
  }
  absl::StatusOr<BenchReport> report =
      RunBench(options, args.progress ? &err : nullptr);
  if (!report.ok()) {
    err << "idem-bench: " << report.status().ToString() << "\n";
    return cli::kExitFailure;
  }
  PrintBenchReport(*report, args.json, out);
  int rc = cli::kExitOk;
  if (!args.csv.empty()) {
    if (absl::Status s = WriteBenchCsv(*report, args.csv); !s.ok()) {
      err << "idem-bench: " << s.message() << "\n";
      rc = cli::kExitFailure;
    }
  }
  if (!args.plot.empty()) {
    absl::Status s = WriteBenchPlot(*report, args.plot);
    if (absl::IsUnavailable(s)) {
      err << "idem-bench: " << s.message() << "\n";
    } else if (!s.ok()) {
      err << "idem-bench: " << s.message() << "\n";
      rc = cli::kExitFailure;
    }
  }
  for (const LayoutReport& r : report->layouts) {
    if (r.dedupe_errors.value_or(0) > 0) {
      err << "idem-bench: layout " << LayoutName(r.layout) << " gave "
          << *r.dedupe_errors << " wrong dedupe answers\n";
      rc = cli::kExitFailure;
    }
  }
  return rc;
}

}  // namespace idem::tools
