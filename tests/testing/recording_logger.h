// RecordingLogger: an idem::Logger that keeps every line it receives, for
// tests of what the engine and the Kafka consumer log. Thread-safe (RocksDB
// and librdkafka log from their own threads).

#ifndef IDEM_TESTS_TESTING_RECORDING_LOGGER_H_
#define IDEM_TESTS_TESTING_RECORDING_LOGGER_H_

#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "idem/logger.h"

namespace idem::test {

class RecordingLogger : public Logger {
 public:
  void Log(LogSeverity severity, std::string_view message) override {
    std::lock_guard<std::mutex> lock(mu_);
    lines_.emplace_back(severity, std::string(message));
  }

  std::vector<std::pair<LogSeverity, std::string>> lines() {
    std::lock_guard<std::mutex> lock(mu_);
    return lines_;
  }

  // Whether a line of `severity` contains `text`.
  bool Has(LogSeverity severity, std::string_view text) {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [s, line] : lines_) {
      if (s == severity && line.find(text) != std::string::npos) return true;
    }
    return false;
  }

 private:
  std::mutex mu_;
  std::vector<std::pair<LogSeverity, std::string>> lines_;
};

}  // namespace idem::test

#endif  // IDEM_TESTS_TESTING_RECORDING_LOGGER_H_
