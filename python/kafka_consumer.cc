// idem._idem._KafkaConsumer and KafkaRecord (python/kafka_consumer.h): the
// C++ Kafka consumer with Python handlers, through the C API's handler
// machinery (c_api::RunCHandler and python/binding.h's CallHandler), so a
// handler here behaves as one of Engine.process_batch.

#include "python/kafka_consumer.h"

#include <pybind11/stl.h>

#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/cleanup/cleanup.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "c/c_internal.h"
#include "idem/kafka/consumer.h"
#include "idem/partition_state.h"
#include "python/binding.h"

namespace idem::python {
namespace {

// A record as a NativeConsumer handler sees it: made with the GIL held,
// immutable, and valid after the handler returns (it owns its bytes).
struct KafkaRecord {
  py::object id;       // bytes: the dedupe ID the consumer derived
  py::object payload;  // bytes: the record's value
  py::object source;   // str: the topic
  int32_t partition = 0;
  int64_t offset = -1;
  py::object key;      // bytes, b"" when the record has none
  py::object headers;  // list of (str, bytes)
  int64_t timestamp_ms = -1;
};

py::bytes BytesObject(std::string_view s) {
  return py::bytes(s.empty() ? "" : s.data(), s.size());
}

py::str TextObject(std::string_view s) {
  PyObject* o = PyUnicode_DecodeUTF8(
      s.data(), static_cast<Py_ssize_t>(s.size()), "surrogateescape");
  if (o == nullptr) throw py::error_already_set();
  return py::reinterpret_steal<py::str>(o);
}

KafkaRecord MakeRecord(const kafka::Record& r) {
  KafkaRecord out;
  out.id = BytesObject(r.id);
  out.payload = BytesObject(r.value);
  out.source = TextObject(r.topic);
  out.partition = r.partition;
  out.offset = r.offset;
  out.key = BytesObject(r.key);
  py::list headers;
  for (const auto& [name, value] : r.headers) {
    headers.append(py::make_tuple(TextObject(name), BytesObject(value)));
  }
  out.headers = std::move(headers);
  out.timestamp_ms = r.timestamp_ms;
  return out;
}

// Raises the idem.Error of a non-OK status.
void CheckStatus(const absl::Status& status) {
  if (!status.ok()) Raise(c_api::Fail(status));
}

// The consumer whose handler runs on this thread, if any.
thread_local const void* handler_of = nullptr;

// What the handlers of one poll_batch or run call share. Its Python
// objects are used with the GIL held only.
struct ConsumerCall {
  py::object handler;
  // The first BaseException that is not an Exception (KeyboardInterrupt,
  // SystemExit) a handler raised: the call raises it once the consumer
  // returns.
  py::object interrupt;
  // run(): an interrupt also stops the consumer.
  kafka::Consumer* stop_on_interrupt = nullptr;
};

// One handler call, for the C trampoline.
struct RecordCall {
  ConsumerCall* call;
  const kafka::Record* record;
};

int RecordTrampoline(void* user, const idem_message*, idem_txn* txn) {
  auto& h = *static_cast<RecordCall*>(user);
  try {
    py::object record = py::cast(MakeRecord(*h.record));
    py::object raised;
    py::object interrupt;
    const int rc = CallHandler(h.call->handler, record, txn, raised, interrupt);
    if (interrupt) {
      if (!h.call->interrupt) h.call->interrupt = std::move(interrupt);
      if (h.call->stop_on_interrupt != nullptr) {
        h.call->stop_on_interrupt->Stop();
      }
    }
    return rc;
  } catch (py::error_already_set& e) {
    idem_txn_set_error(txn, IDEM_INTERNAL, e.what());
  } catch (const std::exception& e) {
    idem_txn_set_error(txn, IDEM_INTERNAL, e.what());
  } catch (...) {
    idem_txn_set_error(txn, IDEM_INTERNAL, "handler call failed");
  }
  return 1;
}

void CheckCallable(py::handle handler) {
  if (!PyCallable_Check(handler.ptr())) {
    throw py::type_error("handler must be callable");
  }
}

py::dict ReportDict(const kafka::BatchReport& r) {
  py::dict d;
  d["records"] = r.records;
  d["processed"] = r.processed;
  d["duplicates"] = r.duplicates;
  d["dead_lettered"] = r.dead_lettered;
  d["retries"] = r.retries;
  d["non_retriable"] = r.non_retriable;
  d["outbox_published"] = r.outbox_published;
  d["rebalanced"] = r.rebalanced;
  return d;
}

py::dict StatsDict(const kafka::ConsumerStats& s) {
  py::dict d;
  d["records"] = s.records;
  d["processed"] = s.processed;
  d["duplicates"] = s.duplicates;
  d["dead_lettered"] = s.dead_lettered;
  d["retries"] = s.retries;
  d["non_retriable"] = s.non_retriable;
  d["outbox_published"] = s.outbox_published;
  d["batches"] = s.batches;
  d["assignments"] = s.assignments;
  d["revocations"] = s.revocations;
  d["kafka_commit_errors"] = s.kafka_commit_errors;
  d["kafka_errors"] = s.kafka_errors;
  d["last_kafka_error"] = s.last_kafka_error;
  d["engine_seconds"] = absl::ToDoubleSeconds(s.engine_time);
  d["kafka_seconds"] = absl::ToDoubleSeconds(s.kafka_time);
  py::list lag;
  for (const kafka::PartitionLag& p : s.lag) {
    lag.append(py::make_tuple(p.topic, p.partition, p.high_watermark,
                              p.next_offset, p.lag));
  }
  d["lag"] = lag;
  d["restores"] = s.restores;
  d["restore_records_read"] = s.restore_records_read;
  d["run_retries"] = s.run_retries;
  d["outbox_dead_lettered"] = s.outbox_dead_lettered;
  d["backpressure_pauses"] = s.backpressure_pauses;
  return d;
}

// A C++ consumer on an engine of the binding's (python/binding.h), which it
// keeps open (and the Python engine object alive) until closed; the
// engine's close closes it first.
class NativeConsumer : public EngineDependent {
 public:
  NativeConsumer(py::object engine, const py::dict& kwargs);
  ~NativeConsumer() override;
  NativeConsumer(const NativeConsumer&) = delete;
  NativeConsumer& operator=(const NativeConsumer&) = delete;

  py::dict PollBatch(py::object handler);
  void Run(py::object handler);
  void Stop();
  void Close();
  void CloseForEngine() override { Close(); }
  bool closed();
  std::vector<std::pair<std::string, int32_t>> Assignment();
  void Pause(const std::string& topic, int32_t partition);
  void Resume(const std::string& topic, int32_t partition);
  py::dict Stats();

 private:
  // Marks a poll_batch or run call under way (End ends it) and returns
  // the consumer; raises idem.FailedPrecondition, naming `what`, when the
  // consumer is closed or another call is under way.
  kafka::Consumer* Begin(const char* what);
  void End();
  // The consumer for a quick call (no handler runs), or raises as Begin.
  kafka::Consumer* Open(const char* what) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The kafka::Handler of `call`: the GIL taken, the Python handler run
  // through the C API's handler frame (so its txn is the C API's token).
  absl::Status Handle(ConsumerCall& call, const kafka::Record& record,
                      ::idem::Txn& txn);

  // Constant after construction.
  py::object engine_object_;
  Engine* engine_;
  std::unique_ptr<c_api::ActiveCall> engine_use_;
  // Handlers get a PartitionTxn of their record's partition.
  bool partition_state_ = false;

  absl::Mutex mu_;
  std::unique_ptr<kafka::Consumer> consumer_ ABSL_GUARDED_BY(mu_);
  bool busy_ ABSL_GUARDED_BY(mu_) = false;
};

NativeConsumer::NativeConsumer(py::object engine, const py::dict& kwargs)
    : engine_object_(std::move(engine)),
      engine_(&engine_object_.cast<Engine&>()) {
  kafka::ConsumerOptions options;
  py::dict rest(kwargs);
  py::object partition_state = rest.attr("pop")("partition_state", py::none());
  ParseConsumerOptions(rest, options);
  if (partition_state.is_none()) {
    partition_state_ = !options.changelog_topic.empty();
  } else if (PyBool_Check(partition_state.ptr())) {
    partition_state_ = partition_state.ptr() == Py_True;
  } else {
    throw py::type_error("partition_state must be bool or None");
  }
  engine_use_ = std::make_unique<c_api::ActiveCall>(engine_->handle());
  Check(engine_use_->Acquire("NativeConsumer"));
  absl::StatusOr<std::unique_ptr<kafka::Consumer>> created;
  {
    py::gil_scoped_release release;
    created = kafka::Consumer::Create(&engine_use_->engine(), options);
  }
  if (!created.ok()) {
    engine_use_.reset();
    CheckStatus(created.status());
  }
  absl::MutexLock lock(&mu_);
  consumer_ = std::move(*created);
  engine_->AddDependent(this);
}

NativeConsumer::~NativeConsumer() {
  try {
    Close();
  } catch (py::error_already_set& e) {
    e.discard_as_unraisable("idem.kafka.NativeConsumer.__del__");
  } catch (...) {
  }
}

kafka::Consumer* NativeConsumer::Open(const char* what) {
  if (consumer_ == nullptr) {
    Raise(c_api::Fail(absl::FailedPreconditionError(
        std::string("NativeConsumer.") + what + ": the consumer is closed")));
  }
  if (busy_) {
    Raise(c_api::Fail(absl::FailedPreconditionError(
        std::string("NativeConsumer.") + what +
        ": another poll_batch or run of this consumer is under way (a "
        "consumer polls on one thread at a time)")));
  }
  return consumer_.get();
}

kafka::Consumer* NativeConsumer::Begin(const char* what) {
  absl::MutexLock lock(&mu_);
  kafka::Consumer* c = Open(what);
  busy_ = true;
  return c;
}

void NativeConsumer::End() {
  absl::MutexLock lock(&mu_);
  busy_ = false;
}

absl::Status NativeConsumer::Handle(ConsumerCall& call,
                                    const kafka::Record& record,
                                    idem::Txn& txn) {
  py::gil_scoped_acquire gil;
  const void* outer = handler_of;
  handler_of = this;
  absl::Cleanup restore = [outer] { handler_of = outer; };
  static const idem_message kUnused;  // the record is the handler's message
  RecordCall h{&call, &record};
  if (partition_state_) {
    PartitionTxn scoped(txn, record.topic, record.partition);
    return c_api::RunCHandler(engine_->handle(), &RecordTrampoline, &h,
                              &kUnused, scoped);
  }
  return c_api::RunCHandler(engine_->handle(), &RecordTrampoline, &h, &kUnused,
                            txn);
}

py::dict NativeConsumer::PollBatch(py::object handler) {
  CheckCallable(handler);
  kafka::Consumer* c = Begin("poll_batch");
  absl::Cleanup end = [this] { End(); };
  ConsumerCall call;
  call.handler = std::move(handler);
  absl::StatusOr<kafka::BatchReport> report;
  {
    std::optional<py::gil_scoped_release> release;
    if (ReleaseGil()) release.emplace();
    report = c->PollBatch([&](const kafka::Record& r, idem::Txn& t) {
      return Handle(call, r, t);
    });
  }
  if (call.interrupt) RaiseObject(call.interrupt);
  CheckStatus(report.status());
  return ReportDict(*report);
}

// The C++ Run, on a thread of its own: this thread waits for it with the
// GIL released, and every 100 ms runs Python's signal handlers, so Ctrl-C
// and a handler that calls stop() work however long no record arrives. An
// exception from a signal handler stops the consumer and is raised once
// its batch is done.
void NativeConsumer::Run(py::object handler) {
  CheckCallable(handler);
  kafka::Consumer* c = Begin("run");
  absl::Cleanup end = [this] { End(); };
  ConsumerCall call;
  call.handler = std::move(handler);
  call.stop_on_interrupt = c;
  absl::Status status;
  std::optional<py::error_already_set> signal;
  {
    py::gil_scoped_release release;
    absl::Notification done;
    std::thread runner([&] {
      status = c->Run([&](const kafka::Record& r, idem::Txn& t) {
        return Handle(call, r, t);
      });
      done.Notify();
    });
    while (!done.WaitForNotificationWithTimeout(absl::Milliseconds(100))) {
      py::gil_scoped_acquire gil;
      if (!signal && PyErr_CheckSignals() != 0) {
        signal.emplace();
        c->Stop();
      }
    }
    runner.join();
  }
  if (signal) throw *signal;
  if (call.interrupt) RaiseObject(call.interrupt);
  CheckStatus(status);
}

void NativeConsumer::Stop() {
  absl::MutexLock lock(&mu_);
  if (consumer_ != nullptr) consumer_->Stop();
}

void NativeConsumer::Close() {
  if (handler_of == this) {
    Raise(c_api::Fail(absl::FailedPreconditionError(
        "NativeConsumer.close: called from inside one of its handlers")));
  }
  std::unique_ptr<kafka::Consumer> closing;
  {
    py::gil_scoped_release release;  // a running call's handlers need it
    absl::MutexLock lock(&mu_);
    if (consumer_ == nullptr) return;
    if (busy_) {
      consumer_->Stop();
      mu_.Await(absl::Condition(
          +[](bool* busy) { return !*busy; }, &busy_));
    }
    closing = std::move(consumer_);
  }
  absl::Status status;
  {
    py::gil_scoped_release release;
    status = closing->Close();
    closing.reset();
  }
  engine_use_.reset();
  engine_->RemoveDependent(this);
  CheckStatus(status);
}

bool NativeConsumer::closed() {
  absl::MutexLock lock(&mu_);
  return consumer_ == nullptr;
}

std::vector<std::pair<std::string, int32_t>> NativeConsumer::Assignment() {
  absl::MutexLock lock(&mu_);
  return Open("assignment")->Assignment();
}

void NativeConsumer::Pause(const std::string& topic, int32_t partition) {
  absl::MutexLock lock(&mu_);
  CheckStatus(Open("pause")->Pause(topic, partition));
}

void NativeConsumer::Resume(const std::string& topic, int32_t partition) {
  absl::MutexLock lock(&mu_);
  CheckStatus(Open("resume")->Resume(topic, partition));
}

py::dict NativeConsumer::Stats() {
  kafka::ConsumerStats stats;
  {
    absl::MutexLock lock(&mu_);
    if (consumer_ == nullptr) Open("stats");
    stats = consumer_->stats();
  }
  return StatsDict(stats);
}

}  // namespace

void BindKafka(py::module_& m) {
  py::class_<KafkaRecord>(m, "KafkaRecord",
                          R"(A Kafka record as a NativeConsumer handler sees it.

id: the dedupe ID (bytes): the id_header header's value, or
    "topic/partition/offset"; payload: the record's value (bytes);
    source: its topic (str); partition, offset; key (bytes, b"" if none);
    headers: [(name, value)] in order; timestamp_ms (-1 if none).)")
      .def_readonly("id", &KafkaRecord::id)
      .def_readonly("payload", &KafkaRecord::payload)
      .def_readonly("source", &KafkaRecord::source)
      .def_readonly("topic", &KafkaRecord::source)
      .def_readonly("partition", &KafkaRecord::partition)
      .def_readonly("offset", &KafkaRecord::offset)
      .def_readonly("key", &KafkaRecord::key)
      .def_readonly("headers", &KafkaRecord::headers)
      .def_readonly("timestamp_ms", &KafkaRecord::timestamp_ms)
      .def("__repr__", [](const KafkaRecord& r) {
        return "idem.kafka.KafkaRecord(" + py::repr(r.id).cast<std::string>() +
               ", topic=" + py::repr(r.source).cast<std::string>() +
               ", partition=" + std::to_string(r.partition) +
               ", offset=" + std::to_string(r.offset) + ")";
      });
  m.def(
      "partition_state_key",
      [](const std::string& source, int32_t partition, py::handle key) {
        const std::string_view k = BytesOf(key, "key", true);
        return py::bytes(PartitionStatePrefix(source, partition) +
                         std::string(k));
      },
      py::arg("source"), py::arg("partition"), py::arg("key"),
      "The state key under which a handler's write of `key` through the "
      "partition's view (NativeConsumer's partition_state) is stored, for "
      "Engine.get_state.");
  py::class_<NativeConsumer>(m, "_KafkaConsumer",
                             "idem::kafka::Consumer; see "
                             "idem.kafka.NativeConsumer.")
      .def(py::init<py::object, const py::dict&>())
      .def("poll_batch", &NativeConsumer::PollBatch)
      .def("run", &NativeConsumer::Run)
      .def("stop", &NativeConsumer::Stop)
      .def("close", &NativeConsumer::Close)
      .def_property_readonly("closed", &NativeConsumer::closed)
      .def("assignment", &NativeConsumer::Assignment)
      .def("pause", &NativeConsumer::Pause)
      .def("resume", &NativeConsumer::Resume)
      .def("stats", &NativeConsumer::Stats);
}

}  // namespace idem::python
