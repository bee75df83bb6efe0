// Windowed aggregation on durable event-time timers (docs/state.md,
// "Windows"): per-key aggregates in tumbling, hopping and session windows
// of each partition, each (key, window) emitted once, through the outbox,
// when its window closes (emit-final).
//
// Every event is added in its message's handler (Add, AddOperand), into the
// state of the message's partition (PartitionTxn, so open windows move with
// ExportPartition and ImportPartition), with a blind Txn::Merge by the
// options' `aggregation` operator. Each window has an event-time timer
// (Txn::SetTimer) at its end plus the grace period (a session: its last
// event plus the gap plus the grace period); when the partition's
// stream time reaches it, the timer fires (Engine::FireTimers, or a
// consumer's timer_handler) and Close emits the window's aggregates and
// deletes them, in the same write as the timer's deletion: exactly once
// across crashes, with the same message IDs if a fire runs again.
//
// Tumbling and hopping windows close per partition: one timer per window
// per partition, whatever key moved the stream time, so a key that goes
// silent still has its last window emitted. Session windows have a timer
// per (key, session) of the partition, which fires on the partition's
// stream time too: a silent key's session closes when other keys move time
// on.
//
// Late events: an event whose window has closed (its end plus grace is at
// or below the partition's stream time, Txn::stream_time) adds nothing. Add
// reports it (WindowAdd::kLate) and the event is dropped, or, with
// `late_destination` set, also emitted there, in the handler's commit: key,
// the event's key; value, its amount as the window would have emitted it
// (see "Emitted values"); headers "idem.window.start" and
// "idem.window.end" of the window it missed (one message per missed window)
// and "idem.event.time" (all microseconds since the epoch, decimal).
//
// Emitted values (the options' `aggregation`): for MergeOp::kAddInt64
// (the default: counts with the default amount 1, else sums), kMaxInt64 and
// kMinInt64, the int64 in decimal; for kAppend, the appended bytes as they
// were folded (in commit order; a merged session's parts in start order),
// for a list, append delimited or length-prefixed items (AddOperand).
//
// Names: a set's `name` prefixes its state and timer keys within the
// partition: two sets sharing a partition need two names, and no other
// state key of the partition may start with "<name>/".
//
// Const methods may be called concurrently; the objects are immutable after
// Create and cheap to copy.

#ifndef IDEM_WINDOWS_H_
#define IDEM_WINDOWS_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "idem/merge.h"
#include "idem/message.h"
#include "idem/timers.h"
#include "idem/txn.h"

namespace idem {

struct WindowSpec;   // engine/window_spec.h
struct WindowHooks;  // engine/window_spec.h: broken variants, for tests

// Options shared by every kind of window (the fields after the kind's own
// lengths in TumblingWindowOptions, HoppingWindowOptions and
// SessionWindowOptions). Each is validated by Create, which names the
// field in its kInvalidArgument.
//
// grace: how long after its end a window still accepts events: it closes
//   once the partition's stream time reaches end + grace. >= 0 and finite.
//   Default: none.
// name: 1 to 64 bytes, no '/'.
// destination: where a closed window's aggregates are emitted
//   (Txn::EmitWithHeaders): key, the event key; value, the aggregate (see
//   "Emitted values" above); headers "idem.window.start" and
//   "idem.window.end" (microseconds since the epoch, decimal; for a
//   session, its first and last event time). 1 to kMaxSourceBytes bytes.
// aggregation: the MergeOp that folds each event's amount into its
//   window's aggregate. Default: MergeOp::kAddInt64.
// late_destination: empty (the default) drops late events (Add still
//   reports them); otherwise where they are emitted (see "Late events"
//   above), at most kMaxSourceBytes bytes.

struct TumblingWindowOptions {
  // The windows' length: windows are [k * size, (k + 1) * size) since the
  // Unix epoch, in whole microseconds. Must be >= 1us and finite.
  absl::Duration size = absl::Minutes(1);
  absl::Duration grace = absl::ZeroDuration();
  std::string name = "windows";
  std::string destination;
  MergeOp aggregation = MergeOp::kAddInt64;
  std::string late_destination;
};

struct HoppingWindowOptions {
  // The windows' length, >= 1us and finite.
  absl::Duration size = absl::Minutes(1);
  // How far apart windows start: windows are [k * hop, k * hop + size)
  // since the Unix epoch, in whole microseconds, so an event falls in about
  // size / hop of them. >= 1us and at most `size` (hop == size is
  // tumbling), and at least size / 10,000 (an event in at most 10,000
  // windows, each a merge and a timer in its commit).
  absl::Duration hop = absl::Seconds(10);
  absl::Duration grace = absl::ZeroDuration();
  std::string name = "hopping";
  std::string destination;
  MergeOp aggregation = MergeOp::kAddInt64;
  std::string late_destination;
};

struct SessionWindowOptions {
  // The inactivity gap: per key, events less than `gap` apart share a
  // session, and an event less than `gap` from two sessions joins them into
  // one.
  // A session [first event, last event] closes once the partition's stream
  // time reaches its last event + gap + grace. >= 1us and finite.
  absl::Duration gap = absl::Minutes(5);
  absl::Duration grace = absl::ZeroDuration();
  std::string name = "sessions";
  std::string destination;
  MergeOp aggregation = MergeOp::kAddInt64;
  std::string late_destination;
};

// What Add did with an event.
enum class WindowAdd {
  kAccepted,  // added to every window it falls in
  kLate,      // every window it falls in had closed: nothing was added
  // Hopping windows only: added to the windows still open, missing one or
  // more that had closed (each reported to late_destination, if set).
  kPartlyLate,
};

// What the three kinds share: adding an event in its message's handler and
// closing a window in a timer's handler. Built by TumblingWindows::Create,
// HoppingWindows::Create or SessionWindows::Create; each kind's comment
// says which windows an event falls in.
class WindowSet {
 public:
  // Folds `amount` (as an 8-byte int64 operand) into `key`'s aggregate in
  // each window of message.event_time, on the message's partition, and
  // sets each window's closing timer (an event-time timer; for tumbling and
  // hopping windows, setting it again for each event of the window moves
  // nothing; a session's timer moves to its new closing time). kAccepted;
  // kLate, adding nothing (and emitting to late_destination, if set), if every
  // window of the event had closed (its closing time is at or below the
  // partition's stream time: Txn::SetTimer refused it); kPartlyLate (hopping
  // windows) if some had. kInvalidArgument for a message without a source or a
  // finite event time (within 73,000 years of the epoch), or with
  // aggregation kAppend (use AddOperand); other errors as Txn::SetTimer's
  // and Txn::Merge's. Call from the message's handler with its Txn, and
  // return its error.
  absl::StatusOr<WindowAdd> Add(const Message& message, Txn& txn,
                                std::string_view key, int64_t amount = 1) const;

  // As Add, with the merge operand as `aggregation` takes it (idem/merge.h:
  // 8 bytes for the int64 operators, Int64Operand; any bytes for kAppend).
  // kInvalidArgument for an operand that does not fit.
  absl::StatusOr<WindowAdd> AddOperand(const Message& message, Txn& txn,
                                       std::string_view key,
                                       std::string_view operand) const;

  // For the TimerHandler given to Engine::FireTimers (or to a consumer's
  // timer_handler): if `fire` closes one of these windows, emits each of
  // its keys with its aggregate, deletes them, and returns true; returns
  // false for a timer that is not one of these windows' (handle it
  // otherwise). A storage error as Txn::Get's and Txn::Scan's; kDataLoss for
  // a stored int64 aggregate that is not 8 bytes, or stored session bounds
  // that do not decode.
  absl::StatusOr<bool> Close(const TimerFire& fire, Txn& txn) const;

 protected:
  explicit WindowSet(std::shared_ptr<const WindowSpec> spec)
      : spec_(std::move(spec)) {}

 private:
  std::shared_ptr<const WindowSpec> spec_;
};

// Tumbling windows: each event in exactly one window.
class TumblingWindows : public WindowSet {
 public:
  // kInvalidArgument naming the field for bad options (a size below 1us, a
  // negative grace, a bad name, destination or late_destination, an
  // aggregation that is no MergeOp).
  static absl::StatusOr<TumblingWindows> Create(TumblingWindowOptions options);

 private:
  using WindowSet::WindowSet;
};

// Hopping windows: windows of `size` starting every `hop`, each event in
// every window that contains it (Add: kPartlyLate when some of them had
// closed; each of those is reported to late_destination, if set).
class HoppingWindows : public WindowSet {
 public:
  // kInvalidArgument naming the field for bad options: as TumblingWindows,
  // and a hop below 1us, above the size or below size / 10,000.
  static absl::StatusOr<HoppingWindows> Create(HoppingWindowOptions options);

 private:
  using WindowSet::WindowSet;
};

// Session windows, per key: a session grows while its key's events keep
// coming less than `gap` apart, and closes `gap` + grace after its last
// event (in the partition's stream time).
//
// Each open session of a key is kept in the partition's state as its
// bounds (first and last event time) and its aggregate, with its closing
// timer keyed by its start. Add reads the key's sessions near the event
// (a scan, validated at commit like any read: concurrent handlers of one
// key run as if one after the other) and, in the handler's write, extends
// the session the event falls in or near, merges the sessions it bridges
// (folding their aggregates into the earliest, deleting the others and
// cancelling their timers) or opens a new one, and moves the survivor's
// timer to its new end + gap + grace. A session whose closing time has
// passed is closed even before its timer fires: an event near it opens a
// new session (if its own would still be open) or is late: then Add
// returns kLate, and late_destination gets the session the event alone
// would have opened. Add's errors also include kDataLoss for stored
// session bounds that do not decode, and kAborted (retry the message) if
// the partition's stream time kept passing the sessions it joins while it
// ran. Close of a timer whose session is gone emits nothing (and returns
// true).
class SessionWindows : public WindowSet {
 public:
  // kInvalidArgument naming the field for bad options: a gap below 1us,
  // and the shared fields as TumblingWindows.
  static absl::StatusOr<SessionWindows> Create(SessionWindowOptions options);

 private:
  friend absl::StatusOr<SessionWindows> CreateSessionWindowsWithHooks(
      SessionWindowOptions options, const WindowHooks& hooks);
  using WindowSet::WindowSet;
};

}  // namespace idem

#endif  // IDEM_WINDOWS_H_
