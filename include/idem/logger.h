// idem::Logger receives the engine's log lines: RocksDB's own info log (what
// it would otherwise write to the LOG file in the store) at warning level and
// above, and the engine's own events, prefixed "idem: " (a reopen after a
// failed write or sync and how it ended, expiry buckets dropped, partition
// imports, which is how changelog restores reach the store). Set one
// through Options::logger to route them into the application's logging;
// without one, the engine appends them to a LOG file in the store directory
// (nothing for read-only opens). The Kafka consumer routes librdkafka's
// lines the same way (idem::kafka::ConsumerOptions::logger).
//
// Implementations must be safe for concurrent access from multiple threads
// without external synchronization: RocksDB logs from its background threads.
// Log must not block for long and must not call back into the engine. An
// exception thrown by Log is caught and the line dropped.

#ifndef IDEM_LOGGER_H_
#define IDEM_LOGGER_H_

#include <string_view>

namespace idem {

enum class LogSeverity { kDebug, kInfo, kWarning, kError, kFatal };

// "debug", "info", "warning", "error" or "fatal".
const char* LogSeverityName(LogSeverity severity);

class Logger {
 public:
  virtual ~Logger();

  // One line, without a trailing newline. `message` is valid only during
  // the call.
  virtual void Log(LogSeverity severity, std::string_view message) = 0;
};

}  // namespace idem

#endif  // IDEM_LOGGER_H_
