// Message is one delivery handed to the engine, and Result what the engine
// made of it. Plain value types: not thread-safe.
//
// Message holds views: the bytes they point to are owned by the caller and
// must stay valid for the duration of the Process/ProcessBatch call. Result
// owns its bytes.

#ifndef IDEM_MESSAGE_H_
#define IDEM_MESSAGE_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace idem {

// The longest accepted Message::id and Message::source, in bytes.
inline constexpr size_t kMaxIdBytes = 1024;
inline constexpr size_t kMaxSourceBytes = 1024;

struct Message {
  // Dedupe key: the broker's message ID or a business key. 1 to kMaxIdBytes
  // bytes, any content. Only its 128-bit hash (XXH3-128) is stored.
  std::string_view id = {};
  // Passed to the handler untouched; not stored by the engine.
  std::string_view payload = {};
  // Optional position in the source: topic or queue name (at most
  // kMaxSourceBytes), partition (>= 0) and offset. The position is recorded
  // only when `source` is non-empty and `offset` >= 0; INT64_MAX is refused
  // (kInvalidArgument), since a consumer resumes at the offset after it.
  std::string_view source = {};
  int32_t partition = 0;
  int64_t offset = -1;
  // How long this ID is remembered; must be >= 0 and finite.
  // Zero: Options::dedupe_window.
  absl::Duration ttl = absl::ZeroDuration();
  // What makes two deliveries of this ID the same content, under
  // Options::detect_conflicts: the record keeps XXH3-64 of these bytes, or
  // of the payload when this is empty. Not stored otherwise.
  std::string_view fingerprint = {};
  // When the event happened, by the producer's or the broker's clock;
  // absl::InfinitePast() for none. A finite event time advances the stream
  // time of (source, partition) when the message commits (Engine::StreamTime;
  // not beyond kMaxEventTimeAhead past the engine's clock, idem/timers.h).
  // InfiniteFuture is refused (kInvalidArgument).
  absl::Time event_time = absl::InfinitePast();
};

enum class Outcome {
  kProcessed,  // the handler ran and its writes were committed
  kDuplicate,  // a live record existed: no handler ran, nothing was written
               // (but its expiry, under Options::refresh_on_duplicate)
  kFailed,     // the handler failed: nothing was committed for this message
               // (transient), or the failure was remembered (permanent: see
               // PermanentError and Result::permanent)
  kConflict,   // Options::detect_conflicts: a live record exists whose
               // fingerprint differs from this delivery's; no handler ran,
               // nothing was written. Offsets advance as for kDuplicate.
};

// A handler's failure that retrying cannot repair: returned by a handler,
// the engine commits the message's record as failed (the handler's writes
// and emits are dropped) with the error and the message's offset, and
// answers every redelivery of the ID with kFailed and this error, without
// running the handler, until the record expires or Engine::Forget removes
// it. `status` must not be OK (an OK status gives kUnknown). The mark is a
// payload of the returned status (IsPermanentError).
absl::Status PermanentError(absl::Status status);
// Whether `status` was made by PermanentError.
bool IsPermanentError(const absl::Status& status);

struct Result {
  Outcome outcome = Outcome::kFailed;
  // kProcessed: the bytes the handler passed to Txn::SetResult (empty if it
  // did not). kDuplicate and kConflict: the bytes stored by the first
  // delivery.
  std::string result;
  // kFailed only: the handler's status (kInternal for a handler that threw),
  // or the remembered permanent failure's code and message.
  absl::Status error;
  // The commit this outcome depends on. Under Durability::kBuffered call
  // Engine::WaitDurable(sequence) before acknowledging the message to the
  // broker; under kSync the outcome is already durable. For a call whose
  // commit wrote (kProcessed, a remembered kFailed, and the other outcomes
  // of its batch), the sequence of that commit's last record: no other
  // commit reports it, and commits of one store are ordered by it. For a
  // call that wrote nothing, the store's latest when it returned. 0 for a
  // transient kFailed.
  uint64_t sequence = 0;
  // kFailed only: the failure is permanent and remembered (the offset
  // advances; acknowledge the message once `sequence` is durable).
  bool permanent = false;
  // kProcessed: the commit's time. kDuplicate, kConflict and a remembered
  // kFailed: when the ID was first processed, as its record stores it (at
  // most one second early); absl::InfinitePast() for a record written by a
  // build before record version 2, which did not store it. Otherwise
  // absl::InfinitePast().
  absl::Time first_processed_at = absl::InfinitePast();
};

}  // namespace idem

#endif  // IDEM_MESSAGE_H_
