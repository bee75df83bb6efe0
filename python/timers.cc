// idem._idem's time and timer calls (python/binding.h): times as Python
// sees them, Txn.stream_time / set_timer / cancel_timer, and _Engine's
// stream_time, next_timer and fire_timers over the C API's (include/idem/
// c.h, "Time, timers and state TTL").

#include <cmath>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "python/binding.h"

namespace idem::python {

int64_t TimeMicros(py::handle time, const char* what, int64_t none) {
  if (time.is_none()) return none;
  double seconds = 0;
  if (py::hasattr(time, "timestamp")) {
    seconds = time.attr("timestamp")().cast<double>();
  } else if ((PyFloat_Check(time.ptr()) || PyLong_Check(time.ptr())) &&
             !PyBool_Check(time.ptr())) {
    seconds = time.cast<double>();
  } else {
    throw py::type_error(std::string(what) +
                         " must be seconds since the epoch or a datetime, "
                         "not " +
                         Py_TYPE(time.ptr())->tp_name);
  }
  if (std::isinf(seconds)) {
    return seconds < 0 ? IDEM_TIME_INFINITE_PAST : IDEM_TIME_INFINITE_FUTURE;
  }
  // Microseconds' int64 range, short of the two ends of time.
  constexpr double kLimit = 9.2e12;
  if (std::isnan(seconds) || std::fabs(seconds) > kLimit) {
    RaiseObject(ErrorFor(IDEM_INVALID_ARGUMENT,
                         (std::string(what) + " " + std::to_string(seconds) +
                          " is not a time in microseconds' range")
                             .c_str()));
  }
  return static_cast<int64_t>(std::llround(seconds * 1e6));
}

py::object TimeToPython(int64_t us) {
  if (us == IDEM_TIME_INFINITE_PAST) return py::none();
  return py::float_(static_cast<double>(us) / 1e6);
}

namespace {

py::object StreamTimeOfTxn(const Txn& t) {
  int64_t us = IDEM_TIME_INFINITE_PAST;
  Check(idem_txn_stream_time(t.txn, &us));
  return TimeToPython(us);
}

void SetTimer(const Txn& t, py::handle timer_key, idem_time_domain domain,
              py::handle fire_at, py::handle payload) {
  const std::string_view k = BytesOf(timer_key, "timer_key", true);
  const std::string_view p = BytesOf(payload, "payload", false);
  // None is an infinite time, which the engine refuses.
  const int64_t at = TimeMicros(fire_at, "fire_at", IDEM_TIME_INFINITE_PAST);
  Check(idem_txn_set_timer(t.txn, k.data(), k.size(), domain, at, p.data(),
                           p.size()));
}

void CancelTimer(const Txn& t, py::handle timer_key) {
  const std::string_view k = BytesOf(timer_key, "timer_key", true);
  Check(idem_txn_cancel_timer(t.txn, k.data(), k.size()));
}

py::bytes ViewBytes(const char* data, size_t size) {
  return py::bytes(size == 0 ? "" : data, size);
}

// (source, partition, domain, timer_key, fire_at, payload): the fields of
// idem.TimerFire.
py::tuple TimerTuple(const idem_timer* timer) {
  size_t n = 0;
  const char* source = idem_timer_source(timer, &n);
  PyObject* s = PyUnicode_DecodeUTF8(
      n == 0 ? "" : source, static_cast<Py_ssize_t>(n), "surrogateescape");
  if (s == nullptr) throw py::error_already_set();
  py::object source_object = py::reinterpret_steal<py::object>(s);
  const char* key = idem_timer_key(timer, &n);
  py::bytes k = ViewBytes(key, n);
  const char* payload = idem_timer_payload(timer, &n);
  py::bytes p = ViewBytes(payload, n);
  return py::make_tuple(source_object, idem_timer_partition(timer),
                        idem_timer_domain(timer), k,
                        TimeToPython(idem_timer_fire_at_us(timer)), p);
}

// What one fire_timers call's handler calls share.
struct TimerCallContext {
  py::handle handler;
  bool gil_released = true;
  // The exception the last handler call raised (an Exception), if any.
  py::object raised;
  // A BaseException that is not an Exception: the call raises it once the
  // engine returns (its transient failure stops the firing).
  py::object interrupt;
};

// The C timer handler: takes the GIL back (when the call released it) and
// never lets an exception out into the engine.
int TimerTrampoline(void* user, const idem_timer* timer, idem_txn* txn) {
  auto& ctx = *static_cast<TimerCallContext*>(user);
  std::optional<py::gil_scoped_acquire> gil;
  if (ctx.gil_released) gil.emplace();
  try {
    ctx.raised = py::object();
    return CallHandler(ctx.handler, TimerTuple(timer), txn, ctx.raised,
                       ctx.interrupt);
  } catch (const std::exception& e) {
    idem_txn_set_error(txn, IDEM_INTERNAL, e.what());
  } catch (...) {
    idem_txn_set_error(txn, IDEM_INTERNAL, "timer handler call failed");
  }
  return 1;
}

}  // namespace

py::object Engine::StreamTime(py::handle source, int32_t partition) {
  const std::string_view s = BytesOf(source, "source", true);
  int64_t us = IDEM_TIME_INFINITE_PAST;
  idem_code c;
  {
    py::gil_scoped_release release;
    c = idem_engine_stream_time(engine_, s.data(), s.size(), partition, &us);
  }
  Check(c);
  return TimeToPython(us);
}

py::object Engine::NextTimer(py::handle source, int32_t partition,
                             idem_time_domain domain) {
  const std::string_view s = BytesOf(source, "source", true);
  idem_timer* timer = nullptr;
  idem_code c;
  {
    py::gil_scoped_release release;
    c = idem_engine_next_timer(engine_, s.data(), s.size(), partition, domain,
                               &timer);
  }
  Check(c);
  if (timer == nullptr) return py::none();
  std::unique_ptr<idem_timer, void (*)(idem_timer*)> owned(timer,
                                                           idem_timer_free);
  return TimerTuple(timer);
}

size_t Engine::FireTimers(py::handle source, int32_t partition,
                          idem_time_domain domain, py::handle up_to, size_t max,
                          py::object handler) {
  if (!PyCallable_Check(handler.ptr())) {
    throw py::type_error("handler must be callable");
  }
  const std::string_view s = BytesOf(source, "source", true);
  const int64_t up_to_us =
      TimeMicros(up_to, "up_to", IDEM_TIME_INFINITE_FUTURE);
  TimerCallContext ctx;
  ctx.handler = handler;
  ctx.gil_released = ReleaseGil();
  size_t fired = 0;
  idem_code c;
  {
    std::optional<py::gil_scoped_release> release;
    if (ctx.gil_released) release.emplace();
    c = idem_engine_fire_timers(engine_, s.data(), s.size(), partition, domain,
                                up_to_us, max, TimerTrampoline, &ctx, &fired);
  }
  if (ctx.interrupt) RaiseObject(ctx.interrupt);
  // A handler's transient failure stopped the call: raise what it raised.
  if (c != IDEM_OK && ctx.raised) RaiseObject(ctx.raised);
  Check(c);
  return fired;
}

void BindTimers(py::module_& m) {
  py::enum_<idem_time_domain>(m, "TimeDomain", "The clock a timer follows.")
      .value("EVENT", IDEM_TIME_EVENT,
             "the partition's stream time: due once its committed messages "
             "carry an event time at or past the timer's")
      .value("PROCESSING", IDEM_TIME_PROCESSING,
             "the engine's clock: due once it reaches the timer's time");
  auto txn = py::reinterpret_borrow<py::class_<Txn>>(m.attr("Txn"));
  txn.def_property_readonly(
         "stream_time", &StreamTimeOfTxn,
         "The stream time of the message's (source, partition) as this "
         "handler sees it (seconds since the epoch), or None if no message "
         "carried an event time. In a timer's handler, that of the timer's "
         "partition.")
      .def("set_timer", &SetTimer, py::arg("timer_key"), py::arg("domain"),
           py::arg("fire_at"), py::arg("payload") = py::bytes(""),
           "Buffers the timer timer_key of the message's (source, "
           "partition), committed with the message: once fire_at (seconds "
           "since the epoch or a datetime) is reached in domain (an "
           "idem.TimeDomain), Engine.fire_timers runs its handler with "
           "payload. Setting a key again moves its timer. Raises "
           "InvalidArgument, failing the message, for an infinite fire_at; "
           "OutOfRange, setting nothing, for an EVENT timer at or below "
           "stream_time; FailedPrecondition for a message without a "
           "source.")
      .def("cancel_timer", &CancelTimer, py::arg("timer_key"),
           "Buffers the deletion of the timer timer_key of the message's "
           "partition, if there is one. FailedPrecondition for a message "
           "without a source.");
  auto engine = py::reinterpret_borrow<py::class_<Engine>>(m.attr("_Engine"));
  engine.def("stream_time", &Engine::StreamTime)
      .def("next_timer", &Engine::NextTimer)
      .def("fire_timers", &Engine::FireTimers);
}

}  // namespace idem::python
