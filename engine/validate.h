// Validation of caller input: options, messages, IDs and source names. Every
// check returns kInvalidArgument with a message naming the bad field.
// Pure functions; thread-safe.

#ifndef IDEM_ENGINE_VALIDATE_H_
#define IDEM_ENGINE_VALIDATE_H_

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "absl/status/status.h"
#include "idem/message.h"
#include "idem/options.h"

namespace idem {

// The bounds of the performance options, as documented in idem/options.h.
inline constexpr size_t kMinWriteBufferBytes = size_t{64} << 10;  // 64 KiB
inline constexpr size_t kMaxWriteBufferBytes = size_t{4} << 30;   // 4 GiB
inline constexpr size_t kMaxBlockCacheBytes = size_t{1} << 40;    // 1 TiB
inline constexpr int kMinBackgroundJobs = 1;
inline constexpr int kMaxBackgroundJobs = 256;
inline constexpr int kMaxShards = 256;

absl::Status ValidateOptions(const Options& options);
absl::Status ValidateId(std::string_view id);
absl::Status ValidateSource(std::string_view source, int32_t partition);
// As ValidateSource, but an empty source (a message without one) is valid.
absl::Status ValidatePosition(std::string_view source, int32_t partition);
absl::Status ValidateMessage(const Message& message);
// A stored offset: 0 <= offset < INT64_MAX, so that the position a consumer
// resumes at (offset + 1) is a real one. Negative offsets are broker
// sentinels (librdkafka's -1 is OFFSET_END: resuming at offset -2 + 1 would
// skip the whole backlog). `what` names the offset in the message.
absl::Status ValidateOffset(int64_t offset, std::string_view what);

}  // namespace idem

#endif  // IDEM_ENGINE_VALIDATE_H_
