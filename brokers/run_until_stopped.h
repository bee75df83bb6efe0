// RunUntilStopped is the Run of every broker adapter's Consumer: it calls
// `poll` until `stop` is set; a kUnavailable error, of the poll or of its
// relay (BatchReport::outbox_error: a lost connection, which the next poll
// reconnects), or a kResourceExhausted of its relay (a broker out of
// memory, which frees some as its consumers catch up; the entry stays in
// the outbox), is followed by `backoff` and polling goes on.
// Returns OK after stop, or the first other error. Thread-compatible;
// `stop` may be set from any thread.

#ifndef IDEM_BROKERS_RUN_UNTIL_STOPPED_H_
#define IDEM_BROKERS_RUN_UNTIL_STOPPED_H_

#include <atomic>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/time/clock.h"
#include "idem/brokers/delivery_loop.h"

namespace idem::brokers {

inline absl::Status RunUntilStopped(
    absl::FunctionRef<absl::StatusOr<BatchReport>()> poll,
    const std::atomic<bool>& stop, absl::Duration backoff) {
  while (!stop.load(std::memory_order_relaxed)) {
    absl::StatusOr<BatchReport> report = poll();
    const absl::Status status =
        report.ok() ? report->outbox_error : report.status();
    if (status.ok()) continue;
    const bool relay_waits = report.ok() && absl::IsResourceExhausted(status);
    if (!absl::IsUnavailable(status) && !relay_waits) return status;
    absl::SleepFor(backoff);
  }
  return absl::OkStatus();
}

}  // namespace idem::brokers

#endif  // IDEM_BROKERS_RUN_UNTIL_STOPPED_H_
