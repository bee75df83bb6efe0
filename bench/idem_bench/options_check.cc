// ValidateBenchOptions (bench/idem_bench/idem_bench.h): the bounds of
// BenchOptions, checked in the order of the options' groups (the run's
// length, the stream, the delivery, the clock, the store and the lookups,
// the outbox); the first option out of range is the one reported.

#include <cstddef>
#include <cstdint>
#include <initializer_list>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "bench/idem_bench/idem_bench.h"
#include "bench/idem_bench/names.h"

namespace idem::bench {
namespace {

// Bounds of BenchOptions (documented in bench/idem_bench/idem_bench.h and
// in idem-bench's flags).
constexpr int64_t kMaxMessages = 10'000'000'000;  // ~a day at 100k msg/s
constexpr absl::Duration kMaxDuration = absl::Hours(7 * 24);
constexpr int64_t kMaxStateBytes = 1 << 20;
constexpr int64_t kMaxStateKeys = 1'000'000'000'000;
// The workload keeps 8 bytes per reachable ID: at most 800 MB.
constexpr int64_t kMaxDuplicateReach = 100'000'000;
constexpr int64_t kMaxBatch = 100'000;
constexpr int64_t kMaxThreads = 64;
constexpr absl::Duration kMaxWindow = absl::Hours(365 * 24);
constexpr double kMinSimRate = 0.01;  // keeps clock micros within int64
constexpr double kMaxSimRate = 1e9;
constexpr int64_t kMaxSteadyWindows = 1000;
constexpr int64_t kMaxLookups = 10'000'000;
constexpr size_t kMinWriteBufferBytes = size_t{64} << 10;
constexpr size_t kMaxWriteBufferBytes = size_t{4} << 30;
constexpr int64_t kMaxExpiryBuckets = 64;
constexpr int64_t kMaxEmit = 1000;
constexpr int64_t kMaxEmitBytes = 1 << 20;
constexpr int64_t kMaxOutboxAckEvery = 1'000'000;

absl::Status Bad(absl::string_view message) {
  return absl::InvalidArgumentError(message);
}

// The first status of `checks` that is not OK; OK if they all are.
absl::Status FirstError(std::initializer_list<absl::Status> checks) {
  for (const absl::Status& s : checks) {
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

// kInvalidArgument "<flag> must be in [lo, hi], got <v>" unless lo <= v <= hi.
absl::Status InRange(absl::string_view flag, int64_t v, int64_t lo,
                     int64_t hi) {
  if (v >= lo && v <= hi) return absl::OkStatus();
  return Bad(absl::StrCat(flag, " must be in [", lo, ", ", hi, "], got ", v));
}

// InRange for a duration, each written as absl::FormatDuration writes it.
absl::Status DurationInRange(absl::string_view flag, absl::Duration v,
                             absl::Duration lo, absl::Duration hi) {
  if (v >= lo && v <= hi) return absl::OkStatus();
  return Bad(absl::StrCat(flag, " must be in [", absl::FormatDuration(lo), ", ",
                          absl::FormatDuration(hi), "], got ",
                          absl::FormatDuration(v)));
}

// The layouts and when the run stops: at least one limit.
absl::Status ValidateRunLength(const BenchOptions& o) {
  if (o.layouts.empty()) return Bad("--layout names no layout");
  if (absl::Status s =
          FirstError({InRange("--messages", o.messages, 0, kMaxMessages),
                      DurationInRange("--duration", o.duration,
                                      absl::ZeroDuration(), kMaxDuration)});
      !s.ok()) {
    return s;
  }
  if (o.messages == 0 && o.duration == absl::ZeroDuration()) {
    return Bad(
        "set --messages or --duration (both are 0: the run would "
        "never end)");
  }
  return absl::OkStatus();
}

absl::Status ValidateDuplicateRate(double rate) {
  if (rate >= 0 && rate < 1) return absl::OkStatus();  // false for NaN
  return Bad(absl::StrCat("--duplicate_rate must be in [0, 1), got ", rate));
}

// The handler's state and the stream's redeliveries.
absl::Status ValidateStream(const BenchOptions& o) {
  return FirstError(
      {InRange("--state_bytes", o.state_bytes, 0, kMaxStateBytes),
       InRange("--state_keys", o.state_keys, 1, kMaxStateKeys),
       ValidateDuplicateRate(o.duplicate_rate),
       InRange("--duplicate_reach", o.duplicate_reach, 1, kMaxDuplicateReach)});
}

absl::Status ValidateDelivery(const BenchOptions& o) {
  return FirstError({InRange("--batch", o.batch, 1, kMaxBatch),
                     InRange("--threads", o.threads, 1, kMaxThreads)});
}

absl::Status ValidateSimRate(double rate) {
  if (rate == 0 || (rate >= kMinSimRate && rate <= kMaxSimRate)) {
    return absl::OkStatus();
  }
  return Bad(
      absl::StrCat("--sim_messages_per_second must be 0 (real clock) or in [",
                   kMinSimRate, ", ", kMaxSimRate, "], got ", rate));
}

absl::Status ValidateSampleEvery(const BenchOptions& o) {
  if (o.sample_every >= absl::ZeroDuration() && o.sample_every <= o.window) {
    return absl::OkStatus();
  }
  return Bad(absl::StrCat("--sample_every must be in [0, --window], got ",
                          absl::FormatDuration(o.sample_every)));
}

// The window, the clock and what is measured over them.
absl::Status ValidateClock(const BenchOptions& o) {
  return FirstError(
      {DurationInRange("--window", o.window, absl::Seconds(1), kMaxWindow),
       ValidateSimRate(o.sim_messages_per_second), ValidateSampleEvery(o),
       InRange("--steady_windows", o.steady_windows, 1, kMaxSteadyWindows)});
}

absl::Status ValidateWriteBuffer(size_t bytes) {
  if (bytes >= kMinWriteBufferBytes && bytes <= kMaxWriteBufferBytes) {
    return absl::OkStatus();
  }
  return Bad(absl::StrCat("--write_buffer_mib must be in [0.0625, 4096], got ",
                          static_cast<double>(bytes) / kMiB));
}

// The lookups after the run and the store's options.
absl::Status ValidateLookupsAndStore(const BenchOptions& o) {
  return FirstError(
      {InRange("--lookups", o.lookups, 0, kMaxLookups),
       ValidateWriteBuffer(o.write_buffer_bytes),
       InRange("--expiry_buckets", o.expiry_buckets, 0, kMaxExpiryBuckets)});
}

// Only the engine layout has an outbox to emit to.
absl::Status ValidateEmitLayouts(const BenchOptions& o) {
  if (o.emit <= 0) return absl::OkStatus();
  for (Layout layout : o.layouts) {
    if (layout != Layout::kEngine) {
      return Bad(absl::StrCat("--emit needs --layout=engine: the ",
                              LayoutName(layout), " layout has no outbox"));
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateOutbox(const BenchOptions& o) {
  return FirstError({InRange("--emit", o.emit, 0, kMaxEmit),
                     ValidateEmitLayouts(o),
                     InRange("--emit_bytes", o.emit_bytes, 0, kMaxEmitBytes),
                     InRange("--outbox_ack_every", o.outbox_ack_every, 0,
                             kMaxOutboxAckEvery)});
}

}  // namespace

absl::Status ValidateBenchOptions(const BenchOptions& o) {
  for (auto validate :
       {ValidateRunLength, ValidateStream, ValidateDelivery, ValidateClock,
        ValidateLookupsAndStore, ValidateOutbox}) {
    if (absl::Status s = validate(o); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace idem::bench
