// idem/windows.h's tumbling and hopping windows, and the parts every kind
// of window shares (engine/window_spec.h).
//
// A fixed window's state, within its partition (PartitionTxn):
//   <name> '/' start  -> the window's timer key, and the prefix of
//   <name> '/' start <key> -> the key's aggregate (merged by `aggregation`)
// with start as AppendOrderedInt64 writes it (engine/coding.h).

#include "idem/windows.h"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/absl_view.h"
#include "engine/coding.h"
#include "engine/record.h"
#include "engine/window_spec.h"
#include "idem/merge.h"
#include "idem/partition_state.h"

namespace idem {
namespace {

constexpr size_t kMaxWindowNameBytes = 64;
// Lengths and event times are bounded so that start + size + grace never
// overflows int64 microseconds (about 36,000 and 73,000 years).
constexpr int64_t kMaxLengthMicros = int64_t{1} << 60;
constexpr int64_t kMaxEventMicros = int64_t{1} << 61;
// Each event is added to about size / hop windows, each a merge and a timer
// in its commit: more per event is refused rather than left to exhaust
// memory.
constexpr int64_t kMaxWindowsPerEvent = 10000;

// Floor division: the window of a time before the epoch starts before it.
int64_t FloorDiv(int64_t a, int64_t b) {
  const int64_t q = a / b;
  return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q;
}

std::string Micros(int64_t micros) { return absl::StrCat(micros); }

// The fixed window starting at `start_us`: its timer key and state prefix.
std::string FixedWindowKey(const WindowSpec& spec, int64_t start_us) {
  std::string key = absl::StrCat(spec.name, "/");
  AppendOrderedInt64(key, start_us);
  return key;
}

// The starts of the windows containing `t_us`, earliest first.
std::vector<int64_t> FixedWindowStarts(const WindowSpec& spec, int64_t t_us) {
  std::vector<int64_t> starts;
  const int64_t latest = FloorDiv(t_us, spec.hop_us) * spec.hop_us;
  for (int64_t start = latest; start > t_us - spec.size_us;
       start -= spec.hop_us) {
    starts.push_back(start);
  }
  std::reverse(starts.begin(), starts.end());
  return starts;
}

}  // namespace

absl::StatusOr<int64_t> WindowLengthMicros(std::string_view field,
                                           absl::Duration d) {
  const int64_t micros = absl::ToInt64Microseconds(d);
  if (d == absl::InfiniteDuration() || micros < 1 ||
      micros > kMaxLengthMicros) {
    return absl::InvalidArgumentError(
        absl::StrCat(AbslView(field), " must be at least 1us and finite, got ",
                     absl::FormatDuration(d)));
  }
  return micros;
}

absl::Status ValidateWindowSpec(std::string_view options_type,
                                absl::Duration grace, const WindowSpec& spec) {
  const std::string type(options_type);
  if (grace < absl::ZeroDuration() || grace == absl::InfiniteDuration() ||
      absl::ToInt64Microseconds(grace) > kMaxLengthMicros) {
    return absl::InvalidArgumentError(
        absl::StrCat(type, "::grace must be >= 0 and finite, got ",
                     absl::FormatDuration(grace)));
  }
  if (spec.name.empty() || spec.name.size() > kMaxWindowNameBytes ||
      spec.name.find('/') != std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat(type, "::name must be 1 to ",
                                                   kMaxWindowNameBytes,
                                                   " bytes without '/'"));
  }
  if (spec.destination.empty() || spec.destination.size() > kMaxSourceBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        type, "::destination must be 1 to ", kMaxSourceBytes, " bytes"));
  }
  if (spec.late_destination.size() > kMaxSourceBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat(type, "::late_destination must be at most ",
                     kMaxSourceBytes, " bytes (empty: drop late events)"));
  }
  if (absl::Status s = ValidateMerge(spec.aggregation, Int64Operand(0));
      !s.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(type, "::aggregation: ", s.message()));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> AmountOperand(const WindowSpec& spec,
                                          int64_t amount) {
  if (spec.aggregation == MergeOp::kAppend) {
    return absl::InvalidArgumentError(absl::StrCat(
        spec.type, "::Add: aggregation kAppend takes bytes: use AddOperand"));
  }
  return Int64Operand(amount);
}

absl::Status CheckWindowEvent(const WindowSpec& spec, const Message& message,
                              std::string_view operand) {
  const int64_t t = absl::ToUnixMicros(message.event_time);
  if (message.source.empty() || message.event_time == absl::InfinitePast() ||
      message.event_time == absl::InfiniteFuture() || t > kMaxEventMicros ||
      t < -kMaxEventMicros) {
    return absl::InvalidArgumentError(
        absl::StrCat(spec.type,
                     "::Add: the message needs a source and a finite event "
                     "time within 73,000 years of the epoch"));
  }
  if (absl::Status s = ValidateMerge(spec.aggregation, operand); !s.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(spec.type, "::Add: ", s.message()));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> EmittedValue(const WindowSpec& spec,
                                         std::string_view aggregate) {
  if (spec.aggregation == MergeOp::kAppend) return std::string(aggregate);
  std::optional<int64_t> value = ReadInt64(aggregate);
  if (!value.has_value()) {
    return absl::DataLossError(
        absl::StrCat(spec.type, ": a window's int64 aggregate is not 8 bytes"));
  }
  return absl::StrCat(*value);
}

absl::Status EmitWindow(const WindowSpec& spec, Txn& txn, std::string_view key,
                        std::string_view aggregate, int64_t start_us,
                        int64_t end_us) {
  absl::StatusOr<std::string> value = EmittedValue(spec, aggregate);
  if (!value.ok()) return value.status();
  const std::string start = Micros(start_us);
  const std::string end = Micros(end_us);
  const Txn::Header headers[] = {{"idem.window.start", start},
                                 {"idem.window.end", end}};
  txn.EmitWithHeaders(spec.destination, key, *value, headers);
  return absl::OkStatus();
}

absl::Status EmitLate(const WindowSpec& spec, Txn& txn, const Message& message,
                      std::string_view key, std::string_view operand,
                      int64_t start_us, int64_t end_us) {
  if (spec.late_destination.empty()) return absl::OkStatus();
  absl::StatusOr<std::string> value = EmittedValue(spec, operand);
  if (!value.ok()) return value.status();
  const std::string start = Micros(start_us);
  const std::string end = Micros(end_us);
  const std::string event_time = Micros(absl::ToUnixMicros(message.event_time));
  const Txn::Header headers[] = {{"idem.window.start", start},
                                 {"idem.window.end", end},
                                 {"idem.event.time", event_time}};
  txn.EmitWithHeaders(spec.late_destination, key, *value, headers);
  return absl::OkStatus();
}

absl::StatusOr<WindowAdd> AddToFixedWindows(const WindowSpec& spec,
                                            const Message& message, Txn& txn,
                                            std::string_view key,
                                            std::string_view operand) {
  const int64_t t = absl::ToUnixMicros(message.event_time);
  PartitionTxn partition(txn, message.source, message.partition);
  size_t missed = 0;
  const std::vector<int64_t> starts = FixedWindowStarts(spec, t);
  for (int64_t start : starts) {
    const std::string window = FixedWindowKey(spec, start);
    const int64_t end = start + spec.size_us;
    absl::Status armed = txn.SetTimer(
        window, TimeDomain::kEvent, absl::FromUnixMicros(end + spec.grace_us));
    if (absl::IsOutOfRange(armed)) {
      ++missed;
      if (absl::Status s =
              EmitLate(spec, txn, message, key, operand, start, end);
          !s.ok()) {
        return s;
      }
      continue;
    }
    if (!armed.ok()) return armed;
    if (absl::Status s = partition.Merge(absl::StrCat(window, AbslView(key)),
                                         spec.aggregation, operand);
        !s.ok()) {
      return s;
    }
  }
  if (missed == 0) return WindowAdd::kAccepted;
  return missed == starts.size() ? WindowAdd::kLate : WindowAdd::kPartlyLate;
}

absl::StatusOr<bool> CloseFixedWindow(const WindowSpec& spec,
                                      const TimerFire& fire, Txn& txn) {
  const std::string prefix = absl::StrCat(spec.name, "/");
  if (fire.domain != TimeDomain::kEvent ||
      fire.timer_key.size() != prefix.size() + 8 ||
      fire.timer_key.compare(0, prefix.size(), prefix) != 0) {
    return false;
  }
  const int64_t start = GetOrderedInt64(fire.timer_key.data() + prefix.size());
  PartitionTxn partition(txn, fire.source, fire.partition);
  const std::string& window = fire.timer_key;
  absl::Status emit_error;
  absl::Status scanned = partition.ScanPrefix(
      window, [&](std::string_view key, std::string_view value) {
        emit_error = EmitWindow(spec, txn, key.substr(window.size()), value,
                                start, start + spec.size_us);
        return emit_error.ok();
      });
  if (!scanned.ok()) return scanned;
  if (!emit_error.ok()) return emit_error;
  if (absl::Status s = partition.DeleteRange(window, KeyRangeEnd(window));
      !s.ok()) {
    return s;
  }
  return true;
}

absl::StatusOr<WindowAdd> WindowSet::Add(const Message& message, Txn& txn,
                                         std::string_view key,
                                         int64_t amount) const {
  absl::StatusOr<std::string> operand = AmountOperand(*spec_, amount);
  if (!operand.ok()) return operand.status();
  return AddOperand(message, txn, key, *operand);
}

absl::StatusOr<WindowAdd> WindowSet::AddOperand(
    const Message& message, Txn& txn, std::string_view key,
    std::string_view operand) const {
  if (absl::Status s = CheckWindowEvent(*spec_, message, operand); !s.ok()) {
    return s;
  }
  if (spec_->sessions) return AddToSession(*spec_, message, txn, key, operand);
  return AddToFixedWindows(*spec_, message, txn, key, operand);
}

absl::StatusOr<bool> WindowSet::Close(const TimerFire& fire, Txn& txn) const {
  if (spec_->sessions) return CloseSession(*spec_, fire, txn);
  return CloseFixedWindow(*spec_, fire, txn);
}

absl::StatusOr<TumblingWindows> TumblingWindows::Create(
    TumblingWindowOptions options) {
  absl::StatusOr<int64_t> size =
      WindowLengthMicros("TumblingWindowOptions::size", options.size);
  if (!size.ok()) return size.status();
  absl::StatusOr<std::shared_ptr<WindowSpec>> spec =
      NewWindowSpec("TumblingWindows", "TumblingWindowOptions", options);
  if (!spec.ok()) return spec.status();
  (*spec)->size_us = *size;
  (*spec)->hop_us = *size;
  return TumblingWindows(*std::move(spec));
}

absl::StatusOr<HoppingWindows> HoppingWindows::Create(
    HoppingWindowOptions options) {
  absl::StatusOr<int64_t> size =
      WindowLengthMicros("HoppingWindowOptions::size", options.size);
  if (!size.ok()) return size.status();
  absl::StatusOr<int64_t> hop =
      WindowLengthMicros("HoppingWindowOptions::hop", options.hop);
  if (!hop.ok()) return hop.status();
  if (*hop > *size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "HoppingWindowOptions::hop (", absl::FormatDuration(options.hop),
        ") must be at most the size (", absl::FormatDuration(options.size),
        ")"));
  }
  if ((*size + *hop - 1) / *hop > kMaxWindowsPerEvent) {
    return absl::InvalidArgumentError(absl::StrCat(
        "HoppingWindowOptions::hop (", absl::FormatDuration(options.hop),
        ") puts each event in more than ", kMaxWindowsPerEvent,
        " windows of size ", absl::FormatDuration(options.size)));
  }
  absl::StatusOr<std::shared_ptr<WindowSpec>> spec =
      NewWindowSpec("HoppingWindows", "HoppingWindowOptions", options);
  if (!spec.ok()) return spec.status();
  (*spec)->size_us = *size;
  (*spec)->hop_us = *hop;
  return HoppingWindows(*std::move(spec));
}

}  // namespace idem
