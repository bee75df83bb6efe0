// The module idem._idem: pybind11 definitions of python/binding.h's classes,
// with their docstrings. The package idem (python/idem/__init__.py) is the
// public API; these are its building blocks.

#include <pybind11/pybind11.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "python/binding.h"
#ifdef IDEM_PYTHON_KAFKA
#include "python/kafka_consumer.h"
#endif

namespace idem::python {
namespace {

py::object TxnGet(const Txn& t, py::handle key) {
  const std::string_view k = BytesOf(key, "key", true);
  const char* value = nullptr;
  size_t size = 0;
  int found = 0;
  Check(idem_txn_get(t.txn, k.data(), k.size(), &value, &size, &found));
  if (!found) return py::none();
  return py::bytes(size == 0 ? "" : value, size);
}

void TxnPut(const Txn& t, py::handle key, py::handle value, py::handle ttl) {
  const std::string_view k = BytesOf(key, "key", true);
  const std::string_view v = BytesOf(value, "value", false);
  if (ttl.is_none()) {
    Check(idem_txn_put(t.txn, k.data(), k.size(), v.data(), v.size()));
    return;
  }
  Check(idem_txn_put_with_ttl(t.txn, k.data(), k.size(), v.data(), v.size(),
                              TtlMillis(ttl)));
}

void TxnDelete(const Txn& t, py::handle key) {
  const std::string_view k = BytesOf(key, "key", true);
  Check(idem_txn_delete(t.txn, k.data(), k.size()));
}

void TxnSetResult(const Txn& t, py::handle value) {
  const std::string_view v = BytesOf(value, "result", false);
  Check(idem_txn_set_result(t.txn, v.data(), v.size()));
}

void TxnEmit(const Txn& t, py::handle destination, py::handle key,
             py::handle value, int32_t partition, bool tombstone,
             const py::sequence& headers) {
  const std::string_view d = BytesOf(destination, "destination", true);
  const std::string_view k = BytesOf(key, "key", true);
  const std::string_view v = BytesOf(value, "value", false);
  if (partition == -1 && !tombstone && headers.size() == 0) {
    Check(idem_txn_emit(t.txn, d.data(), d.size(), k.data(), k.size(), v.data(),
                        v.size()));
    return;
  }
  // The header objects stay alive in `pairs` while their bytes are viewed.
  std::vector<py::tuple> pairs;
  std::vector<idem_header> c_headers;
  for (py::handle h : headers) {
    if (!PyTuple_Check(h.ptr()) || PyTuple_GET_SIZE(h.ptr()) != 2) {
      throw py::type_error("each header must be a (name, value) tuple");
    }
    pairs.push_back(py::reinterpret_borrow<py::tuple>(h));
    const std::string_view name =
        BytesOf(PyTuple_GET_ITEM(h.ptr(), 0), "header name", true);
    const std::string_view val =
        BytesOf(PyTuple_GET_ITEM(h.ptr(), 1), "header value", true);
    c_headers.push_back({name.data(), name.size(), val.data(), val.size()});
  }
  Check(idem_txn_emit_with_options(
      t.txn, d.data(), d.size(), k.data(), k.size(), v.data(), v.size(),
      partition, tombstone ? 1 : 0, c_headers.data(), c_headers.size()));
}

// The (key, value) pairs a scan visited, as a list of bytes pairs.
py::list PairsToList(
    const std::vector<std::pair<std::string, std::string>>& pairs) {
  py::list out;
  for (const auto& [key, value] : pairs) {
    out.append(py::make_tuple(py::bytes(key), py::bytes(value)));
  }
  return out;
}

py::list TxnScan(const Txn& t, py::handle begin, py::handle end, bool reverse,
                 size_t limit) {
  const std::string_view b = BytesOf(begin, "begin", true);
  const std::string_view e =
      end.is_none() ? std::string_view() : BytesOf(end, "end", true);
  std::vector<std::pair<std::string, std::string>> pairs;
  Check(idem_txn_scan(t.txn, b.data(), b.size(), e.data(), e.size(),
                      reverse ? 1 : 0, limit, &CollectScanPair, &pairs));
  return PairsToList(pairs);
}

py::list TxnScanPrefix(const Txn& t, py::handle prefix, bool reverse,
                       size_t limit) {
  const std::string_view p = BytesOf(prefix, "prefix", true);
  std::vector<std::pair<std::string, std::string>> pairs;
  Check(idem_txn_scan_prefix(t.txn, p.data(), p.size(), reverse ? 1 : 0, limit,
                             &CollectScanPair, &pairs));
  return PairsToList(pairs);
}

void TxnMerge(const Txn& t, py::handle key, idem_merge_op op,
              py::handle operand) {
  const std::string_view k = BytesOf(key, "key", true);
  std::string int_operand;
  std::string_view o;
  if (PyLong_Check(operand.ptr())) {
    // An int is the 8-byte little-endian operand of the int64 operators.
    const int64_t v = operand.cast<int64_t>();
    for (int i = 0; i < 8; ++i) {
      int_operand.push_back(
          static_cast<char>(static_cast<uint64_t>(v) >> (8 * i)));
    }
    o = int_operand;
  } else {
    o = BytesOf(operand, "operand", false);
  }
  Check(idem_txn_merge(t.txn, k.data(), k.size(), op, o.data(), o.size()));
}

void TxnDeleteRange(const Txn& t, py::handle begin, py::handle end) {
  const std::string_view b = BytesOf(begin, "begin", true);
  const std::string_view e = BytesOf(end, "end", true);
  Check(idem_txn_delete_range(t.txn, b.data(), b.size(), e.data(), e.size()));
}

py::object MessageBytes(const Message& m,
                        const char* (*get)(const idem_message*, size_t*)) {
  size_t size = 0;
  const char* data = get(m.get(), &size);
  return py::bytes(size == 0 ? "" : data, size);
}

py::object MessageSource(const Message& m) {
  size_t size = 0;
  const char* data = idem_message_source(m.get(), &size);
  if (size == 0) return py::none();
  PyObject* s = PyUnicode_DecodeUTF8(data, static_cast<Py_ssize_t>(size),
                                     "surrogateescape");
  if (s == nullptr) throw py::error_already_set();
  return py::reinterpret_steal<py::object>(s);
}

void BindMessage(py::module_& m) {
  py::class_<Message>(m, "Message", R"(One delivery to process: immutable.

Message(id, payload=b"", *, source=None, partition=0, offset=-1, ttl=None,
        fingerprint=None, event_time=None)

id: the dedupe key, 1 to 1024 bytes (str is taken as UTF-8).
payload: bytes or bytearray, handed to the handler untouched.
source, partition, offset: the message's position in its stream (a topic
    and partition); recorded with the commit when source is set and
    offset >= 0, so a consumer resumes from Engine.committed_offset().
ttl: how long the ID is remembered (seconds or a timedelta); None: the
    engine's dedupe window.
fingerprint: what makes two deliveries the same content (detect_conflicts).
event_time: when the event happened (seconds since the epoch or a
    datetime); it advances the stream time of (source, partition) when the
    message commits. None: none. An infinite one is refused.
The lengths and ranges are checked when the message is processed.)")
      .def(py::init([](py::handle id, py::handle payload, py::handle source,
                       int32_t partition, int64_t offset, py::handle ttl,
                       py::handle fingerprint, py::handle event_time) {
             auto message = std::make_unique<Message>();
             message->Set(id, payload, source, partition, offset, ttl,
                          fingerprint, event_time);
             return message;
           }),
           py::arg("id"), py::arg("payload") = py::bytes(""), py::kw_only(),
           py::arg("source") = py::none(), py::arg("partition") = 0,
           py::arg("offset") = -1, py::arg("ttl") = py::none(),
           py::arg("fingerprint") = py::none(),
           py::arg("event_time") = py::none())
      .def_property_readonly(
          "id",
          [](const Message& x) { return MessageBytes(x, idem_message_id); },
          "The message ID (bytes).")
      .def_property_readonly(
          "payload",
          [](const Message& x) {
            return MessageBytes(x, idem_message_payload);
          },
          "The payload (bytes).")
      .def_property_readonly("source", &MessageSource,
                             "The source (str), or None.")
      .def_property_readonly(
          "partition",
          [](const Message& x) { return idem_message_partition(x.get()); })
      .def_property_readonly(
          "offset",
          [](const Message& x) { return idem_message_offset(x.get()); })
      .def_property_readonly(
          "event_time",
          [](const Message& x) {
            return TimeToPython(idem_message_event_time_us(x.get()));
          },
          "When the event happened (seconds since the epoch), or None.")
      .def("__repr__", [](const Message& x) {
        return "idem.Message(" +
               py::repr(MessageBytes(x, idem_message_id)).cast<std::string>() +
               ", partition=" +
               std::to_string(idem_message_partition(x.get())) +
               ", offset=" + std::to_string(idem_message_offset(x.get())) + ")";
      });
}

void BindTxn(py::module_& m) {
  py::class_<Txn>(
      m, "Txn", R"(A handler's view of the state while it processes one message.

Valid only during the handler call that received it, on that call's thread:
a call after the handler returned (or from another thread) raises
idem.FailedPrecondition. Writes and emits are committed, with the message's
dedupe record and offset, if and only if the handler returns normally.
Keys are bytes or str (UTF-8); values are bytes or bytearray.)")
      .def("get", &TxnGet, py::arg("key"),
           "The value of key (bytes) as this message sees it (its own "
           "writes, earlier messages of its batch, then the store), or None.")
      .def("put", &TxnPut, py::arg("key"), py::arg("value"), py::kw_only(),
           py::arg("ttl") = py::none(),
           "Buffers a write of value to key. ttl (seconds or a timedelta): "
           "the value expires that long after its commit (every read then "
           "sees the key as absent); None: the engine's state_ttl, if any. "
           "A ttl of 0 or less raises InvalidArgument and fails the "
           "message.")
      .def("delete", &TxnDelete, py::arg("key"),
           "Buffers a deletion of key (an absent key too).")
      .def("set_result", &TxnSetResult, py::arg("value"),
           "The bytes returned to this delivery and its duplicates "
           "(Result.value). The last call wins.")
      .def("emit", &TxnEmit, py::arg("destination"), py::arg("key"),
           py::arg("value"), py::kw_only(), py::arg("partition") = -1,
           py::arg("tombstone") = false, py::arg("headers") = py::tuple(),
           "Buffers an outgoing message into the outbox, committed with the "
           "message. destination: 1 to 1024 bytes without NUL; partition: "
           "the destination's partition, or -1 to let the relay choose by "
           "key; tombstone: publish a null value (value must be b''); "
           "headers: (name, value) tuples. A bad destination, partition or "
           "tombstone fails the message with InvalidArgument.")
      .def("scan", &TxnScan, py::arg("begin"), py::arg("end") = py::none(),
           py::kw_only(), py::arg("reverse") = false, py::arg("limit") = 0,
           "The (key, value) pairs of the keys in [begin, end) (end None or "
           "b'': no upper bound) in byte order, or reversed, at most limit "
           "of them (0: all), as this message sees them. The part of the "
           "range read is validated at commit: a key another commit "
           "inserted, changed or deleted there meanwhile makes the handler "
           "run again (docs/state.md). An end below begin raises "
           "InvalidArgument.")
      .def("scan_prefix", &TxnScanPrefix, py::arg("prefix"), py::kw_only(),
           py::arg("reverse") = false, py::arg("limit") = 0,
           "As scan, over the keys that start with prefix.")
      .def("merge", &TxnMerge, py::arg("key"), py::arg("op"),
           py::arg("operand"),
           "Buffers a merge of operand into key by op (an idem.MergeOp): a "
           "blind write, never conflicting with concurrent merges. For the "
           "int64 operators operand is an int (or its 8 little-endian "
           "bytes); for APPEND, bytes. A bad operand raises InvalidArgument "
           "and fails the message.")
      .def("delete_range", &TxnDeleteRange, py::arg("begin"), py::arg("end"),
           "Buffers a deletion of every key in [begin, end). An empty end, "
           "or one below begin, raises InvalidArgument and fails the "
           "message.");
}

void BindResult(py::module_& m) {
  py::enum_<idem_outcome>(m, "Outcome", "What the engine made of a message.")
      .value("PROCESSED", IDEM_OUTCOME_PROCESSED,
             "the handler ran and its writes were committed")
      .value("DUPLICATE", IDEM_OUTCOME_DUPLICATE,
             "a live record existed: nothing ran, nothing was written")
      .value("FAILED", IDEM_OUTCOME_FAILED,
             "the handler failed: nothing was committed (transient), or the "
             "failure was remembered (permanent)")
      .value("CONFLICT", IDEM_OUTCOME_CONFLICT,
             "detect_conflicts: a live record with another fingerprint");
  py::class_<Result>(m, "Result", "What the engine made of one message.")
      .def_property_readonly(
          "outcome",
          [](const Result& r) { return idem_result_outcome(r.get()); },
          "An idem.Outcome.")
      .def_property_readonly("value", &ResultValue,
                             "PROCESSED: the bytes the handler set "
                             "(Txn.set_result); DUPLICATE and CONFLICT: those "
                             "of the first delivery.")
      .def_property_readonly("error", &ResultError,
                             "FAILED: the exception the handler raised in "
                             "this call, or an idem.Error for a remembered "
                             "failure; None otherwise.")
      .def_property_readonly(
          "permanent",
          [](const Result& r) { return idem_result_permanent(r.get()) != 0; },
          "FAILED: whether the failure is permanent (remembered).")
      .def_property_readonly(
          "sequence",
          [](const Result& r) { return idem_result_sequence(r.get()); },
          "The commit this outcome depends on (Engine.wait_durable); 0 for a "
          "transient failure.")
      .def_property_readonly("first_processed_at", &FirstProcessedAt,
                             "When the ID was first processed (seconds since "
                             "the epoch), or None if unknown.")
      .def("__repr__", [](const Result& r) {
        return "idem.Result(" +
               py::repr(py::cast(idem_result_outcome(r.get())))
                   .cast<std::string>() +
               ", value=" + py::repr(ResultValue(r)).cast<std::string>() + ")";
      });
}

void BindEngine(py::module_& m) {
  py::enum_<idem_merge_op>(m, "MergeOp",
                           "A built-in merge operator (Txn.merge).")
      .value("ADD_INT64", IDEM_MERGE_ADD_INT64, "adds an int64")
      .value("MAX_INT64", IDEM_MERGE_MAX_INT64, "keeps the largest int64")
      .value("MIN_INT64", IDEM_MERGE_MIN_INT64, "keeps the smallest int64")
      .value("APPEND", IDEM_MERGE_APPEND, "appends bytes");
  py::enum_<idem_durability>(m, "_Durability")
      .value("SYNC", IDEM_DURABILITY_SYNC)
      .value("BUFFERED", IDEM_DURABILITY_BUFFERED);
  py::enum_<idem_dedupe_scope>(m, "_DedupeScope")
      .value("STORE", IDEM_DEDUPE_SCOPE_STORE)
      .value("PARTITION", IDEM_DEDUPE_SCOPE_PARTITION);
  py::class_<Engine>(m, "_Engine", "An open store; see idem.Engine.")
      .def(py::init<const std::string&, const py::dict&>())
      .def("close", &Engine::Close)
      .def_property_readonly("closed", &Engine::closed)
      .def_property_readonly("last_sequence", &Engine::last_sequence)
      .def("process_batch", &Engine::ProcessBatch)
      .def("get_state", &Engine::GetState)
      .def("scan_state", &Engine::ScanState)
      .def("seen", &Engine::Seen)
      .def("forget", &Engine::Forget)
      .def("committed_offset", &Engine::CommittedOffset)
      .def("wait_durable", &Engine::WaitDurable)
      .def("stats", &Engine::Stats)
      .def("read_outbox", &Engine::ReadOutbox)
      .def("ack_outbox", &Engine::AckOutbox);
}

}  // namespace
}  // namespace idem::python

PYBIND11_MODULE(_idem, m) {
  namespace ip = idem::python;
  m.doc() = "idem's C extension: use the package idem.";
  ip::InitClasses();
  ip::BindMessage(m);
  ip::BindTxn(m);
  ip::BindResult(m);
  ip::BindEngine(m);
  ip::BindTimers(m);
#ifdef IDEM_PYTHON_KAFKA
  ip::BindKafka(m);
#endif
  m.attr("C_API_VERSION") = idem_c_api_version();
  m.attr("C_API_MINOR") = idem_c_api_minor();
  m.attr("VERSION") = idem_version();
  m.def("_set_release_gil_for_testing", &ip::SetReleaseGilForTesting,
        "Tests only: False makes process calls and "
        "NativeConsumer.poll_batch keep the GIL while the engine or the "
        "consumer runs (a broken build, for the GIL tests' twins).");
}
