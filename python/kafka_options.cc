// ParseConsumerOptions (python/kafka_consumer.h): NativeConsumer's keyword
// arguments as an idem::kafka::ConsumerOptions.

#include <pybind11/pybind11.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "c/c_internal.h"
#include "python/binding.h"
#include "python/kafka_consumer.h"

namespace idem::python {
namespace {

using kafka::ConsumerOptions;

[[noreturn]] void InvalidValue(const std::string& name,
                               const std::string& why) {
  Raise(c_api::Fail(absl::InvalidArgumentError(name + ": " + why)));
}

[[noreturn]] void WrongType(const std::string& name, const char* expected,
                            py::handle value) {
  throw py::type_error(name + " must be " + expected + ", not " +
                       Py_TYPE(value.ptr())->tp_name);
}

std::string StringOf(const std::string& name, py::handle value) {
  if (!PyUnicode_Check(value.ptr())) WrongType(name, "str", value);
  return value.cast<std::string>();
}

bool BoolOf(const std::string& name, py::handle value) {
  if (!PyBool_Check(value.ptr())) WrongType(name, "bool", value);
  return value.ptr() == Py_True;
}

int64_t Int64Of(const std::string& name, py::handle value) {
  if (!PyLong_Check(value.ptr()) || PyBool_Check(value.ptr())) {
    WrongType(name, "int", value);
  }
  int overflow = 0;
  const long long v = PyLong_AsLongLongAndOverflow(value.ptr(), &overflow);
  if (overflow != 0) InvalidValue(name, "out of range");
  return v;
}

int IntOf(const std::string& name, py::handle value) {
  const int64_t v = Int64Of(name, value);
  if (v < std::numeric_limits<int>::min() ||
      v > std::numeric_limits<int>::max()) {
    InvalidValue(name, "out of range");
  }
  return static_cast<int>(v);
}

// Seconds (int or float), a datetime.timedelta, or None (infinite).
absl::Duration DurationOf(const std::string& name, py::handle value) {
  if (value.is_none()) return absl::InfiniteDuration();
  double seconds = 0;
  if (py::hasattr(value, "total_seconds")) {
    seconds = value.attr("total_seconds")().cast<double>();
  } else if ((PyFloat_Check(value.ptr()) || PyLong_Check(value.ptr())) &&
             !PyBool_Check(value.ptr())) {
    seconds = value.cast<double>();
  } else {
    WrongType(name, "seconds (int or float), a timedelta or None", value);
  }
  if (std::isnan(seconds)) InvalidValue(name, "not a number");
  return absl::Seconds(seconds);
}

std::vector<std::string> StringsOf(const std::string& name, py::handle value) {
  if (PyUnicode_Check(value.ptr())) return {value.cast<std::string>()};
  if (!py::isinstance<py::sequence>(value)) {
    WrongType(name, "a str or a list of str", value);
  }
  std::vector<std::string> out;
  for (py::handle item : value) out.push_back(StringOf(name, item));
  return out;
}

// librdkafka properties from a dict; values str, int or bool (as
// "true"/"false").
std::vector<std::pair<std::string, std::string>> PropertiesOf(
    const std::string& name, py::handle value) {
  if (!py::isinstance<py::dict>(value)) WrongType(name, "a dict", value);
  std::vector<std::pair<std::string, std::string>> out;
  for (auto [k, v] : value.cast<py::dict>()) {
    const std::string key = StringOf(name + " key", k);
    std::string text;
    if (PyBool_Check(v.ptr())) {
      text = v.ptr() == Py_True ? "true" : "false";
    } else if (PyLong_Check(v.ptr()) || PyFloat_Check(v.ptr())) {
      text = py::str(v).cast<std::string>();
    } else {
      text = StringOf(name + "[" + key + "]", v);
    }
    out.emplace_back(key, std::move(text));
  }
  return out;
}

kafka::Ordering OrderingOf(const std::string& name, py::handle value) {
  const std::string s = StringOf(name, value);
  if (s == "partition") return kafka::Ordering::kPartition;
  if (s == "key") return kafka::Ordering::kKey;
  InvalidValue(name, "must be 'partition' or 'key', got '" + s + "'");
}

std::vector<int32_t> PartitionsOf(const std::string& name, py::handle value) {
  if (!py::isinstance<py::sequence>(value)) {
    WrongType(name, "a list of int", value);
  }
  std::vector<int32_t> out;
  for (py::handle item : value) out.push_back(IntOf(name, item));
  return out;
}

using Setter = std::function<void(ConsumerOptions&, const std::string& name,
                                  py::handle value)>;

// The keyword arguments, by name.
const absl::flat_hash_map<std::string, Setter>& Setters() {
  static const auto* setters = new absl::flat_hash_map<std::string, Setter>{
      {"brokers", [](ConsumerOptions& o, const std::string& n,
                     py::handle v) { o.brokers = StringOf(n, v); }},
      {"bootstrap_servers", [](ConsumerOptions& o, const std::string& n,
                               py::handle v) { o.brokers = StringOf(n, v); }},
      {"group_id", [](ConsumerOptions& o, const std::string& n,
                      py::handle v) { o.group_id = StringOf(n, v); }},
      {"topics", [](ConsumerOptions& o, const std::string& n,
                    py::handle v) { o.topics = StringsOf(n, v); }},
      {"unknown_topic_timeout",
       [](ConsumerOptions& o, const std::string& n, py::handle v) {
         o.unknown_topic_timeout = DurationOf(n, v);
       }},
      {"kafka_config",
       [](ConsumerOptions& o, const std::string& n, py::handle v) {
         o.kafka_config = PropertiesOf(n, v);
       }},
      {"id_header", [](ConsumerOptions& o, const std::string& n,
                       py::handle v) { o.id_header = StringOf(n, v); }},
      {"ttl",
       [](ConsumerOptions& o, const std::string& n, py::handle v) {
         o.ttl = v.is_none() ? absl::ZeroDuration() : DurationOf(n, v);
       }},
      {"max_batch", [](ConsumerOptions& o, const std::string& n,
                       py::handle v) { o.max_batch = IntOf(n, v); }},
      {"poll_timeout", [](ConsumerOptions& o, const std::string& n,
                          py::handle v) { o.poll_timeout = DurationOf(n, v); }},
      {"workers", [](ConsumerOptions& o, const std::string& n,
                     py::handle v) { o.workers = IntOf(n, v); }},
      {"ordering", [](ConsumerOptions& o, const std::string& n,
                      py::handle v) { o.ordering = OrderingOf(n, v); }},
      {"max_attempts", [](ConsumerOptions& o, const std::string& n,
                          py::handle v) { o.max_attempts = IntOf(n, v); }},
      {"retry_backoff",
       [](ConsumerOptions& o, const std::string& n, py::handle v) {
         o.retry_backoff = DurationOf(n, v);
       }},
      {"dead_letter_topic",
       [](ConsumerOptions& o, const std::string& n, py::handle v) {
         o.dead_letter_topic = StringOf(n, v);
       }},
      {"relay_outbox", [](ConsumerOptions& o, const std::string& n,
                          py::handle v) { o.relay_outbox = BoolOf(n, v); }},
      {"relay_kafka_config",
       [](ConsumerOptions& o, const std::string& n, py::handle v) {
         o.relay_kafka_config = PropertiesOf(n, v);
       }},
      {"outbox_max_attempts",
       [](ConsumerOptions& o, const std::string& n, py::handle v) {
         o.outbox_max_attempts = IntOf(n, v);
       }},
      {"max_outbox_pending",
       [](ConsumerOptions& o, const std::string& n, py::handle v) {
         o.max_outbox_pending = Int64Of(n, v);
       }},
      {"transactional_output",
       [](ConsumerOptions& o, const std::string& n, py::handle v) {
         o.transactional_output = BoolOf(n, v);
       }},
      {"relay_progress_topic",
       [](ConsumerOptions& o, const std::string& n, py::handle v) {
         o.relay_progress_topic = StringOf(n, v);
       }},
      {"transaction_timeout",
       [](ConsumerOptions& o, const std::string& n, py::handle v) {
         o.transaction_timeout = DurationOf(n, v);
       }},
      {"transaction_interval",
       [](ConsumerOptions& o, const std::string& n, py::handle v) {
         o.transaction_interval = DurationOf(n, v);
       }},
      {"changelog_topic",
       [](ConsumerOptions& o, const std::string& n, py::handle v) {
         o.changelog_topic = StringOf(n, v);
       }},
      {"restore_step_records",
       [](ConsumerOptions& o, const std::string& n, py::handle v) {
         o.restore_step_records = Int64Of(n, v);
       }},
      {"standby_partitions",
       [](ConsumerOptions& o, const std::string& n, py::handle v) {
         o.standby_partitions = PartitionsOf(n, v);
       }},
      {"standby_interval",
       [](ConsumerOptions& o, const std::string& n, py::handle v) {
         o.standby_interval = DurationOf(n, v);
       }},
      {"check_group_offsets",
       [](ConsumerOptions& o, const std::string& n, py::handle v) {
         o.check_group_offsets = BoolOf(n, v);
       }},
      {"commit_to_kafka",
       [](ConsumerOptions& o, const std::string& n, py::handle v) {
         o.commit_to_kafka = BoolOf(n, v);
       }},
  };
  return *setters;
}

}  // namespace

void ParseConsumerOptions(const py::dict& kwargs, ConsumerOptions& options) {
  const auto& setters = Setters();
  for (auto [key, value] : kwargs) {
    const std::string name = key.cast<std::string>();
    auto it = setters.find(name);
    if (it == setters.end()) {
      throw py::type_error(
          "NativeConsumer got an unexpected keyword "
          "argument '" +
          name + "'");
    }
    it->second(options, name, value);
  }
}

}  // namespace idem::python
