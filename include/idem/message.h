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
  // only when `source` is non-empty and `offset` >= 0.
  std::string_view source = {};
  int32_t partition = 0;
  int64_t offset = -1;
  // How long this ID is remembered; must be >= 0 and finite.
  // Zero: Options::dedupe_window.
  absl::Duration ttl = absl::ZeroDuration();
};

enum class Outcome {
  kProcessed,  // the handler ran and its writes were committed
  kDuplicate,  // a live record existed: no handler ran, nothing was written
  kFailed,     // the handler failed: nothing was committed for this message
};

struct Result {
  Outcome outcome = Outcome::kFailed;
  // kProcessed: the bytes the handler passed to Txn::SetResult (empty if it
  // did not). kDuplicate: the bytes stored by the first delivery.
  std::string result;
  // kFailed only: the handler's status (kInternal for a handler that threw).
  absl::Status error;
  // The commit this outcome depends on. Under Durability::kBuffered call
  // Engine::WaitDurable(sequence) before acknowledging the message to the
  // broker; under kSync the outcome is already durable. 0 for kFailed.
  uint64_t sequence = 0;
};

}  // namespace idem

#endif  // IDEM_MESSAGE_H_
