// The one boundary every call into user code goes through (handlers,
// clocks, loggers, and the Kafka adapter's ID functions, dead-letter
// callbacks and observers), so that an exception never crosses into
// RocksDB's or librdkafka's C code or the engine: a throw becomes a status
// naming what threw. Header-only; thread-safe.

#ifndef IDEM_ENGINE_USER_CODE_H_
#define IDEM_ENGINE_USER_CODE_H_

#include <exception>
#include <string>
#include <string_view>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "engine/absl_view.h"

namespace idem {

// Returns call()'s result (an absl::Status or absl::StatusOr), or, if it
// threw, a status with `code` (kInternal by default) and the message
// "<what> threw: <what()>" ("<what> threw a non-standard exception" for a
// throw that is not a std::exception).
template <typename Call>
auto CallUserCode(std::string_view what, Call&& call,
                  absl::StatusCode code = absl::StatusCode::kInternal)
    -> decltype(call()) {
  try {
    return std::forward<Call>(call)();
  } catch (const std::exception& e) {
    return absl::Status(code,
                        absl::StrCat(AbslView(what), " threw: ", e.what()));
  } catch (...) {
    return absl::Status(
        code, absl::StrCat(AbslView(what), " threw a non-standard exception"));
  }
}

}  // namespace idem

#endif  // IDEM_ENGINE_USER_CODE_H_
