// Validation of caller input: options, messages, IDs and source names. Every
// check returns kInvalidArgument with a message naming the bad field.
// Pure functions; thread-safe.

#ifndef IDEM_ENGINE_VALIDATE_H_
#define IDEM_ENGINE_VALIDATE_H_

#include <cstdint>
#include <string_view>

#include "absl/status/status.h"
#include "idem/message.h"
#include "idem/options.h"

namespace idem {

absl::Status ValidateOptions(const Options& options);
absl::Status ValidateId(std::string_view id);
absl::Status ValidateSource(std::string_view source, int32_t partition);
absl::Status ValidateMessage(const Message& message);

}  // namespace idem

#endif  // IDEM_ENGINE_VALIDATE_H_
