// idem._idem: the classes of python/binding.h and the module definition.

#include "python/binding.h"

#include <pybind11/stl.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <utility>

#include "c/c_internal.h"

namespace idem::python {
namespace {

// Python objects the extension needs, looked up once at import and kept
// for the process's life (never decref'd: the interpreter may be finalizing
// when statics are destroyed).
struct Classes {
  py::handle error;            // idem._errors.Error
  py::handle permanent_error;  // idem._errors.PermanentError
  py::handle error_for;        // idem._errors._error_for
};
Classes classes;

std::atomic<bool> release_gil{true};

py::bytes ToBytes(const char* data, size_t size) {
  return py::bytes(size == 0 ? "" : data, size);
}

// A source name as Python shows it: str (undecodable bytes escaped), or
// None when empty.
py::object SourceToPython(const char* data, size_t size) {
  if (size == 0) return py::none();
  PyObject* s = PyUnicode_DecodeUTF8(data, static_cast<Py_ssize_t>(size),
                                     "surrogateescape");
  if (s == nullptr) throw py::error_already_set();
  return py::reinterpret_steal<py::object>(s);
}

}  // namespace

void RaiseObject(py::handle exc) {
  PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(exc.ptr())), exc.ptr());
  throw py::error_already_set();
}

py::object ErrorFor(idem_code code, const char* message) {
  return classes.error_for(static_cast<int>(code), py::str(message));
}

void Raise(idem_code code) { RaiseObject(ErrorFor(code, idem_last_error())); }

int64_t TtlMillis(py::handle ttl) {
  if (ttl.is_none()) return 0;
  double seconds = 0;
  if (py::hasattr(ttl, "total_seconds")) {
    seconds = ttl.attr("total_seconds")().cast<double>();
  } else if (PyFloat_Check(ttl.ptr()) || PyLong_Check(ttl.ptr())) {
    seconds = ttl.cast<double>();
  } else {
    throw py::type_error(std::string("ttl must be seconds or a timedelta, "
                                     "not ") +
                         Py_TYPE(ttl.ptr())->tp_name);
  }
  if (!std::isfinite(seconds) || std::fabs(seconds) > 9.2e15) {
    return seconds < 0 ? -1 : INT64_MAX;  // refused by the engine
  }
  return static_cast<int64_t>(std::llround(seconds * 1000));
}

std::string_view BytesOf(py::handle obj, const char* what, bool allow_str) {
  if (PyBytes_Check(obj.ptr())) {
    return std::string_view(PyBytes_AS_STRING(obj.ptr()),
                            static_cast<size_t>(PyBytes_GET_SIZE(obj.ptr())));
  }
  if (PyByteArray_Check(obj.ptr())) {
    return std::string_view(
        PyByteArray_AS_STRING(obj.ptr()),
        static_cast<size_t>(PyByteArray_GET_SIZE(obj.ptr())));
  }
  if (allow_str && PyUnicode_Check(obj.ptr())) {
    Py_ssize_t size = 0;
    const char* data = PyUnicode_AsUTF8AndSize(obj.ptr(), &size);
    if (data == nullptr) throw py::error_already_set();
    return std::string_view(data, static_cast<size_t>(size));
  }
  throw py::type_error(std::string(what) + " must be " +
                       (allow_str ? "bytes or str" : "bytes") + ", not " +
                       Py_TYPE(obj.ptr())->tp_name);
}

// ---- Message ----

Message::Message() : message_(idem_message_new()) {
  if (message_ == nullptr) throw std::bad_alloc();
}

Message::~Message() { idem_message_free(message_); }

void Message::Set(py::handle id, py::handle payload, py::handle source,
                  int32_t partition, int64_t offset, py::handle ttl,
                  py::handle fingerprint, py::handle event_time) {
  const std::string_view id_bytes = BytesOf(id, "id", true);
  Check(idem_message_set_id(message_, id_bytes.data(), id_bytes.size()));
  const std::string_view payload_bytes = BytesOf(payload, "payload", false);
  Check(idem_message_set_payload(message_, payload_bytes.data(),
                                 payload_bytes.size()));
  if (!source.is_none()) {
    const std::string_view s = BytesOf(source, "source", true);
    Check(idem_message_set_source(message_, s.data(), s.size()));
  }
  if (!fingerprint.is_none()) {
    const std::string_view f = BytesOf(fingerprint, "fingerprint", true);
    Check(idem_message_set_fingerprint(message_, f.data(), f.size()));
  }
  Check(idem_message_set_partition(message_, partition));
  Check(idem_message_set_offset(message_, offset));
  Check(idem_message_set_ttl_ms(message_, TtlMillis(ttl)));
  Check(idem_message_set_event_time_us(
      message_, TimeMicros(event_time, "event_time", IDEM_TIME_INFINITE_PAST)));
}

// ---- Handler calls ----

namespace {

// What one process call's handlers share.
struct CallContext {
  py::handle handler;
  const std::vector<py::object>* objects;  // the Python Message objects
  std::vector<const idem_message*> messages;
  size_t cursor = 0;  // where the next handler call most likely is
  Results* results = nullptr;
  // A BaseException that is not an Exception (KeyboardInterrupt,
  // SystemExit) a handler raised: every later handler of the call fails
  // without running, and the call raises it once the engine returns.
  py::object interrupt;
  bool gil_released = true;
};

size_t IndexOf(CallContext& ctx, const idem_message* m) {
  const size_t n = ctx.messages.size();
  if (ctx.cursor < n && ctx.messages[ctx.cursor] == m) return ctx.cursor++;
  for (size_t i = 0; i < n; ++i) {
    if (ctx.messages[i] == m) {
      ctx.cursor = i + 1;
      return i;
    }
  }
  return n;
}

std::string Describe(py::handle exc) {
  try {
    std::string text = py::str(exc).cast<std::string>();
    std::string name =
        py::str(py::type::handle_of(exc).attr("__name__")).cast<std::string>();
    return text.empty() ? name : name + ": " + text;
  } catch (...) {
    return "a handler raised an exception that cannot be printed";
  }
}

// Maps the exception a handler raised to the handler's return value.
int Classify(idem_txn* txn, py::object exc, py::object& raised,
             py::object& interrupt) {
  if (!PyObject_IsInstance(exc.ptr(), PyExc_Exception)) {
    idem_txn_set_error(txn, IDEM_CANCELLED,
                       ("interrupted: " + Describe(exc)).c_str());
    interrupt = std::move(exc);
    return 1;
  }
  raised = exc;
  if (PyObject_IsInstance(exc.ptr(), classes.permanent_error.ptr())) {
    const int code = exc.attr("code").cast<int>();
    idem_txn_set_error(txn, static_cast<idem_code>(code),
                       py::str(exc).cast<std::string>().c_str());
    return IDEM_HANDLER_PERMANENT;
  }
  int code = IDEM_INTERNAL;
  if (PyObject_IsInstance(exc.ptr(), classes.error.ptr())) {
    code = exc.attr("code").cast<int>();
  }
  idem_txn_set_error(txn, static_cast<idem_code>(code), Describe(exc).c_str());
  return 1;
}

int RunHandler(CallContext& ctx, const idem_message* m, idem_txn* txn) {
  const size_t i = IndexOf(ctx, m);
  if (i == ctx.messages.size()) {
    idem_txn_set_error(txn, IDEM_INTERNAL, "handler given an unknown message");
    return 1;
  }
  if (ctx.interrupt) {
    idem_txn_set_error(txn, IDEM_CANCELLED,
                       "interrupted by an earlier "
                       "handler of the call");
    return 1;
  }
  py::object raised;
  const int rc =
      CallHandler(ctx.handler, (*ctx.objects)[i], txn, raised, ctx.interrupt);
  if (i < ctx.results->errors.size() && !ctx.interrupt) {
    ctx.results->errors[i] = raised ? raised : py::none();
  }
  return rc;
}

// The C handler: takes the GIL back (when the call released it) and never
// lets an exception out into the engine.
int Trampoline(void* user, const idem_message* m, idem_txn* txn) {
  auto& ctx = *static_cast<CallContext*>(user);
  std::optional<py::gil_scoped_acquire> gil;
  if (ctx.gil_released) gil.emplace();
  try {
    return RunHandler(ctx, m, txn);
  } catch (const std::exception& e) {
    idem_txn_set_error(txn, IDEM_INTERNAL, e.what());
  } catch (...) {
    idem_txn_set_error(txn, IDEM_INTERNAL, "handler call failed");
  }
  return 1;
}

// Message objects from the items of process_batch's list: idem.Message, or
// (id, payload) tuples made into one.
std::vector<py::object> MessageObjects(const py::list& items) {
  std::vector<py::object> objects;
  objects.reserve(items.size());
  for (py::handle item : items) {
    if (py::isinstance<Message>(item)) {
      objects.push_back(py::reinterpret_borrow<py::object>(item));
      continue;
    }
    if (!PyTuple_Check(item.ptr()) || PyTuple_GET_SIZE(item.ptr()) != 2) {
      throw py::type_error(
          std::string("process_batch: each message must be an idem.Message "
                      "or an (id, payload) tuple, not ") +
          Py_TYPE(item.ptr())->tp_name);
    }
    auto message = std::make_unique<Message>();
    message->Set(PyTuple_GET_ITEM(item.ptr(), 0),
                 PyTuple_GET_ITEM(item.ptr(), 1), py::none(), 0, -1, py::none(),
                 py::none(), py::none());
    objects.push_back(py::cast(std::move(message)));
  }
  return objects;
}

}  // namespace

int CallHandler(py::handle handler, py::handle message, idem_txn* txn,
                py::object& raised, py::object& interrupt) {
  try {
    py::object txn_object = py::cast(Txn{txn});
    handler(txn_object, message);
    return IDEM_HANDLER_COMMIT;
  } catch (py::error_already_set& e) {
    return Classify(txn, py::reinterpret_borrow<py::object>(e.value()), raised,
                    interrupt);
  }
}

// ---- Engine ----

void SetReleaseGilForTesting(bool release) { release_gil = release; }

bool ReleaseGil() { return release_gil.load(); }

Engine::Engine(const std::string& path, const py::dict& options) {
  idem_options* o = idem_options_new();
  if (o == nullptr) throw std::bad_alloc();
  std::unique_ptr<idem_options, void (*)(idem_options*)> owned(
      o, idem_options_free);
  for (auto [key, value] : options) {
    const std::string k = key.cast<std::string>();
    idem_code c = IDEM_OK;
    if (k == "dedupe_window_ms") {
      c = idem_options_set_dedupe_window_ms(o, value.cast<int64_t>());
    } else if (k == "durability") {
      c = idem_options_set_durability(o, value.cast<idem_durability>());
    } else if (k == "dedupe_scope") {
      c = idem_options_set_dedupe_scope(o, value.cast<idem_dedupe_scope>());
    } else if (k == "create_if_missing") {
      c = idem_options_set_create_if_missing(o, value.cast<bool>());
    } else if (k == "read_only") {
      c = idem_options_set_read_only(o, value.cast<bool>());
    } else if (k == "detect_conflicts") {
      c = idem_options_set_detect_conflicts(o, value.cast<bool>());
    } else if (k == "refresh_on_duplicate") {
      c = idem_options_set_refresh_on_duplicate(o, value.cast<bool>());
    } else if (k == "block_cache_bytes") {
      c = idem_options_set_block_cache_bytes(o, value.cast<int64_t>());
    } else if (k == "write_buffer_bytes") {
      c = idem_options_set_write_buffer_bytes(o, value.cast<int64_t>());
    } else if (k == "bloom_bits_per_key") {
      c = idem_options_set_bloom_bits_per_key(o, value.cast<int>());
    } else if (k == "max_background_jobs") {
      c = idem_options_set_max_background_jobs(o, value.cast<int>());
    } else if (k == "expiry_buckets") {
      c = idem_options_set_expiry_buckets(o, value.cast<int>());
    } else if (k == "state_ttl_ms") {
      c = idem_options_set_state_ttl_ms(o, value.cast<int64_t>());
    } else {
      throw py::type_error("unknown option " + k);
    }
    Check(c);
  }
  idem_code c;
  {
    py::gil_scoped_release release;
    c = idem_engine_open(path.c_str(), o, &engine_);
  }
  Check(c);
}

Engine::~Engine() {
  py::gil_scoped_release release;
  idem_engine_free(engine_);
}

void Engine::RemoveDependent(EngineDependent* d) {
  dependents_.erase(std::remove(dependents_.begin(), dependents_.end(), d),
                    dependents_.end());
}

void Engine::Close() {
  if (idem::c_api::InHandlerOf(engine_)) {
    Check(idem_engine_close(engine_));  // refused, naming why
  }
  while (!dependents_.empty()) {
    // Each dependent removes itself when it closes.
    EngineDependent* d = dependents_.back();
    d->CloseForEngine();
    RemoveDependent(d);
  }
  idem_code c;
  {
    py::gil_scoped_release release;
    c = idem_engine_close(engine_);
  }
  Check(c);
  closed_ = true;
}

py::list Engine::ProcessBatch(const py::list& items, py::object handler) {
  if (!PyCallable_Check(handler.ptr())) {
    throw py::type_error("handler must be callable");
  }
  const std::vector<py::object> objects = MessageObjects(items);
  auto results = std::make_shared<Results>();
  results->errors.assign(objects.size(), py::none());
  CallContext ctx;
  ctx.handler = handler;
  ctx.objects = &objects;
  ctx.results = results.get();
  ctx.gil_released = release_gil.load();
  ctx.messages.reserve(objects.size());
  for (const py::object& o : objects) {
    ctx.messages.push_back(o.cast<const Message&>().get());
  }
  idem_code c;
  {
    std::optional<py::gil_scoped_release> release;
    if (ctx.gil_released) release.emplace();
    if (ctx.messages.size() == 1) {
      c = idem_engine_process(engine_, ctx.messages[0], Trampoline, &ctx,
                              &results->single);
    } else {
      c = idem_engine_process_batch(engine_, ctx.messages.data(),
                                    ctx.messages.size(), Trampoline, &ctx,
                                    &results->list);
    }
  }
  if (ctx.interrupt) RaiseObject(ctx.interrupt);
  Check(c);
  py::list out;
  uint64_t highest = 0;
  for (size_t i = 0; i < objects.size(); ++i) {
    Result r{results, i};
    highest = std::max(highest, idem_result_sequence(r.get()));
    out.append(py::cast(std::move(r)));
  }
  uint64_t seen = last_sequence_.load();
  while (highest > seen &&
         !last_sequence_.compare_exchange_weak(seen, highest)) {
  }
  return out;
}

int CollectScanPair(void* user, const char* key, size_t key_size,
                    const char* value, size_t value_size) {
  auto* pairs =
      static_cast<std::vector<std::pair<std::string, std::string>>*>(user);
  pairs->emplace_back(std::string(key, key_size),
                      std::string(value, value_size));
  return 0;
}

py::list Engine::ScanState(py::handle begin, py::handle end, bool reverse,
                           size_t limit) {
  const std::string_view b = BytesOf(begin, "begin", true);
  const std::string_view e =
      end.is_none() ? std::string_view() : BytesOf(end, "end", true);
  std::vector<std::pair<std::string, std::string>> pairs;
  idem_code c;
  {
    py::gil_scoped_release release;
    c = idem_engine_scan_state(engine_, b.data(), b.size(), e.data(), e.size(),
                               reverse ? 1 : 0, limit, &CollectScanPair,
                               &pairs);
  }
  Check(c);
  py::list out;
  for (const auto& [key, value] : pairs) {
    out.append(py::make_tuple(py::bytes(key), py::bytes(value)));
  }
  return out;
}

py::object Engine::GetState(py::handle key) {
  const std::string_view k = BytesOf(key, "key", true);
  char* value = nullptr;
  size_t size = 0;
  int found = 0;
  idem_code c;
  {
    py::gil_scoped_release release;
    c = idem_engine_get_state(engine_, k.data(), k.size(), &value, &size,
                              &found);
  }
  Check(c);
  if (!found) return py::none();
  py::bytes out = ToBytes(value, size);
  idem_free(value);
  return out;
}

bool Engine::Seen(py::handle id) {
  const std::string_view i = BytesOf(id, "id", true);
  int seen = 0;
  idem_code c;
  {
    py::gil_scoped_release release;
    c = idem_engine_seen(engine_, i.data(), i.size(), &seen);
  }
  Check(c);
  return seen != 0;
}

void Engine::Forget(py::handle id, py::handle source, int32_t partition) {
  const std::string_view i = BytesOf(id, "id", true);
  idem_code c;
  if (source.is_none()) {
    py::gil_scoped_release release;
    c = idem_engine_forget(engine_, i.data(), i.size());
  } else {
    const std::string_view s = BytesOf(source, "source", true);
    py::gil_scoped_release release;
    c = idem_engine_forget_in_partition(engine_, i.data(), i.size(), s.data(),
                                        s.size(), partition);
  }
  Check(c);
}

py::object Engine::CommittedOffset(py::handle source, int32_t partition) {
  const std::string_view s = BytesOf(source, "source", true);
  int64_t offset = -1;
  int found = 0;
  idem_code c;
  {
    py::gil_scoped_release release;
    c = idem_engine_committed_offset(engine_, s.data(), s.size(), partition,
                                     &offset, &found);
  }
  Check(c);
  if (!found) return py::none();
  return py::int_(offset);
}

void Engine::WaitDurable(py::object sequence) {
  uint64_t s =
      sequence.is_none() ? last_sequence_.load() : sequence.cast<uint64_t>();
  if (sequence.is_none() && s == 0 && !closed_) return;  // nothing committed
  idem_code c;
  {
    py::gil_scoped_release release;
    c = idem_engine_wait_durable(engine_, s);
  }
  Check(c);
}

py::dict Engine::Stats() {
  idem_stats s{};
  s.struct_size = sizeof s;
  idem_code c;
  {
    py::gil_scoped_release release;
    c = idem_engine_stats(engine_, &s);
  }
  Check(c);
  py::dict d;
  d["processed"] = s.processed;
  d["duplicates"] = s.duplicates;
  d["failed"] = s.failed;
  d["conflicts"] = s.conflicts;
  d["handler_reruns"] = s.handler_reruns;
  d["late_duplicates"] = s.late_duplicates;
  d["outbox_pending"] = s.outbox_pending;
  d["outbox_emitted"] = s.outbox_emitted;
  d["outbox_acknowledged"] = s.outbox_acknowledged;
  d["expired_dropped"] = s.expired_dropped;
  d["user_bytes"] = s.user_bytes;
  d["wal_bytes"] = s.wal_bytes;
  d["flush_bytes"] = s.flush_bytes;
  d["compaction_bytes"] = s.compaction_bytes;
  d["write_amplification"] = s.write_amplification;
  d["live_sst_bytes"] = s.live_sst_bytes;
  d["estimated_live_records"] = s.estimated_live_records;
  d["memtable_bytes"] = s.memtable_bytes;
  d["block_cache_bytes"] = s.block_cache_bytes;
  d["commits"] = s.commits;
  d["commit_seconds"] = s.commit_seconds;
  d["timers_fired"] = s.timers_fired;
  d["timers_dead_lettered"] = s.timers_dead_lettered;
  d["timer_failures"] = s.timer_failures;
  return d;
}

py::list Engine::ReadOutbox(size_t max_entries, uint64_t after) {
  idem_outbox_batch* batch = nullptr;
  idem_code c;
  {
    py::gil_scoped_release release;
    c = idem_engine_read_outbox(engine_, after, max_entries, &batch);
  }
  Check(c);
  std::unique_ptr<idem_outbox_batch, void (*)(idem_outbox_batch*)> owned(
      batch, idem_outbox_batch_free);
  py::list out;
  for (size_t i = 0; i < idem_outbox_batch_size(batch); ++i) {
    size_t n = 0;
    const char* id = idem_outbox_message_id(batch, i, &n);
    py::str message_id(id, n);
    const char* dest = idem_outbox_destination(batch, i, &n);
    py::object destination = SourceToPython(dest, n);
    const char* key = idem_outbox_key(batch, i, &n);
    py::bytes k = ToBytes(key, n);
    const char* value = idem_outbox_value(batch, i, &n);
    py::bytes v = ToBytes(value, n);
    py::list headers;
    for (size_t h = 0; h < idem_outbox_header_count(batch, i); ++h) {
      const char* name = idem_outbox_header_name(batch, i, h, &n);
      py::object name_object = SourceToPython(name, n);
      if (name_object.is_none()) name_object = py::str("");
      const char* hv = idem_outbox_header_value(batch, i, h, &n);
      headers.append(py::make_tuple(name_object, ToBytes(hv, n)));
    }
    out.append(py::make_tuple(idem_outbox_position(batch, i), message_id,
                              destination, idem_outbox_partition(batch, i), k,
                              v, idem_outbox_tombstone(batch, i) != 0,
                              headers));
  }
  return out;
}

void Engine::AckOutbox(uint64_t position) {
  idem_code c;
  {
    py::gil_scoped_release release;
    c = idem_engine_ack_outbox(engine_, position);
  }
  Check(c);
}

void InitClasses() {
  py::module_ errors = py::module_::import("idem._errors");
  classes.error = py::object(errors.attr("Error")).release();
  classes.permanent_error = py::object(errors.attr("PermanentError")).release();
  classes.error_for = py::object(errors.attr("_error_for")).release();
}

py::object ResultError(const Result& r) {
  const py::object& raised = r.results->errors[r.index];
  if (!raised.is_none()) return raised;
  const idem_result* result = r.get();
  if (idem_result_outcome(result) != IDEM_OUTCOME_FAILED) return py::none();
  return ErrorFor(idem_result_error_code(result),
                  idem_result_error_message(result));
}

py::object ResultValue(const Result& r) {
  size_t size = 0;
  const char* data = idem_result_value(r.get(), &size);
  return ToBytes(data, size);
}

py::object FirstProcessedAt(const Result& r) {
  const int64_t us = idem_result_first_processed_at_us(r.get());
  if (us == INT64_MIN) return py::none();
  return py::float_(static_cast<double>(us) / 1e6);
}

}  // namespace idem::python
