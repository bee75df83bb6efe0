// How state values carry an expiry (Txn::Put with PutOptions::ttl,
// Options::state_ttl): the stored form of a value in idem.state, read by
// the engine's reads, the merge operator and the state family's TTL
// compaction filter (engine/ttl_filter.h).
//
// Stores of format 4 and older hold every value as its raw bytes. From
// format 6 (kStateTtlFormatVersion, engine/store.h) a value is either raw
// or an envelope: its bytes, then its absolute expiry (fixed64 LE engine
// microseconds, kNeverExpires for none), then the 8-byte kEnvelopeMagic. A
// value is an envelope exactly when it ends with the magic and is at least
// kEnvelopeBytes long (LooksLikeEnvelope); a value without an expiry whose
// bytes happen to end so is stored wrapped in an envelope that never
// expires, so the rule never misreads one. Values without an expiry, the
// common case, stay raw (no bytes added, nothing to decode). When a store
// is marked format 6 (MarkStateTtlFormat), the raw values it already holds
// that would read as an envelope are wrapped in the same write that
// records the upgrade as finished, so the rule holds for them too.
//
// Merge operands may carry an expiry as well (engine/merge_operator.h).
//
// Free functions and a value type; thread-safe.

#ifndef IDEM_ENGINE_STATE_VALUE_H_
#define IDEM_ENGINE_STATE_VALUE_H_

#include <atomic>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "engine/engine_clock.h"

namespace idem {

// The expiry of a value that never expires.
inline constexpr int64_t kNeverExpires = std::numeric_limits<int64_t>::max();

// The last 8 bytes of every envelope.
inline constexpr std::string_view kEnvelopeMagic{"\xe9idemTTL", 8};
// An envelope's bytes besides the value: expiry and magic.
inline constexpr size_t kEnvelopeBytes = 16;

// A stored value as a read sees it: the value's bytes and its expiry.
struct StateValue {
  std::string_view value;
  int64_t expires_micros = kNeverExpires;
};

// How the reads of one call judge stored values: whether the store is of
// format 6 (values may be envelopes) and the engine time expiry is judged
// at (kNoExpiryCheck: nothing has expired).
struct StateReadTime {
  static constexpr int64_t kNoExpiryCheck = std::numeric_limits<int64_t>::min();
  bool enveloped = false;
  int64_t now_micros = kNoExpiryCheck;
};

// What the state family's merge operator and TTL filter share with the
// engine: its time, whether the store is of format 6 yet (set when the
// store is opened or marked), and the removal horizon of a running
// Engine::CompactExpired (engine/ttl_filter.h). Thread-safe.
struct StateTtlContext {
  explicit StateTtlContext(std::shared_ptr<EngineClock> engine_time)
      : time(std::move(engine_time)) {}
  // How a filter judges values now: the engine time, or, if the clock
  // cannot be read, kNoExpiryCheck (nothing expires: fail safe).
  StateReadTime Now() const;

  const std::shared_ptr<EngineClock> time;
  std::atomic<bool> enveloped{false};
  std::atomic<int64_t> removal_horizon{StateReadTime::kNoExpiryCheck};
};

// Whether `stored` is an envelope (in a store of format 6).
bool LooksLikeEnvelope(std::string_view stored);

// `stored` as a read sees it. Raw (never expires) unless `enveloped` and it
// is an envelope. The view points into `stored`.
StateValue DecodeStateValue(std::string_view stored, bool enveloped);

// `stored`'s value if it is live at `time` (expiry above now_micros), else
// nullopt. The view points into `stored`.
std::optional<std::string_view> LiveStateValue(std::string_view stored,
                                               const StateReadTime& time);

// The stored form of `value` expiring at `expires_micros` in a store of
// format 6 (`enveloped`): raw if it never expires and does not look like an
// envelope, else an envelope. REQUIRES: `enveloped` if `expires_micros` is
// not kNeverExpires (the store was marked first).
std::string EncodeStateValue(std::string_view value, int64_t expires_micros,
                             bool enveloped);
// The same written over `*out` (its bytes reused): the merge operator's
// result. REQUIRES: `value` does not point into `*out`.
void EncodeStateValueTo(std::string* out, std::string_view value,
                        int64_t expires_micros, bool enveloped);

// The expiry of a write at engine time `now_micros` with `ttl` (infinite:
// kNeverExpires), saturating far in the future.
int64_t ExpiryAfter(int64_t now_micros, absl::Duration ttl);

// OK if `ttl` is positive (infinite: no expiry); kInvalidArgument naming
// `what` otherwise.
absl::Status ValidateTtl(absl::Duration ttl, std::string_view what);

}  // namespace idem

#endif  // IDEM_ENGINE_STATE_VALUE_H_
