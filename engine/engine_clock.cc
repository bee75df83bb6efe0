#include "engine/engine_clock.h"

#include <algorithm>
#include <exception>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "engine/user_code.h"

namespace idem {

EngineClock::EngineClock(Clock* clock, bool monotonic)
    : clock_(clock), monotonic_(monotonic) {}

absl::StatusOr<int64_t> EngineClock::NowMicros() {
  absl::Time now;
  if (absl::Status s = CallUserCode(
          "the clock",
          [&] {
            now = clock_->Now();
            return absl::OkStatus();
          },
          absl::StatusCode::kUnavailable);
      !s.ok()) {
    return absl::Status(s.code(),
                        absl::StrCat(s.message(), "; nothing was done"));
  }
  if (now == absl::InfiniteFuture() || now == absl::InfinitePast()) {
    return absl::FailedPreconditionError(
        absl::StrCat("the clock returned a non-finite time (",
                     absl::FormatTime(now, absl::UTCTimeZone()),
                     "); expiry needs a finite time, nothing was done"));
  }
  // ToUnixMicros saturates at the int64 range: such a time would compare
  // like an infinite one.
  const int64_t micros = absl::ToUnixMicros(now);
  if (micros == std::numeric_limits<int64_t>::max() ||
      micros == std::numeric_limits<int64_t>::min()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the clock returned a time outside the range of stored expiries (",
        absl::FormatTime(now, absl::UTCTimeZone()), "); nothing was done"));
  }
  if (!monotonic_) return micros;
  int64_t high = high_water_.load();
  while (micros > high && !high_water_.compare_exchange_weak(high, micros)) {
  }
  return std::max(micros, high);
}

}  // namespace idem
