#include "engine/dedupe_policy.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/cord.h"
#include "engine/record.h"
#include "idem/message.h"

namespace idem {

absl::Status PermanentError(absl::Status status) {
  if (status.ok()) status = absl::UnknownError("permanent failure");
  status.SetPayload(kPermanentErrorPayload, absl::Cord("1"));
  return status;
}

bool IsPermanentError(const absl::Status& status) {
  return !status.ok() && status.GetPayload(kPermanentErrorPayload).has_value();
}

bool IsLateDuplicate(int64_t first_micros, int64_t expiry_micros,
                     int64_t now_micros) {
  if (first_micros == kUnknownFirstProcessed || expiry_micros <= first_micros) {
    return false;
  }
  // age / window > 4 / 5, in floating point: the spans may be near 2^63.
  const double age =
      static_cast<double>(now_micros) - static_cast<double>(first_micros);
  const double window =
      static_cast<double>(expiry_micros) - static_cast<double>(first_micros);
  return age * 5 > window * 4;
}

int RedeliveryAges::Bucket(int64_t age_micros) {
  const double millis = static_cast<double>(age_micros) / 1000.0;
  if (millis < 1) return 0;
  const int b = 1 + static_cast<int>(std::log2(millis) * kPerDoubling);
  return std::min(b, kBuckets - 1);
}

int64_t RedeliveryAges::UpperEdgeMicros(int b) {
  if (b == 0) return 1000;
  return static_cast<int64_t>(std::exp2(static_cast<double>(b) / kPerDoubling) *
                              1000.0);
}

void RedeliveryAges::Add(absl::Span<const int64_t> ages_micros) {
  if (ages_micros.empty()) return;
  absl::MutexLock lock(&mu_);
  for (int64_t age : ages_micros) {
    age = std::max<int64_t>(age, 0);
    ++counts_[Bucket(age)];
    ++total_;
    max_micros_ = std::max(max_micros_, age);
  }
}

absl::Duration RedeliveryAges::Percentile(double q) const {
  const uint64_t rank = std::max<uint64_t>(
      1, static_cast<uint64_t>(std::ceil(q * static_cast<double>(total_))));
  uint64_t seen = 0;
  for (int b = 0; b < kBuckets; ++b) {
    seen += counts_[b];
    if (seen >= rank) {
      return absl::Microseconds(std::min(UpperEdgeMicros(b), max_micros_));
    }
  }
  return absl::Microseconds(max_micros_);
}

RedeliveryAges::Summary RedeliveryAges::Get() const {
  absl::MutexLock lock(&mu_);
  Summary summary;
  if (total_ == 0) return summary;
  summary.p50 = Percentile(0.5);
  summary.p99 = Percentile(0.99);
  summary.max = absl::Microseconds(max_micros_);
  return summary;
}

}  // namespace idem
