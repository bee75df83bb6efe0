// idem::TumblingWindows: per-key sums (counts, by default) in tumbling
// event-time windows of each partition, each (key, window) emitted once,
// through the outbox, when its window closes (emit-final), on the durable
// timers of idem/timers.h (docs/state.md, "Windows"). A window closes once
// its partition's stream time reaches its end plus the grace period: then
// one timer fires for the whole window of the partition, so a key that
// goes silent still has its last window emitted, and so does a partition
// whose stream time another key moves on. An event that arrives after its
// window closed is late: Add says so and counts nothing (report it, drop
// it or send it elsewhere).
//
// A window's sums live in the partition's state (PartitionTxn, so they move
// with ExportPartition), added with blind merges (concurrent handlers never
// conflict on them); closing one scans its keys, emits each with its sum
// and deletes them, in the same write as the timer's deletion.
//
// Const methods may be called concurrently; the object is immutable after
// Create.

#ifndef IDEM_WINDOWS_H_
#define IDEM_WINDOWS_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "idem/message.h"
#include "idem/timers.h"
#include "idem/txn.h"

namespace idem {

struct TumblingWindowOptions {
  // The windows' length: windows are [k * size, (k + 1) * size) since the
  // Unix epoch, in whole microseconds. Must be > 0 and finite.
  absl::Duration size = absl::Minutes(1);
  // How long after its end a window still accepts events: it closes once
  // the partition's stream time reaches end + grace. Must be >= 0 and
  // finite. Default: none.
  absl::Duration grace = absl::ZeroDuration();
  // Names this set of windows: the prefix of its state and timer keys, so
  // several sets can share a partition. 1 to 64 bytes, no '/'.
  std::string name = "windows";
  // Where a closed window's sums are emitted (Txn::EmitWithHeaders): key,
  // the window's key; value, the sum in decimal; headers
  // "idem.window.start" and "idem.window.end" (microseconds since the
  // epoch, decimal). 1 to kMaxSourceBytes bytes.
  std::string destination;
};

// What TumblingWindows::Add did with an event.
enum class WindowAdd {
  kAccepted,  // added to its window's sum
  kLate,      // its window has closed: nothing was added
};

class TumblingWindows {
 public:
  // kInvalidArgument naming the field for bad options (a size <= 0, a
  // negative grace, a bad name or destination).
  static absl::StatusOr<TumblingWindows> Create(TumblingWindowOptions options);

  // Adds `amount` to `key`'s sum in the window of message.event_time, on
  // the message's partition, and sets the window's closing timer (an
  // event-time timer; setting it again for each event of the window moves
  // nothing). kLate, adding nothing, if the window's closing time is at or
  // below the partition's stream time (Txn::SetTimer refused it).
  // kInvalidArgument for a message without a source or an event time;
  // other errors as Txn::SetTimer's and Txn::Merge's. Call from the
  // message's handler with its Txn.
  absl::StatusOr<WindowAdd> Add(const Message& message, Txn& txn,
                                std::string_view key, int64_t amount = 1) const;

  // For the TimerHandler given to Engine::FireTimers (or to a consumer's
  // timer_handler): if `fire` closes one of these windows, emits each of
  // its keys with its sum, deletes them, and returns true; returns false
  // for a timer that is not one of these windows' (handle it otherwise).
  // A storage error as Txn::Scan's.
  absl::StatusOr<bool> Close(const TimerFire& fire, Txn& txn) const;

 private:
  explicit TumblingWindows(TumblingWindowOptions options)
      : options_(std::move(options)) {}

  // The window start of `event_time`, in microseconds.
  int64_t WindowStart(absl::Time event_time) const;
  // The state prefix (within the partition) and timer key of the window
  // starting at `start_micros`.
  std::string WindowKey(int64_t start_micros) const;

  TumblingWindowOptions options_;
};

}  // namespace idem

#endif  // IDEM_WINDOWS_H_
