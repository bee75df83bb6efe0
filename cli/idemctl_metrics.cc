// idem-ctl metrics: the store's figures as idem::PrometheusCollector
// (idem/prometheus/collector.h) registers them, in Prometheus' text
// exposition format, or as JSON with --json: the whole store's (a sharded
// store's summed), or with --shard=N that shard's, labelled shard="N".
// Without prometheus-cpp
// (IDEM_HAVE_PROMETHEUS off) the subcommand fails before opening the store.

#include <optional>
#include <ostream>

#include "cli/idemctl_request.h"

#if IDEM_HAVE_PROMETHEUS
#include <cmath>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "idem/prometheus/collector.h"
#include "prometheus/metric_family.h"
#include "prometheus/registry.h"
#include "prometheus/text_serializer.h"
#include "util/json_writer.h"
#endif

namespace idem::cli::idemctl {

#if IDEM_HAVE_PROMETHEUS
namespace {

const char* TypeName(prometheus::MetricType type) {
  switch (type) {
    case prometheus::MetricType::Counter:
      return "counter";
    case prometheus::MetricType::Gauge:
      return "gauge";
    case prometheus::MetricType::Histogram:
      return "histogram";
    case prometheus::MetricType::Summary:
      return "summary";
    default:
      return "untyped";
  }
}

// {"metrics":[{"name":...,"type":...,"help":...,"samples":[{"labels":{...},
// "value":N} or, for a histogram, {"labels":{...},"count":N,"sum":N,
// "buckets":[{"le":N,"count":N},...]}]}]} with cumulative bucket counts, the
// last bucket's "le" null (+Inf).
void WriteJson(const std::vector<prometheus::MetricFamily>& families,
               std::ostream& out) {
  util::JsonWriter j;
  j.BeginObject();
  j.Key("metrics");
  j.BeginArray();
  for (const prometheus::MetricFamily& family : families) {
    j.BeginObject();
    j.Field("name", family.name);
    j.Field("type", TypeName(family.type));
    j.Field("help", family.help);
    j.Key("samples");
    j.BeginArray();
    for (const prometheus::ClientMetric& m : family.metric) {
      j.BeginObject();
      j.Key("labels");
      j.BeginObject();
      for (const prometheus::ClientMetric::Label& label : m.label) {
        j.Field(label.name, label.value);
      }
      j.EndObject();
      switch (family.type) {
        case prometheus::MetricType::Counter:
          j.Field("value", m.counter.value);
          break;
        case prometheus::MetricType::Histogram:
          j.Field("count", m.histogram.sample_count);
          j.Field("sum", m.histogram.sample_sum);
          j.Key("buckets");
          j.BeginArray();
          for (const auto& bucket : m.histogram.bucket) {
            j.BeginObject();
            j.Key("le");
            if (std::isinf(bucket.upper_bound)) {
              j.Null();
            } else {
              j.Number(bucket.upper_bound);
            }
            j.Field("count", bucket.cumulative_count);
            j.EndObject();
          }
          j.EndArray();
          break;
        default:
          j.Field("value", m.gauge.value);
          break;
      }
      j.EndObject();
    }
    j.EndArray();
    j.EndObject();
  }
  j.EndArray();
  j.EndObject();
  out << j.str() << "\n";
}

}  // namespace

std::optional<int> PrepareMetrics(Request&, std::ostream&) {
  return std::nullopt;
}

int RunMetrics(Engine& engine, const Request& r, std::ostream& out,
               std::ostream& err) {
  prometheus::Registry registry;
  // One shard's series carry its number.
  PrometheusCollectorOptions options;
  if (r.shard.has_value()) options.labels = {{"shard", absl::StrCat(*r.shard)}};
  absl::StatusOr<std::unique_ptr<PrometheusCollector>> collector =
      PrometheusCollector::Create(&Target(engine, r), registry, options);
  if (!collector.ok()) return Fail(err, "collecting", collector.status());
  if (absl::Status s = (*collector)->Update(); !s.ok()) {
    return Fail(err, "reading stats", s);
  }
  const std::vector<prometheus::MetricFamily> families = registry.Collect();
  if (r.args.json) {
    WriteJson(families, out);
  } else {
    prometheus::TextSerializer().Serialize(out, families);
  }
  return kExitOk;
}

#else  // !IDEM_HAVE_PROMETHEUS

std::optional<int> PrepareMetrics(Request&, std::ostream& err) {
  return Fail(err, "metrics",
              absl::UnimplementedError(
                  "this idem-ctl was built without prometheus-cpp "
                  "(IDEM_WITH_PROMETHEUS, Debian: prometheus-cpp-dev)"));
}

int RunMetrics(Engine&, const Request&, std::ostream&, std::ostream&) {
  return kExitStoreFailure;  // PrepareMetrics stops it first
}

#endif  // IDEM_HAVE_PROMETHEUS

}  // namespace idem::cli::idemctl
