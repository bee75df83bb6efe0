// The C API's engine calls for time and timers (include/idem/c.h, "Time,
// timers and state TTL"): stream time, firing timers with a C handler, the
// next timer, and the idem_timer handle. The txn's timer calls are in
// c/c_txn.cc.

#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "c/c_internal.h"

namespace idem::c_api {

std::optional<idem::TimeDomain> ToTimeDomain(const idem_time_domain& domain) {
  switch (EnumValue(domain)) {
    case IDEM_TIME_EVENT:
      return idem::TimeDomain::kEvent;
    case IDEM_TIME_PROCESSING:
      return idem::TimeDomain::kProcessing;
  }
  return std::nullopt;
}

idem_time_domain ToCDomain(idem::TimeDomain domain) {
  return domain == idem::TimeDomain::kProcessing ? IDEM_TIME_PROCESSING
                                                 : IDEM_TIME_EVENT;
}

namespace {

// Checks an engine timer call's partition and domain: IDEM_OK and the
// domain in *out, or IDEM_INVALID_ARGUMENT naming `what`.
idem_code CheckPartition(const void* source, size_t source_size,
                         const idem_time_domain& domain, const char* what,
                         idem::TimeDomain* out) {
  if (idem_code c = CheckBytes(source, source_size,
                               absl::StrCat(what, ": source").c_str());
      c != IDEM_OK) {
    return c;
  }
  const std::optional<idem::TimeDomain> known = ToTimeDomain(domain);
  if (!known.has_value()) {
    return InvalidArgument(absl::StrCat(what, ": domain ", EnumValue(domain),
                                        " is not an idem_time_domain"));
  }
  *out = *known;
  return IDEM_OK;
}

const char* FieldBytes(const idem_timer* timer,
                       const std::string idem::TimerFire::*field,
                       size_t* size) {
  return ViewBytes(timer == nullptr ? nullptr : &(timer->fire->*field), size);
}

}  // namespace
}  // namespace idem::c_api

using idem::c_api::ActiveCall;
using idem::c_api::Fail;
using idem::c_api::Guarded;
using idem::c_api::InvalidArgument;

// Declared extern "C" in idem/c.h, so defined with C linkage.

void idem_timer_free(idem_timer* timer) { delete timer; }

const char* idem_timer_source(const idem_timer* timer, size_t* size) {
  return idem::c_api::FieldBytes(timer, &idem::TimerFire::source, size);
}

int32_t idem_timer_partition(const idem_timer* timer) {
  return timer == nullptr ? 0 : timer->fire->partition;
}

idem_time_domain idem_timer_domain(const idem_timer* timer) {
  return timer == nullptr ? IDEM_TIME_EVENT
                          : idem::c_api::ToCDomain(timer->fire->domain);
}

const char* idem_timer_key(const idem_timer* timer, size_t* size) {
  return idem::c_api::FieldBytes(timer, &idem::TimerFire::timer_key, size);
}

int64_t idem_timer_fire_at_us(const idem_timer* timer) {
  return timer == nullptr ? IDEM_TIME_INFINITE_PAST
                          : idem::c_api::ToMicros(timer->fire->fire_at);
}

const char* idem_timer_payload(const idem_timer* timer, size_t* size) {
  return idem::c_api::FieldBytes(timer, &idem::TimerFire::payload, size);
}

idem_code idem_engine_fire_timers(idem_engine* engine, const void* source,
                                  size_t source_size, int32_t partition,
                                  idem_time_domain domain, int64_t up_to_us,
                                  size_t max, idem_timer_handler handler,
                                  void* user, size_t* fired) {
  if (fired == nullptr) {
    return InvalidArgument("engine_fire_timers: fired is NULL");
  }
  *fired = 0;
  if (handler == nullptr) {
    return InvalidArgument("engine_fire_timers: handler is NULL");
  }
  idem::TimeDomain d{};
  if (idem_code c = idem::c_api::CheckPartition(source, source_size, domain,
                                                "engine_fire_timers", &d);
      c != IDEM_OK) {
    return c;
  }
  ActiveCall call(engine);
  if (idem_code c = call.Acquire("engine_fire_timers"); c != IDEM_OK) return c;
  return Guarded("engine_fire_timers", [&] {
    absl::StatusOr<size_t> got = call.engine().FireTimers(
        idem::c_api::Bytes(source, source_size), partition, d,
        idem::c_api::FromMicros(up_to_us), max,
        [&](const idem::TimerFire& fire, idem::Txn& txn) {
          return idem::c_api::RunCTimerHandler(engine, handler, user, fire,
                                               txn);
        });
    if (!got.ok()) return Fail(got.status());
    *fired = *got;
    return IDEM_OK;
  });
}

idem_code idem_engine_next_timer(idem_engine* engine, const void* source,
                                 size_t source_size, int32_t partition,
                                 idem_time_domain domain, idem_timer** timer) {
  if (timer == nullptr) {
    return InvalidArgument("engine_next_timer: timer is NULL");
  }
  *timer = nullptr;
  idem::TimeDomain d{};
  if (idem_code c = idem::c_api::CheckPartition(source, source_size, domain,
                                                "engine_next_timer", &d);
      c != IDEM_OK) {
    return c;
  }
  ActiveCall call(engine);
  if (idem_code c = call.Acquire("engine_next_timer"); c != IDEM_OK) return c;
  return Guarded("engine_next_timer", [&] {
    absl::StatusOr<std::optional<idem::TimerFire>> got =
        call.engine().NextTimer(idem::c_api::Bytes(source, source_size),
                                partition, d);
    if (!got.ok()) return Fail(got.status());
    if (!got->has_value()) return IDEM_OK;
    auto handle = std::make_unique<idem_timer>();
    handle->owned = std::move(**got);
    *timer = handle.release();
    return IDEM_OK;
  });
}

idem_code idem_engine_stream_time(idem_engine* engine, const void* source,
                                  size_t source_size, int32_t partition,
                                  int64_t* stream_time_us) {
  if (stream_time_us == nullptr) {
    return InvalidArgument("engine_stream_time: stream_time_us is NULL");
  }
  *stream_time_us = IDEM_TIME_INFINITE_PAST;
  if (idem_code c = idem::c_api::CheckBytes(source, source_size,
                                            "engine_stream_time: source");
      c != IDEM_OK) {
    return c;
  }
  ActiveCall call(engine);
  if (idem_code c = call.Acquire("engine_stream_time"); c != IDEM_OK) return c;
  return Guarded("engine_stream_time", [&] {
    absl::StatusOr<absl::Time> got = call.engine().StreamTime(
        idem::c_api::Bytes(source, source_size), partition);
    if (!got.ok()) return Fail(got.status());
    *stream_time_us = idem::c_api::ToMicros(*got);
    return IDEM_OK;
  });
}
