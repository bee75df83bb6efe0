#include "bench/idem_bench/workload.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace idem::bench {
namespace {

uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

}  // namespace

std::string IdFor(IdShape shape, uint64_t seed, int64_t index) {
  if (shape == IdShape::kKafka) {
    return absl::StrCat(kBenchTopic, "-", index % kBenchPartitions, "-",
                        index / kBenchPartitions);
  }
  const uint64_t a =
      SplitMix64(seed * 0x100000001b3ULL ^ static_cast<uint64_t>(index));
  const uint64_t b = SplitMix64(a);
  // A version-4, variant-1 UUID made of the two words.
  return absl::StrFormat("%08x-%04x-4%03x-%04x-%012x", a >> 32,
                         (a >> 16) & 0xffff, a & 0xfff,
                         0x8000 | ((b >> 48) & 0x3fff), b & 0xffffffffffffULL);
}

Workload::Workload(const WorkloadOptions& options)
    : options_(options),
      rng_(options.seed),
      redeliver_(options.duplicate_rate),
      last_processed_(static_cast<size_t>(options.duplicate_reach), 0) {}

void Workload::NextBatch(int count, absl::Time now,
                         std::vector<Delivery>* out) {
  const int64_t now_us = absl::ToUnixMicros(now);
  const int64_t window_us = absl::ToInt64Microseconds(options_.window);
  const int64_t reach = options_.duplicate_reach;
  for (int i = 0; i < count; ++i) {
    Delivery d;
    int64_t index = next_;
    if (next_ > 0 && redeliver_(rng_)) {
      std::uniform_int_distribution<int64_t> pick(
          std::max<int64_t>(0, next_ - reach), next_ - 1);
      index = pick(rng_);
      d.redelivery = true;
      ++redeliveries_;
    } else {
      ++next_;
    }
    int64_t& last = last_processed_[static_cast<size_t>(index % reach)];
    if (d.redelivery && now_us < last + window_us) {
      d.expect_duplicate = true;
    } else {
      if (d.redelivery) ++expired_redeliveries_;
      last = now_us;  // processed now: its record lives one window
    }
    d.id = IdFor(options_.shape, options_.seed, index);
    if (options_.shape == IdShape::kKafka) {
      d.partition = static_cast<int32_t>(index % kBenchPartitions);
      d.offset = index / kBenchPartitions;
    }
    out->push_back(std::move(d));
  }
}

}  // namespace idem::bench
