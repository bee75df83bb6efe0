// Debian 12's Abseil is built with its own absl::string_view, distinct from
// std::string_view; AbslView converts for Abseil calls (StrCat, SimpleAtoi).

#ifndef IDEM_ENGINE_ABSL_VIEW_H_
#define IDEM_ENGINE_ABSL_VIEW_H_

#include <string_view>

#include "absl/strings/string_view.h"

namespace idem {

inline absl::string_view AbslView(std::string_view s) {
  return absl::string_view(s.data(), s.size());
}

}  // namespace idem

#endif  // IDEM_ENGINE_ABSL_VIEW_H_
