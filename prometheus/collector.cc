#include "idem/prometheus/collector.h"

#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "idem/stats.h"
#include "prometheus/collector_series.h"
#include "prometheus/counter.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"

namespace idem {
namespace {

using metrics::AddSeries;
using metrics::FollowedCounter;
using metrics::RegisterFamily;
using metrics::Series;
using metrics::With;
using prometheus::Counter;
using prometheus::Gauge;
using prometheus::Histogram;

absl::Status CheckOptions(const PrometheusCollectorOptions& options) {
  if (absl::Status s = metrics::CheckOwnLabels(
          options.labels, {"outcome", "le"}, "PrometheusCollectorOptions");
      !s.ok()) {
    return s;
  }
  if (options.refresh_period < absl::ZeroDuration() ||
      options.refresh_period == absl::InfiniteDuration()) {
    return absl::InvalidArgumentError(
        "PrometheusCollectorOptions: refresh_period must be >= 0 and finite");
  }
  return absl::OkStatus();
}

class CollectorImpl final : public PrometheusCollector {
 public:
  explicit CollectorImpl(Engine* engine) : engine_(engine) {}

  ~CollectorImpl() override {
    stop_.Notify();
    if (refresher_.joinable()) refresher_.join();
  }

  absl::Status Init(prometheus::Registry& registry,
                    const PrometheusCollectorOptions& options) {
    if (absl::Status s = CheckOptions(options); !s.ok()) return s;
    absl::MutexLock lock(&mu_);
    const prometheus::Labels& labels = options.labels;

    auto messages = RegisterFamily(
        prometheus::BuildCounter(), "idem_messages_total",
        "Messages the engine returned an outcome for, by outcome", registry);
    if (!messages.ok()) return messages.status();
    const std::pair<const char*, FollowedCounter*> outcomes[] = {
        {"processed", &processed_},
        {"duplicate", &duplicates_},
        {"failed", &failed_},
        {"conflict", &conflicts_}};
    for (const auto& [outcome, counter] : outcomes) {
      auto series = AddSeries(**messages, With(labels, "outcome", outcome));
      if (!series.ok()) return series.status();
      counter->series = *std::move(series);
    }
    if (absl::Status s = AddCounter(registry, "idem_handler_reruns_total",
                                    "Handler calls made again because a "
                                    "concurrent commit changed a state key "
                                    "the handler had read",
                                    labels, handler_reruns_);
        !s.ok()) {
      return s;
    }
    if (absl::Status s = AddCounter(registry, "idem_timers_fired_total",
                                    "Durable timers whose fire committed "
                                    "(Engine::FireTimers)",
                                    labels, timers_fired_);
        !s.ok()) {
      return s;
    }
    if (absl::Status s = AddCounter(registry, "idem_timers_dead_lettered_total",
                                    "Timers whose handler failed permanently: "
                                    "deleted without their effects",
                                    labels, timers_dead_lettered_);
        !s.ok()) {
      return s;
    }
    if (absl::Status s = AddCounter(registry, "idem_expired_dropped_total",
                                    "Dedupe records the TTL compaction "
                                    "filter removed",
                                    labels, expired_dropped_);
        !s.ok()) {
      return s;
    }

    const std::pair<const char*, const char*> gauges[] = {
        {"idem_write_amplification",
         "Bytes RocksDB wrote (WAL, flushes, compactions) per byte the "
         "engine committed, since the engine opened"},
        {"idem_live_sst_bytes", "Total size of the store's live SST files"},
        {"idem_memtable_bytes", "Memory held by the store's memtables"},
        {"idem_outbox_pending",
         "Outbox entries committed and not yet acknowledged"}};
    Series<Gauge>* const gauge_series[] = {&write_amplification_,
                                           &live_sst_bytes_, &memtable_bytes_,
                                           &outbox_pending_};
    for (size_t i = 0; i < std::size(gauges); ++i) {
      auto family = RegisterFamily(prometheus::BuildGauge(), gauges[i].first,
                                   gauges[i].second, registry);
      if (!family.ok()) return family.status();
      auto series = AddSeries(**family, labels);
      if (!series.ok()) return series.status();
      *gauge_series[i] = *std::move(series);
    }

    auto commits = RegisterFamily(
        prometheus::BuildHistogram(), "idem_commit_duration_seconds",
        "Time of each commit's write (its WAL sync included under kSync)",
        registry);
    if (!commits.ok()) return commits.status();
    auto commit_series =
        AddSeries(**commits, labels,
                  Histogram::BucketBoundaries(kCommitDurationBounds.begin(),
                                              kCommitDurationBounds.end()));
    if (!commit_series.ok()) return commit_series.status();
    commit_durations_ = *std::move(commit_series);

    if (options.refresh_period > absl::ZeroDuration()) {
      refresher_ = std::thread([this, period = options.refresh_period] {
        while (!stop_.WaitForNotificationWithTimeout(period)) {
          // Nowhere to report it: the figures stay as they were.
          Update().IgnoreError();
        }
      });
    }
    return absl::OkStatus();
  }

  absl::Status Update() override {
    absl::StatusOr<Stats> stats = engine_->GetStats();
    if (!stats.ok()) return stats.status();
    absl::MutexLock lock(&mu_);
    processed_.Follow(static_cast<double>(stats->processed));
    duplicates_.Follow(static_cast<double>(stats->duplicates));
    failed_.Follow(static_cast<double>(stats->failed));
    conflicts_.Follow(static_cast<double>(stats->conflicts));
    handler_reruns_.Follow(static_cast<double>(stats->handler_reruns));
    expired_dropped_.Follow(static_cast<double>(stats->expired_dropped));
    timers_fired_.Follow(static_cast<double>(stats->timers_fired));
    timers_dead_lettered_.Follow(
        static_cast<double>(stats->timers_dead_lettered));
    write_amplification_->Set(stats->write_amplification);
    live_sst_bytes_->Set(static_cast<double>(stats->live_sst_bytes));
    memtable_bytes_->Set(static_cast<double>(stats->memtable_bytes));
    outbox_pending_->Set(static_cast<double>(stats->outbox_pending));
    ObserveCommits(stats->commit_durations);
    return absl::OkStatus();
  }

 private:
  absl::Status AddCounter(prometheus::Registry& registry,
                          const std::string& name, const std::string& help,
                          const prometheus::Labels& labels,
                          FollowedCounter& counter) {
    auto family =
        RegisterFamily(prometheus::BuildCounter(), name, help, registry);
    if (!family.ok()) return family.status();
    auto series = AddSeries(**family, labels);
    if (!series.ok()) return series.status();
    counter.series = *std::move(series);
    return absl::OkStatus();
  }

  // Observes the commits since the last Update (all of `now` if any figure
  // went back: another engine's).
  void ObserveCommits(const CommitDurations& now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    bool restarted = now.sum_seconds < last_commits_.sum_seconds;
    for (size_t i = 0; i < now.counts.size(); ++i) {
      restarted = restarted || now.counts[i] < last_commits_.counts[i];
    }
    const CommitDurations& base = restarted ? CommitDurations() : last_commits_;
    std::vector<double> increments(now.counts.size());
    for (size_t i = 0; i < now.counts.size(); ++i) {
      increments[i] = static_cast<double>(now.counts[i] - base.counts[i]);
    }
    commit_durations_->ObserveMultiple(increments,
                                       now.sum_seconds - base.sum_seconds);
    last_commits_ = now;
  }

  Engine* const engine_;
  absl::Mutex mu_;
  FollowedCounter processed_ ABSL_GUARDED_BY(mu_);
  FollowedCounter duplicates_ ABSL_GUARDED_BY(mu_);
  FollowedCounter failed_ ABSL_GUARDED_BY(mu_);
  FollowedCounter conflicts_ ABSL_GUARDED_BY(mu_);
  FollowedCounter handler_reruns_ ABSL_GUARDED_BY(mu_);
  FollowedCounter timers_fired_ ABSL_GUARDED_BY(mu_);
  FollowedCounter timers_dead_lettered_ ABSL_GUARDED_BY(mu_);
  FollowedCounter expired_dropped_ ABSL_GUARDED_BY(mu_);
  Series<Gauge> write_amplification_ ABSL_GUARDED_BY(mu_);
  Series<Gauge> live_sst_bytes_ ABSL_GUARDED_BY(mu_);
  Series<Gauge> memtable_bytes_ ABSL_GUARDED_BY(mu_);
  Series<Gauge> outbox_pending_ ABSL_GUARDED_BY(mu_);
  Series<Histogram> commit_durations_ ABSL_GUARDED_BY(mu_);
  CommitDurations last_commits_ ABSL_GUARDED_BY(mu_);
  // Stops the refresh thread; joined before the series go.
  absl::Notification stop_;
  std::thread refresher_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<PrometheusCollector>>
PrometheusCollector::Create(Engine* engine, prometheus::Registry& registry,
                            const PrometheusCollectorOptions& options) {
  if (engine == nullptr) {
    return absl::InvalidArgumentError("PrometheusCollector: engine is null");
  }
  auto collector = std::make_unique<CollectorImpl>(engine);
  if (absl::Status s = collector->Init(registry, options); !s.ok()) return s;
  // A store closed for now still gets its series; its figures come later.
  collector->Update().IgnoreError();
  return collector;
}

}  // namespace idem
