// How the delivery loop bounds and shrinks dead letters: the error text a
// dead letter carries (idem.error, at most kMaxDeadLetterErrorBytes), the
// dead letter of an outbox entry the broker refused for good, and smaller
// versions of a dead letter for a broker that refused it too (the copied
// headers dropped and the error cut short; then the value dropped as well),
// each saying in idem.truncated what was cut. The message ID is never cut.
// Plain functions: thread-safe.

#ifndef IDEM_BROKERS_DEAD_LETTERS_H_
#define IDEM_BROKERS_DEAD_LETTERS_H_

#include <cstddef>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "idem/outbox.h"

namespace idem::brokers {

// `text` cut to at most `max_bytes` bytes, at a UTF-8 character boundary;
// sets `*cut` when it was cut.
std::string BoundedText(std::string_view text, size_t max_bytes, bool* cut);

// The dead letter, for `destination`, of `entry` that the broker refused
// for good with `error`: its key, value and headers under its message ID
// (and position), plus idem.error, idem.reason "refused" and
// idem.destination (and idem.truncated "error" when the error was cut).
OutboxEntry DeadLetterOfRefused(const OutboxEntry& entry,
                                const absl::Status& error,
                                std::string_view destination);

// How many smaller versions Shrunk makes.
inline constexpr int kShrinkLevels = 2;

// `dead_letter` made smaller for a broker that refused it: level 1 keeps
// only its idem.* headers, with idem.error cut to a short text; level 2
// also drops the value (idem.value.bytes gives its size). idem.truncated
// lists what was cut. REQUIRES: 1 <= level <= kShrinkLevels.
OutboxEntry Shrunk(const OutboxEntry& dead_letter, int level);

}  // namespace idem::brokers

#endif  // IDEM_BROKERS_DEAD_LETTERS_H_
