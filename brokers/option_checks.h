// The checks of ConsumerOptions fields that every broker adapter has, in one
// place: the error naming the options type, the server address and the
// connection's durations. Each returns "" when the fields are right, else the
// rule they break, as TlsFilesProblem (brokers/tls_files.h) does.
// Thread-compatible (pure functions).

#ifndef IDEM_BROKERS_OPTION_CHECKS_H_
#define IDEM_BROKERS_OPTION_CHECKS_H_

#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace idem::brokers {

// kInvalidArgument "<adapter>::ConsumerOptions::<what>", e.g.
// InvalidOption("redis", "host is required").
inline absl::Status InvalidOption(const char* adapter, std::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(
      adapter,
      "::ConsumerOptions::", absl::string_view(what.data(), what.size())));
}

// `host` names a server and `port` is a TCP port.
inline std::string AddressProblem(const std::string& host, int port) {
  if (host.empty()) return "host is required";
  if (port < 1 || port > 65535) return "port must be in [1, 65535]";
  return "";
}

// Options::io_timeout is > 0 and finite, Options::reconnect_backoff >= 0 and
// finite.
template <typename Options>
std::string ConnectionTimesProblem(const Options& options) {
  if (options.io_timeout <= absl::ZeroDuration() ||
      options.io_timeout == absl::InfiniteDuration()) {
    return "io_timeout must be > 0 and finite";
  }
  if (options.reconnect_backoff < absl::ZeroDuration() ||
      options.reconnect_backoff == absl::InfiniteDuration()) {
    return "reconnect_backoff must be >= 0 and finite";
  }
  return "";
}

}  // namespace idem::brokers

#endif  // IDEM_BROKERS_OPTION_CHECKS_H_
