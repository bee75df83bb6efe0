// idem::PrometheusConsumerCollector: its gauges follow each Update's
// stats: the partitions restoring between polls, and a lag series per
// partition whose log end is known, dropped once it is not assigned.

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "idem/kafka/consumer_stats.h"
#include "idem/prometheus/consumer_collector.h"
#include "prometheus/metric_family.h"
#include "prometheus/registry.h"

namespace idem {
namespace {

// The value of gauge `name`'s series with label partition=`partition` (any
// series if empty); -1 if there is none.
double GaugeValue(prometheus::Registry& registry, const std::string& name,
                  const std::string& partition = "") {
  for (const prometheus::MetricFamily& family : registry.Collect()) {
    if (family.name != name) continue;
    for (const prometheus::ClientMetric& metric : family.metric) {
      bool matches = partition.empty();
      for (const prometheus::ClientMetric::Label& label : metric.label) {
        if (label.name == "partition" && label.value == partition) {
          matches = true;
        }
      }
      if (matches) return metric.gauge.value;
    }
  }
  return -1;
}

kafka::PartitionLag Lag(int32_t partition, int64_t lag) {
  kafka::PartitionLag p;
  p.topic = "orders";
  p.partition = partition;
  p.lag = lag;
  return p;
}

TEST(PrometheusConsumerCollectorTest, RestoreAndLagGaugesFollowTheStats) {
  prometheus::Registry registry;
  auto collector = PrometheusConsumerCollector::Create(registry, {});
  ASSERT_TRUE(collector.ok()) << collector.status();
  EXPECT_EQ(GaugeValue(registry, "idem_kafka_partitions_restoring"), 0);

  kafka::ConsumerStats stats;
  stats.partitions_restoring = 2;
  stats.lag = {Lag(0, 7), Lag(1, -1)};  // partition 1's end is not known
  (*collector)->Update(stats);
  EXPECT_EQ(GaugeValue(registry, "idem_kafka_partitions_restoring"), 2);
  EXPECT_EQ(GaugeValue(registry, "idem_kafka_lag", "0"), 7);
  EXPECT_EQ(GaugeValue(registry, "idem_kafka_lag", "1"), -1);

  stats.partitions_restoring = 0;
  stats.lag = {Lag(1, 3)};  // partition 0 was revoked
  (*collector)->Update(stats);
  EXPECT_EQ(GaugeValue(registry, "idem_kafka_partitions_restoring"), 0);
  EXPECT_EQ(GaugeValue(registry, "idem_kafka_lag", "0"), -1);
  EXPECT_EQ(GaugeValue(registry, "idem_kafka_lag", "1"), 3);
}

}  // namespace
}  // namespace idem
