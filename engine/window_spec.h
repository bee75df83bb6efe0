// The parts idem/windows.h's window kinds share: a validated set of
// options (WindowSpec), the operand and emitted value of an aggregate, the
// late side output, and the tumbling and
// hopping windows' add and close (one implementation: tumbling is hopping
// with hop == size). Session windows are in engine/session_windows.cc.
// Times in keys are AppendOrderedInt64's (engine/coding.h): byte order is
// time order.
//
// WindowHooks: deliberately broken variants, for tests that must show
// their checks catch a broken guarantee. Never set outside tests.
//
// Free functions and immutable values; thread-safe.

#ifndef IDEM_ENGINE_WINDOW_SPEC_H_
#define IDEM_ENGINE_WINDOW_SPEC_H_

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
#include "idem/windows.h"

namespace idem {

struct WindowHooks {
  // A session merge deletes the sessions it absorbs but leaves their
  // closing timers set: each fires later and emits nothing (breaks "one
  // timer per open session": fires outnumber emitted sessions).
  bool keep_merged_timers = false;
  // A session merge folds the absorbed sessions' aggregates into the
  // survivor but keeps their state and timers: each is emitted on its own
  // too (breaks "each event counted once").
  bool keep_merged_sessions = false;
  // Add joins the open sessions it read without setting their timers again:
  // a concurrent commit that moves the stream time past one of them before
  // Add's commit does not make it run again, so the event joins a session
  // that had closed (breaks serializable sessions).
  bool skip_confirm_open = false;
};

struct WindowSpec {
  // Which class, for error messages ("TumblingWindows").
  const char* type = "";
  // Session windows (engine/session_windows.cc); otherwise tumbling or
  // hopping.
  bool sessions = false;
  // Tumbling and hopping: the windows' size and hop (equal for tumbling);
  // sessions: the gap in size_us. Whole microseconds, >= 1.
  int64_t size_us = 0;
  int64_t hop_us = 0;
  int64_t grace_us = 0;
  std::string name;
  std::string destination;
  MergeOp aggregation = MergeOp::kAddInt64;
  std::string late_destination;
  WindowHooks hooks;
};

// Checks and converts the options every kind shares; `options_type` names
// the options struct in errors ("TumblingWindowOptions"). kInvalidArgument
// naming the field.
absl::Status ValidateWindowSpec(std::string_view options_type,
                                absl::Duration grace, const WindowSpec& spec);

// A spec of `type` ("TumblingWindows") with the fields every kind's options
// share, validated (ValidateWindowSpec); the caller sets the lengths.
template <typename Options>
absl::StatusOr<std::shared_ptr<WindowSpec>> NewWindowSpec(
    const char* type, const char* options_type, const Options& options) {
  auto spec = std::make_shared<WindowSpec>();
  spec->type = type;
  spec->name = options.name;
  spec->destination = options.destination;
  spec->aggregation = options.aggregation;
  spec->late_destination = options.late_destination;
  if (absl::Status s = ValidateWindowSpec(options_type, options.grace, *spec);
      !s.ok()) {
    return s;
  }
  spec->grace_us = absl::ToInt64Microseconds(options.grace);
  return spec;
}

// `d` in whole microseconds, if >= 1us and finite; kInvalidArgument naming
// `field` ("HoppingWindowOptions::hop") otherwise.
absl::StatusOr<int64_t> WindowLengthMicros(std::string_view field,
                                           absl::Duration d);

// The merge operand of `amount` for spec.aggregation; kInvalidArgument for
// kAppend, whose operands are bytes (AddOperand).
absl::StatusOr<std::string> AmountOperand(const WindowSpec& spec,
                                          int64_t amount);

// kInvalidArgument unless `message` has a source and a finite event time
// and `operand` fits spec.aggregation.
absl::Status CheckWindowEvent(const WindowSpec& spec, const Message& message,
                              std::string_view operand);

// A folded aggregate (or an operand) as windows emit it: decimal for the
// int64 operators, the bytes for kAppend. kDataLoss for an int64 value that
// is not 8 bytes.
absl::StatusOr<std::string> EmittedValue(const WindowSpec& spec,
                                         std::string_view aggregate);

// Emits a window's aggregate to spec.destination with its start and end
// headers. Errors as EmittedValue.
absl::Status EmitWindow(const WindowSpec& spec, Txn& txn, std::string_view key,
                        std::string_view aggregate, int64_t start_us,
                        int64_t end_us);

// With spec.late_destination set, emits the late event (its key and
// operand) there, naming the window [start_us, end_us] it missed;
// otherwise nothing. Errors as EmittedValue.
absl::Status EmitLate(const WindowSpec& spec, Txn& txn, const Message& message,
                      std::string_view key, std::string_view operand,
                      int64_t start_us, int64_t end_us);

// Tumbling and hopping windows (spec.hop_us <= spec.size_us): Add and Close
// as idem/windows.h documents them. REQUIRES: CheckWindowEvent passed.
absl::StatusOr<WindowAdd> AddToFixedWindows(const WindowSpec& spec,
                                            const Message& message, Txn& txn,
                                            std::string_view key,
                                            std::string_view operand);
absl::StatusOr<bool> CloseFixedWindow(const WindowSpec& spec,
                                      const TimerFire& fire, Txn& txn);

// Session windows: WindowSet's Add and Close. REQUIRES: spec.sessions, and
// for AddToSession, CheckWindowEvent passed.
absl::StatusOr<WindowAdd> AddToSession(const WindowSpec& spec,
                                       const Message& message, Txn& txn,
                                       std::string_view key,
                                       std::string_view operand);
absl::StatusOr<bool> CloseSession(const WindowSpec& spec, const TimerFire& fire,
                                  Txn& txn);

// SessionWindows::Create with broken variants.
absl::StatusOr<SessionWindows> CreateSessionWindowsWithHooks(
    SessionWindowOptions options, const WindowHooks& hooks);

}  // namespace idem

#endif  // IDEM_ENGINE_WINDOW_SPEC_H_
