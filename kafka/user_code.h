// Calls into user code (ID functions, dead-letter callbacks, assignment
// observers) so that an exception never crosses into librdkafka's C code or
// the engine: a throw becomes kInternal naming `what`. Thread-safe.

#ifndef IDEM_KAFKA_USER_CODE_H_
#define IDEM_KAFKA_USER_CODE_H_

#include <exception>
#include <string>
#include <string_view>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "engine/absl_view.h"

namespace idem::kafka {

// Returns call()'s result (an absl::Status or absl::StatusOr), or kInternal
// if it threw.
template <typename Call>
auto CallUserCode(std::string_view what, Call&& call) -> decltype(call()) {
  try {
    return std::forward<Call>(call)();
  } catch (const std::exception& e) {
    return absl::InternalError(
        absl::StrCat(AbslView(what), " threw: ", e.what()));
  } catch (...) {
    return absl::InternalError(
        absl::StrCat(AbslView(what), " threw a non-standard exception"));
  }
}

}  // namespace idem::kafka

#endif  // IDEM_KAFKA_USER_CODE_H_
