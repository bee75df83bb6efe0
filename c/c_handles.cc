// The C API's codes, last error, versions, options and messages
// (include/idem/c.h).

#include <cstdlib>
#include <string>

#include "absl/time/time.h"
#include "c/c_internal.h"
#include "idem/version.h"

namespace idem::c_api {
namespace {

thread_local std::string last_error;

constexpr const char* kCodeNames[] = {"OK",
                                      "CANCELLED",
                                      "UNKNOWN",
                                      "INVALID_ARGUMENT",
                                      "DEADLINE_EXCEEDED",
                                      "NOT_FOUND",
                                      "ALREADY_EXISTS",
                                      "PERMISSION_DENIED",
                                      "RESOURCE_EXHAUSTED",
                                      "FAILED_PRECONDITION",
                                      "ABORTED",
                                      "OUT_OF_RANGE",
                                      "UNIMPLEMENTED",
                                      "INTERNAL",
                                      "UNAVAILABLE",
                                      "DATA_LOSS",
                                      "UNAUTHENTICATED"};
constexpr int kCodeCount = sizeof(kCodeNames) / sizeof(kCodeNames[0]);

}  // namespace

idem_code ToCode(absl::StatusCode code) {
  const int n = static_cast<int>(code);
  return n >= 0 && n < kCodeCount ? static_cast<idem_code>(n) : IDEM_UNKNOWN;
}

absl::StatusCode ToStatusCode(const idem_code& code) {
  const int n = EnumValue(code);
  return n >= 0 && n < kCodeCount ? static_cast<absl::StatusCode>(n)
                                  : absl::StatusCode::kUnknown;
}

absl::Time FromMicros(int64_t us) {
  if (us == IDEM_TIME_INFINITE_PAST) return absl::InfinitePast();
  if (us == IDEM_TIME_INFINITE_FUTURE) return absl::InfiniteFuture();
  return absl::FromUnixMicros(us);
}

int64_t ToMicros(absl::Time time) {
  if (time == absl::InfinitePast()) return IDEM_TIME_INFINITE_PAST;
  if (time == absl::InfiniteFuture()) return IDEM_TIME_INFINITE_FUTURE;
  return absl::ToUnixMicros(time);
}

idem_code Fail(const absl::Status& status) {
  if (status.ok()) return IDEM_OK;
  last_error.assign(status.message().data(), status.message().size());
  return ToCode(status.code());
}

idem_code InvalidArgument(const std::string& message) {
  return Fail(absl::InvalidArgumentError(message));
}

idem_code CheckBytes(const void* data, size_t size, const char* what) {
  if (data == nullptr && size != 0) {
    return InvalidArgument(std::string(what) + " is NULL with a size of " +
                           std::to_string(size));
  }
  return IDEM_OK;
}

ActiveCall::~ActiveCall() {
  if (engine_ == nullptr) return;
  absl::MutexLock lock(&handle_->mu);
  --handle_->active;
}

idem_code ActiveCall::Acquire(const char* what) {
  if (handle_ == nullptr) {
    return InvalidArgument(std::string(what) + ": engine is NULL");
  }
  absl::MutexLock lock(&handle_->mu);
  if (handle_->closed) {
    return Fail(absl::FailedPreconditionError(std::string(what) +
                                              ": engine is closed"));
  }
  ++handle_->active;
  engine_ = handle_->engine.get();
  return IDEM_OK;
}

}  // namespace idem::c_api

idem::Message idem_message::View() const {
  idem::Message m;
  m.id = id;
  m.payload = payload;
  m.source = source;
  m.partition = partition;
  m.offset = offset;
  m.ttl = absl::Milliseconds(ttl_ms);
  m.fingerprint = fingerprint;
  m.event_time = idem::c_api::FromMicros(event_time_us);
  return m;
}

using idem::c_api::CheckBytes;
using idem::c_api::Guarded;
using idem::c_api::InvalidArgument;

// Declared extern "C" in idem/c.h, so defined with C linkage.

int idem_c_api_version(void) { return IDEM_C_API_VERSION; }

int idem_c_api_minor(void) { return IDEM_C_API_MINOR; }

const char* idem_version(void) { return IDEM_VERSION; }

const char* idem_code_name(idem_code code) {
  const int n = idem::c_api::EnumValue(code);
  return n >= 0 && n < idem::c_api::kCodeCount ? idem::c_api::kCodeNames[n]
                                               : "UNKNOWN";
}

const char* idem_last_error(void) { return idem::c_api::last_error.c_str(); }

void idem_free(void* buffer) { std::free(buffer); }

// ---- Options ----

idem_options* idem_options_new(void) {
  return new (std::nothrow) idem_options();
}

void idem_options_free(idem_options* options) { delete options; }

namespace {

// Runs `set` on a non-NULL options handle.
template <typename Set>
idem_code SetOption(idem_options* options, const char* what, Set&& set) {
  if (options == nullptr) {
    return InvalidArgument(std::string(what) + ": options is NULL");
  }
  return set(options->options);
}

idem_code SetFlag(idem_options* options, const char* what,
                  bool idem::Options::*field, int on) {
  return SetOption(options, what, [&](idem::Options& o) {
    o.*field = on != 0;
    return IDEM_OK;
  });
}

idem_code SetInt(idem_options* options, const char* what,
                 int idem::Options::*field, int value) {
  return SetOption(options, what, [&](idem::Options& o) {
    o.*field = value;
    return IDEM_OK;
  });
}

idem_code SetSize(idem_options* options, const char* what,
                  size_t idem::Options::*field, int64_t bytes) {
  return SetOption(options, what, [&](idem::Options& o) {
    if (bytes < 0) {
      return InvalidArgument(std::string(what) + ": negative size " +
                             std::to_string(bytes));
    }
    o.*field = static_cast<size_t>(bytes);
    return IDEM_OK;
  });
}

}  // namespace

idem_code idem_options_set_dedupe_window_ms(idem_options* options,
                                            int64_t window_ms) {
  return SetOption(options, "set_dedupe_window_ms", [&](idem::Options& o) {
    o.dedupe_window = absl::Milliseconds(window_ms);
    return IDEM_OK;
  });
}

idem_code idem_options_set_durability(idem_options* options,
                                      idem_durability durability) {
  return SetOption(options, "set_durability", [&](idem::Options& o) {
    const int n = idem::c_api::EnumValue(durability);
    switch (n) {
      case IDEM_DURABILITY_SYNC:
        o.durability = idem::Durability::kSync;
        return IDEM_OK;
      case IDEM_DURABILITY_BUFFERED:
        o.durability = idem::Durability::kBuffered;
        return IDEM_OK;
    }
    return InvalidArgument("set_durability: unknown durability " +
                           std::to_string(n));
  });
}

idem_code idem_options_set_dedupe_scope(idem_options* options,
                                        idem_dedupe_scope scope) {
  return SetOption(options, "set_dedupe_scope", [&](idem::Options& o) {
    const int n = idem::c_api::EnumValue(scope);
    switch (n) {
      case IDEM_DEDUPE_SCOPE_STORE:
        o.dedupe_scope = idem::DedupeScope::kStore;
        return IDEM_OK;
      case IDEM_DEDUPE_SCOPE_PARTITION:
        o.dedupe_scope = idem::DedupeScope::kPartition;
        return IDEM_OK;
    }
    return InvalidArgument("set_dedupe_scope: unknown scope " +
                           std::to_string(n));
  });
}

idem_code idem_options_set_create_if_missing(idem_options* options, int on) {
  return SetFlag(options, "set_create_if_missing",
                 &idem::Options::create_if_missing, on);
}

idem_code idem_options_set_read_only(idem_options* options, int on) {
  return SetFlag(options, "set_read_only", &idem::Options::read_only, on);
}

idem_code idem_options_set_detect_conflicts(idem_options* options, int on) {
  return SetFlag(options, "set_detect_conflicts",
                 &idem::Options::detect_conflicts, on);
}

idem_code idem_options_set_refresh_on_duplicate(idem_options* options, int on) {
  return SetFlag(options, "set_refresh_on_duplicate",
                 &idem::Options::refresh_on_duplicate, on);
}

idem_code idem_options_set_block_cache_bytes(idem_options* options,
                                             int64_t bytes) {
  return SetSize(options, "set_block_cache_bytes",
                 &idem::Options::block_cache_bytes, bytes);
}

idem_code idem_options_set_write_buffer_bytes(idem_options* options,
                                              int64_t bytes) {
  return SetSize(options, "set_write_buffer_bytes",
                 &idem::Options::write_buffer_bytes, bytes);
}

idem_code idem_options_set_bloom_bits_per_key(idem_options* options, int bits) {
  return SetInt(options, "set_bloom_bits_per_key",
                &idem::Options::bloom_bits_per_key, bits);
}

idem_code idem_options_set_max_background_jobs(idem_options* options,
                                               int jobs) {
  return SetInt(options, "set_max_background_jobs",
                &idem::Options::max_background_jobs, jobs);
}

idem_code idem_options_set_expiry_buckets(idem_options* options, int buckets) {
  return SetInt(options, "set_expiry_buckets", &idem::Options::expiry_buckets,
                buckets);
}

idem_code idem_options_set_state_ttl_ms(idem_options* options, int64_t ttl_ms) {
  return SetOption(options, "set_state_ttl_ms", [&](idem::Options& o) {
    o.state_ttl =
        ttl_ms == 0 ? absl::InfiniteDuration() : absl::Milliseconds(ttl_ms);
    return IDEM_OK;
  });
}

// ---- Messages ----

idem_message* idem_message_new(void) {
  return new (std::nothrow) idem_message();
}

void idem_message_free(idem_message* message) { delete message; }

namespace {

idem_code SetMessageBytes(idem_message* message, const char* what,
                          std::string idem_message::*field, const void* data,
                          size_t size) {
  if (message == nullptr) {
    return InvalidArgument(std::string(what) + ": message is NULL");
  }
  if (idem_code c = CheckBytes(data, size, what); c != IDEM_OK) return c;
  return Guarded(what, [&] {
    (message->*field).assign(static_cast<const char*>(data), size);
    return IDEM_OK;
  });
}

const char* MessageBytes(const idem_message* message,
                         const std::string idem_message::*field, size_t* size) {
  if (message == nullptr) {
    if (size != nullptr) *size = 0;
    return nullptr;
  }
  if (size != nullptr) *size = (message->*field).size();
  return (message->*field).data();
}

}  // namespace

idem_code idem_message_set_id(idem_message* message, const void* id,
                              size_t size) {
  return SetMessageBytes(message, "message_set_id", &idem_message::id, id,
                         size);
}

idem_code idem_message_set_payload(idem_message* message, const void* payload,
                                   size_t size) {
  return SetMessageBytes(message, "message_set_payload", &idem_message::payload,
                         payload, size);
}

idem_code idem_message_set_source(idem_message* message, const void* source,
                                  size_t size) {
  return SetMessageBytes(message, "message_set_source", &idem_message::source,
                         source, size);
}

idem_code idem_message_set_fingerprint(idem_message* message,
                                       const void* fingerprint, size_t size) {
  return SetMessageBytes(message, "message_set_fingerprint",
                         &idem_message::fingerprint, fingerprint, size);
}

idem_code idem_message_set_partition(idem_message* message, int32_t partition) {
  if (message == nullptr) {
    return InvalidArgument("message_set_partition: message is NULL");
  }
  message->partition = partition;
  return IDEM_OK;
}

idem_code idem_message_set_offset(idem_message* message, int64_t offset) {
  if (message == nullptr) {
    return InvalidArgument("message_set_offset: message is NULL");
  }
  message->offset = offset;
  return IDEM_OK;
}

idem_code idem_message_set_ttl_ms(idem_message* message, int64_t ttl_ms) {
  if (message == nullptr) {
    return InvalidArgument("message_set_ttl_ms: message is NULL");
  }
  message->ttl_ms = ttl_ms;
  return IDEM_OK;
}

idem_code idem_message_set_event_time_us(idem_message* message,
                                         int64_t event_time_us) {
  if (message == nullptr) {
    return InvalidArgument("message_set_event_time_us: message is NULL");
  }
  message->event_time_us = event_time_us;
  return IDEM_OK;
}

const char* idem_message_id(const idem_message* message, size_t* size) {
  return MessageBytes(message, &idem_message::id, size);
}

const char* idem_message_payload(const idem_message* message, size_t* size) {
  return MessageBytes(message, &idem_message::payload, size);
}

const char* idem_message_source(const idem_message* message, size_t* size) {
  return MessageBytes(message, &idem_message::source, size);
}

int32_t idem_message_partition(const idem_message* message) {
  return message == nullptr ? 0 : message->partition;
}

int64_t idem_message_offset(const idem_message* message) {
  return message == nullptr ? -1 : message->offset;
}

int64_t idem_message_event_time_us(const idem_message* message) {
  return message == nullptr ? IDEM_TIME_INFINITE_PAST : message->event_time_us;
}
