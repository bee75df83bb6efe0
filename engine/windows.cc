#include "idem/windows.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/absl_view.h"
#include "engine/coding.h"
#include "engine/record.h"
#include "idem/merge.h"
#include "idem/partition_state.h"

namespace idem {
namespace {

constexpr size_t kMaxWindowNameBytes = 64;
constexpr uint64_t kWindowSignBit = uint64_t{1} << 63;

// Floor division: the window of a time before the epoch starts before it.
int64_t FloorDiv(int64_t a, int64_t b) {
  const int64_t q = a / b;
  return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q;
}

}  // namespace

absl::StatusOr<TumblingWindows> TumblingWindows::Create(
    TumblingWindowOptions options) {
  if (options.size <= absl::ZeroDuration() ||
      options.size == absl::InfiniteDuration() ||
      absl::ToInt64Microseconds(options.size) <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("TumblingWindowOptions::size must be at least 1us and "
                     "finite, got ",
                     absl::FormatDuration(options.size)));
  }
  if (options.grace < absl::ZeroDuration() ||
      options.grace == absl::InfiniteDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("TumblingWindowOptions::grace must be >= 0 and finite, "
                     "got ",
                     absl::FormatDuration(options.grace)));
  }
  if (options.name.empty() || options.name.size() > kMaxWindowNameBytes ||
      options.name.find('/') != std::string::npos) {
    return absl::InvalidArgumentError(
        "TumblingWindowOptions::name must be 1 to 64 bytes without '/'");
  }
  if (options.destination.empty() ||
      options.destination.size() > kMaxSourceBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("TumblingWindowOptions::destination must be 1 to ",
                     kMaxSourceBytes, " bytes"));
  }
  return TumblingWindows(std::move(options));
}

int64_t TumblingWindows::WindowStart(absl::Time event_time) const {
  const int64_t size = absl::ToInt64Microseconds(options_.size);
  return FloorDiv(absl::ToUnixMicros(event_time), size) * size;
}

std::string TumblingWindows::WindowKey(int64_t start_micros) const {
  // The name, '/', then the start in byte order = time order.
  std::string key = absl::StrCat(options_.name, "/");
  char start[8];
  PutBigEndian64(start, static_cast<uint64_t>(start_micros) ^ kWindowSignBit);
  key.append(start, sizeof(start));
  return key;
}

absl::StatusOr<WindowAdd> TumblingWindows::Add(const Message& message, Txn& txn,
                                               std::string_view key,
                                               int64_t amount) const {
  if (message.source.empty() || message.event_time == absl::InfinitePast() ||
      message.event_time == absl::InfiniteFuture()) {
    return absl::InvalidArgumentError(
        "TumblingWindows::Add: the message needs a source and an event time");
  }
  const int64_t start = WindowStart(message.event_time);
  const std::string window = WindowKey(start);
  const absl::Time closes =
      absl::FromUnixMicros(start) + options_.size + options_.grace;
  absl::Status armed = txn.SetTimer(window, TimeDomain::kEvent, closes);
  if (absl::IsOutOfRange(armed)) return WindowAdd::kLate;
  if (!armed.ok()) return armed;
  PartitionTxn partition(txn, message.source, message.partition);
  if (absl::Status s =
          partition.Merge(absl::StrCat(window, AbslView(key)),
                          MergeOp::kAddInt64, Int64Operand(amount));
      !s.ok()) {
    return s;
  }
  return WindowAdd::kAccepted;
}

absl::StatusOr<bool> TumblingWindows::Close(const TimerFire& fire,
                                            Txn& txn) const {
  const std::string prefix = absl::StrCat(options_.name, "/");
  if (fire.domain != TimeDomain::kEvent ||
      fire.timer_key.size() != prefix.size() + 8 ||
      fire.timer_key.compare(0, prefix.size(), prefix) != 0) {
    return false;
  }
  const int64_t start = static_cast<int64_t>(
      GetBigEndian64(fire.timer_key.data() + prefix.size()) ^ kWindowSignBit);
  const std::string start_text = absl::StrCat(start);
  const std::string end_text =
      absl::StrCat(start + absl::ToInt64Microseconds(options_.size));
  const Txn::Header headers[] = {{"idem.window.start", start_text},
                                 {"idem.window.end", end_text}};
  PartitionTxn partition(txn, fire.source, fire.partition);
  const std::string& window = fire.timer_key;
  absl::Status emit_error;
  absl::Status scanned = partition.ScanPrefix(
      window, [&](std::string_view key, std::string_view value) {
        std::optional<int64_t> sum = ReadInt64(value);
        if (!sum.has_value()) {
          emit_error = absl::DataLossError(
              "TumblingWindows::Close: a window sum is not an int64");
          return false;
        }
        txn.EmitWithHeaders(options_.destination, key.substr(window.size()),
                            absl::StrCat(*sum), headers);
        return true;
      });
  if (!scanned.ok()) return scanned;
  if (!emit_error.ok()) return emit_error;
  if (absl::Status s = partition.DeleteRange(window, KeyRangeEnd(window));
      !s.ok()) {
    return s;
  }
  return true;
}

}  // namespace idem
