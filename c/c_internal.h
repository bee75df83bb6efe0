// The C API's handles (include/idem/c.h) and the helpers its calls share:
// turning an absl::Status into an idem_code plus the thread's last error,
// and the one try/catch every entry point goes through so that no C++
// exception crosses into C. Internal to c/; the handles are opaque outside.
//
// idem_engine is safe for concurrent access from multiple threads without
// external synchronization; the other handles are not thread-safe.

#ifndef IDEM_C_C_INTERNAL_H_
#define IDEM_C_C_INTERNAL_H_

#include <cstdint>
#include <cstring>
#include <exception>
#include <memory>
#include <new>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "idem/c.h"
#include "idem/engine.h"
#include "idem/message.h"
#include "idem/options.h"
#include "idem/outbox.h"
#include "idem/timers.h"

struct idem_options {
  idem::Options options;
};

// Owns every byte: a Message's views point into these strings.
struct idem_message {
  std::string id;
  std::string payload;
  std::string source;
  std::string fingerprint;
  int32_t partition = 0;
  int64_t offset = -1;
  int64_t ttl_ms = 0;
  int64_t event_time_us = IDEM_TIME_INFINITE_PAST;

  // A view of this message for the engine (valid while it is unchanged).
  idem::Message View() const;
};

struct idem_result {
  idem::Result result;
  std::string error_message;  // result.error's message, NUL-terminated
};

struct idem_result_list {
  std::vector<idem_result> results;
};

struct idem_outbox_batch {
  std::vector<idem::OutboxEntry> entries;
};

// A timer: `fire` points at `owned` (idem_engine_next_timer's handles) or
// at the engine's TimerFire during a timer handler call (a view).
struct idem_timer {
  idem::TimerFire owned;
  const idem::TimerFire* fire = &owned;

  idem_timer() = default;
  explicit idem_timer(const idem::TimerFire& view) : fire(&view) {}
  idem_timer(const idem_timer&) = delete;
  idem_timer& operator=(const idem_timer&) = delete;
};

// An engine handle: the engine, and the close protocol. Calls register as
// active while they run; idem_engine_close marks the handle closed, waits
// for the active calls to end, then destroys the engine.
struct idem_engine {
  absl::Mutex mu;
  std::unique_ptr<idem::Engine> engine ABSL_GUARDED_BY(mu);
  int active ABSL_GUARDED_BY(mu) = 0;
  bool closed ABSL_GUARDED_BY(mu) = false;
};

namespace idem::c_api {

// Records `status`'s message as the thread's last error and returns its
// code (IDEM_OK, leaving the last error alone, for OK).
idem_code Fail(const absl::Status& status);
// Fail(absl::InvalidArgumentError(message)).
idem_code InvalidArgument(const std::string& message);
idem_code ToCode(absl::StatusCode code);
// The idem::TimeDomain of a C domain, or nullopt for a number that is none
// (c/c_timers.cc); and back.
std::optional<idem::TimeDomain> ToTimeDomain(const idem_time_domain& domain);
idem_time_domain ToCDomain(idem::TimeDomain domain);
// Microseconds since the epoch to absl::Time and back, the ends of time
// (IDEM_TIME_INFINITE_PAST / _FUTURE) as absl's infinities.
absl::Time FromMicros(int64_t us);
int64_t ToMicros(absl::Time time);
absl::StatusCode ToStatusCode(const idem_code& code);

// The number a C caller passed as an enum. C allows any int there; in C++
// loading an enum value outside the enum's range is undefined (UBSan's
// -fsanitize=enum reports it), so the bytes are copied, never loaded as
// the enum. Take the argument by reference: a copy would be such a load.
template <typename Enum>
int EnumValue(const Enum& value) {
  static_assert(sizeof(Enum) == sizeof(int));
  int n;
  std::memcpy(&n, &value, sizeof n);
  return n;
}

// Runs `call` (returning an idem_code); a std::bad_alloc becomes
// IDEM_RESOURCE_EXHAUSTED and any other exception IDEM_INTERNAL, each with
// the thread's last error set, so nothing thrown leaves the C API.
template <typename Call>
idem_code Guarded(const char* what, Call&& call) noexcept {
  try {
    return std::forward<Call>(call)();
  } catch (const std::bad_alloc&) {
    return Fail(
        absl::ResourceExhaustedError(std::string(what) + ": out of memory"));
  } catch (const std::exception& e) {
    return Fail(absl::InternalError(std::string(what) + " threw: " + e.what()));
  } catch (...) {
    return Fail(absl::InternalError(std::string(what) +
                                    " threw a non-standard exception"));
  }
}

// A call's use of an engine handle: Acquire() fails (with the thread's
// last error set) on a NULL or closed handle; otherwise the engine stays
// open until the ActiveCall is destroyed.
class ActiveCall {
 public:
  explicit ActiveCall(idem_engine* handle) : handle_(handle) {}
  ActiveCall(const ActiveCall&) = delete;
  ActiveCall& operator=(const ActiveCall&) = delete;
  ~ActiveCall();

  // IDEM_OK and the engine, or the code of why not.
  idem_code Acquire(const char* what);
  idem::Engine& engine() const { return *engine_; }

 private:
  idem_engine* const handle_;
  idem::Engine* engine_ = nullptr;
};

// Checks a (data, size) byte argument: NULL data with a non-zero size is
// IDEM_INVALID_ARGUMENT naming `what`.
idem_code CheckBytes(const void* data, size_t size, const char* what);
inline std::string_view Bytes(const void* data, size_t size) {
  return size == 0 ? std::string_view()
                   : std::string_view(static_cast<const char*>(data), size);
}

// A getter's view of `field` (NULL and size 0 for a NULL field); `size`
// may be NULL.
inline const char* ViewBytes(const std::string* field, size_t* size) {
  if (size != nullptr) *size = field == nullptr ? 0 : field->size();
  return field == nullptr ? nullptr : field->data();
}

// Scans (c/c_txn.cc): CheckScan checks a scan's range and visitor (the
// code, named `what`, or IDEM_OK); RunScan calls `scan` with `visit` as an
// idem::ScanVisitor and the options `reverse` and `limit` give.
idem_code CheckScan(const void* begin, size_t begin_size, const void* end,
                    size_t end_size, idem_scan_visitor visit, const char* what);
absl::Status RunScan(
    absl::FunctionRef<absl::Status(ScanVisitor, const ScanOptions&)> scan,
    int reverse, size_t limit, idem_scan_visitor visit, void* user);

// Whether a handler of `handle` is running on this thread (c/c_txn.cc).
bool InHandlerOf(const idem_engine* handle);

// Runs the C `handler` for `message` with a txn token valid during the call
// only, and maps its return value to a status: IDEM_HANDLER_COMMIT to OK,
// IDEM_HANDLER_PERMANENT to idem::PermanentError, anything else to the
// error set with idem_txn_set_error (or kUnknown).
absl::Status RunCHandler(const idem_engine* engine, idem_handler handler,
                         void* user, const idem_message* message,
                         idem::Txn& txn);
// As RunCHandler, for a timer handler and the timer that fires.
absl::Status RunCTimerHandler(const idem_engine* engine,
                              idem_timer_handler handler, void* user,
                              const idem::TimerFire& fire, idem::Txn& txn);

}  // namespace idem::c_api

#endif  // IDEM_C_C_INTERNAL_H_
