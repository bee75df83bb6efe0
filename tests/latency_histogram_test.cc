// LatencyHistogram: count, mean and max exact; a percentile is the
// nearest-rank one, at most 1% above the exact value and never above the
// max; merging gives what adding everything to one would.

#include "engine/latency_histogram.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace idem {
namespace {

// The exact nearest-rank percentile: the ceil(q * n)-th smallest value.
double ExactPercentile(std::vector<double> values, double q) {
  std::sort(values.begin(), values.end());
  const size_t rank =
      static_cast<size_t>(std::ceil(q * static_cast<double>(values.size())));
  return values[std::max<size_t>(rank, 1) - 1];
}

TEST(LatencyHistogramTest, EmptyHistogramReportsZeros) {
  LatencyHistogram h;
  const LatencySummary s = h.Summary();
  EXPECT_EQ(s.count, 0);
  EXPECT_EQ(s.mean, 0);
  EXPECT_EQ(s.p99, 0);
  EXPECT_EQ(s.max, 0);
  EXPECT_EQ(h.Percentile(0.5), 0);
}

TEST(LatencyHistogramTest, PercentilesAreWithinOnePercentAboveTheExactOnes) {
  std::mt19937_64 rng(7);
  std::lognormal_distribution<double> latency(4.0, 1.5);  // ~55 us median
  std::vector<double> values;
  LatencyHistogram h;
  for (int i = 0; i < 20000; ++i) {
    values.push_back(latency(rng));
    h.Add(values.back());
  }
  for (double q : {0.01, 0.5, 0.9, 0.99, 0.999, 1.0}) {
    const double exact = ExactPercentile(values, q);
    EXPECT_GE(h.Percentile(q), exact) << q;
    EXPECT_LE(h.Percentile(q), exact * 1.01) << q;
  }
  const LatencySummary s = h.Summary();
  EXPECT_EQ(s.count, 20000);
  EXPECT_DOUBLE_EQ(s.max, *std::max_element(values.begin(), values.end()));
  double sum = 0;
  for (double v : values) sum += v;
  EXPECT_NEAR(s.mean, sum / 20000, 1e-9 * sum);
  EXPECT_EQ(s.p50, h.Percentile(0.5));
  EXPECT_EQ(s.p99, h.Percentile(0.99));
  EXPECT_EQ(s.p999, h.Percentile(0.999));
}

TEST(LatencyHistogramTest, PercentileNeverExceedsTheMax) {
  LatencyHistogram h;
  h.Add(100.3);
  EXPECT_EQ(h.Percentile(0.5), 100.3);
  EXPECT_EQ(h.Percentile(1.0), 100.3);
}

TEST(LatencyHistogramTest, MergedHistogramEqualsOneFedEverything) {
  LatencyHistogram a, b, all;
  for (int i = 1; i <= 100; ++i) {
    (i % 3 == 0 ? a : b).Add(i * 1.5);
    all.Add(i * 1.5);
  }
  a.Merge(b);
  const LatencySummary merged = a.Summary(), expected = all.Summary();
  EXPECT_EQ(merged.count, expected.count);
  EXPECT_DOUBLE_EQ(merged.mean, expected.mean);
  EXPECT_EQ(merged.p50, expected.p50);
  EXPECT_EQ(merged.p99, expected.p99);
  EXPECT_EQ(merged.max, expected.max);
}

}  // namespace
}  // namespace idem
