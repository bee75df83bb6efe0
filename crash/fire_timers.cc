#include "crash/fire_timers.h"

#include <optional>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "crash/stream.h"
#include "idem/timers.h"

namespace idem::crash {

absl::Status FireDue(Engine& engine, const Workload& workload,
                     int32_t partition) {
  // Timers per FireTimers call (it commits them in rounds of its own).
  constexpr size_t kTimersPerCall = 1024;
  auto handler = [&workload](const TimerFire& fire, Txn& txn) {
    return workload.FireTimer(fire, txn);
  };
  while (true) {
    absl::StatusOr<size_t> fired =
        engine.FireTimers(kStreamSource, partition, TimeDomain::kEvent,
                          absl::InfiniteFuture(), kTimersPerCall, handler);
    if (!fired.ok()) {
      return absl::Status(
          fired.status().code(),
          absl::StrCat("firing the timers of partition ", partition, ": ",
                       fired.status().message()));
    }
    if (*fired < kTimersPerCall) return absl::OkStatus();
  }
}

absl::Status CheckNoneDue(Engine& engine, int32_t partition) {
  absl::StatusOr<std::optional<TimerFire>> next =
      engine.NextTimer(kStreamSource, partition, TimeDomain::kEvent);
  if (!next.ok()) return next.status();
  absl::StatusOr<absl::Time> stream_time =
      engine.StreamTime(kStreamSource, partition);
  if (!stream_time.ok()) return stream_time.status();
  if (next->has_value() && (*next)->fire_at <= *stream_time) {
    return absl::InternalError(absl::StrCat(
        "timer ", absl::CEscape((*next)->timer_key), " of partition ",
        partition, " is due (stream time ", absl::FormatTime(*stream_time),
        ") but FireTimers left it"));
  }
  return absl::OkStatus();
}

}  // namespace idem::crash
