// The Python extension idem._idem (python/): pybind11 classes over the C API
// (include/idem/c.h). The public Python API is the package idem
// (python/idem/__init__.py), which wraps these classes.
//
// Threading: every class here is used with the GIL held, except inside the
// C API calls that may block (commits, syncs, waits, close), which release
// the GIL and take it back for each handler call. Message, Result and
// OutboxEntry objects are immutable once made; a Txn is valid only during
// its handler call, on that call's thread.

#ifndef IDEM_PYTHON_BINDING_H_
#define IDEM_PYTHON_BINDING_H_

#include <pybind11/pybind11.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "idem/c.h"

namespace idem::python {

namespace py = pybind11;

// Raises the idem.Error subclass of `code` with the thread's last C API
// error as its message (idem._errors._error_for).
[[noreturn]] void Raise(idem_code code);
// Raises if `code` is not IDEM_OK.
inline void Check(idem_code code) {
  if (code != IDEM_OK) Raise(code);
}

// The bytes of `obj`, valid while `obj` lives: bytes or bytearray, and str
// (as UTF-8) when `allow_str`. Anything else raises TypeError naming
// `what`.
std::string_view BytesOf(py::handle obj, const char* what, bool allow_str);

// Milliseconds of a ttl given as None (0), seconds (int or float) or a
// datetime.timedelta; TypeError for anything else.
int64_t TtlMillis(py::handle ttl);

// Microseconds since the epoch of a time given as seconds since the epoch
// (int or float) or a datetime (its timestamp()); None is `none`. An
// infinity is the C API's end of time of its sign; NaN, or a time beyond
// microseconds' int64 range, raises idem.InvalidArgument; anything else
// TypeError, naming `what`.
int64_t TimeMicros(py::handle time, const char* what, int64_t none);
// A C API time as Python shows it: seconds since the epoch (float), or None
// for IDEM_TIME_INFINITE_PAST.
py::object TimeToPython(int64_t us);

// An idem_scan_visitor that appends each (key, value) to the
// std::vector<std::pair<std::string, std::string>> `user` points to.
int CollectScanPair(void* user, const char* key, size_t key_size,
                    const char* value, size_t value_size);

// Calls handler(Txn{txn}, message) (the GIL held) and returns what a C
// handler returns: IDEM_HANDLER_COMMIT if it returned; for an exception,
// IDEM_HANDLER_PERMANENT (idem.PermanentError) or 1, with the error set on
// `txn` (an idem.Error's code, else IDEM_INTERNAL). The exception goes to
// `raised` (an Exception) or to `interrupt` (a BaseException that is not
// one, e.g. KeyboardInterrupt: IDEM_CANCELLED); each is left alone
// otherwise.
int CallHandler(py::handle handler, py::handle message, idem_txn* txn,
                py::object& raised, py::object& interrupt);

// Raises `exc` (an exception instance) as the current Python error.
[[noreturn]] void RaiseObject(py::handle exc);

// What an engine handle's close must first close: an object that borrows
// the engine (idem.kafka.NativeConsumer).
class EngineDependent {
 public:
  virtual ~EngineDependent() = default;
  // Closes the dependent, the GIL held; may raise.
  virtual void CloseForEngine() = 0;
};

// A message: owns its idem_message.
class Message {
 public:
  Message();
  ~Message();
  Message(const Message&) = delete;
  Message& operator=(const Message&) = delete;

  // Sets every field from Python values (see idem.Message).
  void Set(py::handle id, py::handle payload, py::handle source,
           int32_t partition, int64_t offset, py::handle ttl,
           py::handle fingerprint, py::handle event_time);
  const idem_message* get() const { return message_; }

 private:
  idem_message* message_;
};

// A handler's transaction: a token of the C API, valid during the handler
// call only (later calls raise idem.FailedPrecondition).
struct Txn {
  idem_txn* txn = nullptr;
};

// The results of one process call; Result objects share it.
struct Results {
  idem_result* single = nullptr;
  idem_result_list* list = nullptr;
  // The exception each message's handler raised during this call (None if
  // it did not), by index.
  std::vector<py::object> errors;
  ~Results() {
    idem_result_free(single);
    idem_result_list_free(list);
  }
  const idem_result* at(size_t i) const {
    return single != nullptr ? single : idem_result_list_get(list, i);
  }
};

// One message's result: a view into a shared Results.
struct Result {
  std::shared_ptr<Results> results;
  size_t index = 0;
  const idem_result* get() const { return results->at(index); }
};

// An open engine handle.
class Engine {
 public:
  Engine(const std::string& path, const py::dict& options);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  void Close();
  bool closed() const { return closed_; }
  // handler(txn, message) for each message; one Result each.
  py::list ProcessBatch(const py::list& messages, py::object handler);
  py::object GetState(py::handle key);
  // The committed (key, value) pairs of [begin, end) (Engine::ScanState).
  py::list ScanState(py::handle begin, py::handle end, bool reverse,
                     size_t limit);
  bool Seen(py::handle id);
  void Forget(py::handle id, py::handle source, int32_t partition);
  py::object CommittedOffset(py::handle source, int32_t partition);
  void WaitDurable(py::object sequence);
  py::dict Stats();
  py::list ReadOutbox(size_t max_entries, uint64_t after);
  void AckOutbox(uint64_t position);
  // Time and timers (python/timers.cc): the committed stream time (seconds
  // or None), the next timer (a (source, partition, domain, key, fire_at,
  // payload) tuple or None), and firing the due timers through
  // handler(txn, that tuple), returning how many fired.
  py::object StreamTime(py::handle source, int32_t partition);
  py::object NextTimer(py::handle source, int32_t partition,
                       idem_time_domain domain);
  size_t FireTimers(py::handle source, int32_t partition,
                    idem_time_domain domain, py::handle up_to, size_t max,
                    py::object handler);
  uint64_t last_sequence() const { return last_sequence_.load(); }

  // The C API handle, for bindings that borrow the engine; it stays valid
  // while this object lives.
  idem_engine* handle() const { return engine_; }
  // Registers `d` (until RemoveDependent) to be closed by Close before the
  // engine is. Both with the GIL held.
  void AddDependent(EngineDependent* d) { dependents_.push_back(d); }
  void RemoveDependent(EngineDependent* d);

 private:
  idem_engine* engine_ = nullptr;
  bool closed_ = false;
  // Guarded by the GIL.
  std::vector<EngineDependent*> dependents_;
  // The highest commit sequence any call on this engine returned.
  std::atomic<uint64_t> last_sequence_{0};
};

// Looks up idem._errors' classes; called once at import.
void InitClasses();
// The idem.Error subclass of `code` with `message` (idem._errors._error_for).
py::object ErrorFor(idem_code code, const char* message);
// Binds the time and timer calls (python/timers.cc): the enum TimeDomain,
// Txn.stream_time, set_timer and cancel_timer, and _Engine's stream_time,
// next_timer and fire_timers. After the classes they extend are bound.
void BindTimers(py::module_& m);
// A Result's fields as Python values: the handler's exception (or an
// idem.Error for a FAILED outcome, None otherwise), the value bytes, and
// when the ID was first processed (seconds since the epoch, or None).
py::object ResultError(const Result& r);
py::object ResultValue(const Result& r);
py::object FirstProcessedAt(const Result& r);

// Tests only: whether process calls and NativeConsumer.poll_batch release
// the GIL (true), so that a test can show what holding it would break.
void SetReleaseGilForTesting(bool release);
bool ReleaseGil();

}  // namespace idem::python

#endif  // IDEM_PYTHON_BINDING_H_
