#include "engine/latency_histogram.h"

#include <algorithm>
#include <cmath>

namespace idem {

size_t LatencyHistogram::Bucket(double micros) {
  if (!(micros > kMin)) return 0;
  const double i = std::ceil(std::log(micros / kMin) / std::log(kGrowth));
  return std::min(kBuckets - 1, static_cast<size_t>(i));
}

void LatencyHistogram::Add(double micros) {
  ++count_;
  sum_ += micros;
  max_ = std::max(max_, micros);
  counts_[Bucket(micros)]++;
}

void LatencyHistogram::Merge(const LatencyHistogram& other) {
  count_ += other.count_;
  sum_ += other.sum_;
  max_ = std::max(max_, other.max_);
  for (size_t i = 0; i < kBuckets; ++i) counts_[i] += other.counts_[i];
}

int64_t LatencyHistogram::CountAtMost(double micros) const {
  int64_t n = 0;
  for (size_t i = 0; i <= Bucket(micros); ++i) n += counts_[i];
  return n;
}

double LatencyHistogram::Percentile(double q) const {
  const int64_t rank = std::max<int64_t>(
      1, static_cast<int64_t>(std::ceil(q * static_cast<double>(count_))));
  int64_t seen = 0;
  for (size_t i = 0; i < kBuckets; ++i) {
    seen += counts_[i];
    if (seen >= rank) {
      return std::min(max_, kMin * std::pow(kGrowth, static_cast<double>(i)));
    }
  }
  return max_;
}

LatencySummary LatencyHistogram::Summary() const {
  LatencySummary s;
  s.count = count_;
  if (count_ == 0) return s;
  s.mean = sum_ / static_cast<double>(count_);
  s.max = max_;
  s.p50 = Percentile(0.50);
  s.p99 = Percentile(0.99);
  s.p999 = Percentile(0.999);
  return s;
}

}  // namespace idem
