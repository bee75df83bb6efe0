// idem::PrometheusCollector puts an engine's figures (Engine::GetStats) into
// the application's own prometheus::Registry (prometheus-cpp), under these
// names:
//
//   idem_messages_total{outcome="processed|duplicate|failed|conflict"}  counter
//   idem_expired_dropped_total                                          counter
//   idem_commit_duration_seconds        histogram, one observation per commit
//                                       (Stats::commit_durations)
//   idem_write_amplification, idem_live_sst_bytes, idem_memtable_bytes,
//   idem_outbox_pending                                                 gauges
//
// (outcome="conflict" counts Stats::conflicts: it stays 0 unless
// Options::detect_conflicts is set.)
//
// prometheus-cpp 1.0's Registry holds only the families it builds itself,
// so the collector creates these families in the registry and copies the
// engine's figures into them when Update is called, or every refresh_period
// from a thread of its own. Counters and the histogram move by the growth
// of the engine's figures since the previous Update, so they never go
// backwards; a figure that shrank (another engine's, or one reopened) counts
// as a restart from zero. Serve the registry as usual, e.g. with
// prometheus::Exposer::RegisterCollectable.
//
// Several collectors may share one registry (families are shared by name)
// when their `labels` differ; each collector's series carry its labels.
// Destroying a collector removes its series from the registry.
//
// Requires the optional idem::prometheus library (built when prometheus-cpp
// is found). Safe for concurrent access from multiple threads without
// external synchronization. The engine and the registry are borrowed and
// must outlive the collector.

#ifndef IDEM_PROMETHEUS_COLLECTOR_H_
#define IDEM_PROMETHEUS_COLLECTOR_H_

#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "idem/engine.h"
#include "prometheus/labels.h"
#include "prometheus/registry.h"

namespace idem {

struct PrometheusCollectorOptions {
  // Labels on every series of this collector, e.g. {{"store", "payments"}}
  // when one registry holds several engines. Names must be valid Prometheus
  // label names other than "outcome" and "le". Default: none.
  prometheus::Labels labels;
  // > 0: a thread of the collector calls Update this often (its errors are
  // dropped; the figures then stay as they were). Zero: only explicit
  // Update calls refresh the figures. Must be >= 0 and finite.
  // Default: zero.
  absl::Duration refresh_period = absl::ZeroDuration();
};

class PrometheusCollector {
 public:
  // Registers the families and this collector's series (at zero) in
  // `registry`, then calls Update once (its failure is not Create's: a
  // store that is closed for now still gets its series). kInvalidArgument
  // for a null engine, a bad label, a bad refresh_period or a family of one
  // of these names but another type in the registry; kAlreadyExists if
  // another collector there has the same labels. On failure the registry
  // keeps none of this collector's series.
  static absl::StatusOr<std::unique_ptr<PrometheusCollector>> Create(
      Engine* engine, prometheus::Registry& registry,
      const PrometheusCollectorOptions& options = {});

  PrometheusCollector(const PrometheusCollector&) = delete;
  PrometheusCollector& operator=(const PrometheusCollector&) = delete;
  // Stops the refresh thread and removes this collector's series.
  virtual ~PrometheusCollector() = default;

  // Copies the engine's current figures into the registry. Returns
  // Engine::GetStats' error, leaving every series as it was.
  virtual absl::Status Update() = 0;

 protected:
  PrometheusCollector() = default;
};

}  // namespace idem

#endif  // IDEM_PROMETHEUS_COLLECTOR_H_
