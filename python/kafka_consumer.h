// idem.kafka.NativeConsumer's extension classes (python/kafka_consumer.cc):
// bindings of the C++ Kafka consumer (idem/kafka/consumer.h), built when
// idem::kafka is (IDEM_PYTHON_KAFKA). The package's idem.kafka module wraps
// them (python/idem/kafka.py).
//
// Threading: a consumer's poll_batch and run release the GIL while the C++
// consumer polls, commits and publishes, and take it for each handler call,
// on whichever thread runs the handler (the caller's, run()'s thread, or a
// worker's). One poll_batch or run at a time; stop() and close() may be
// called from any thread.

#ifndef IDEM_PYTHON_KAFKA_CONSUMER_H_
#define IDEM_PYTHON_KAFKA_CONSUMER_H_

#include <pybind11/pybind11.h>

#include "idem/kafka/consumer_options.h"

namespace idem::python {

namespace py = pybind11;

// Fills `options` from keyword arguments (docs/python.md, "The native Kafka
// consumer"): raises TypeError for an unknown name or a value of the wrong
// type, idem.InvalidArgument for a value out of range. Values the C++
// consumer checks (e.g. max_batch >= 1) are left to Consumer::Create.
void ParseConsumerOptions(const py::dict& kwargs,
                          kafka::ConsumerOptions& options);

// Defines the classes _KafkaConsumer and KafkaRecord in `m`.
void BindKafka(py::module_& m);

}  // namespace idem::python

#endif  // IDEM_PYTHON_KAFKA_CONSUMER_H_
