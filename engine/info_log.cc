#include "engine/info_log.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdarg>
#include <cstdio>
#include <exception>
#include <string>

#include "absl/time/time.h"
#include "engine/user_code.h"

namespace idem {
namespace {

LogSeverity SeverityOf(rocksdb::InfoLogLevel level) {
  switch (level) {
    case rocksdb::InfoLogLevel::DEBUG_LEVEL:
      return LogSeverity::kDebug;
    case rocksdb::InfoLogLevel::WARN_LEVEL:
      return LogSeverity::kWarning;
    case rocksdb::InfoLogLevel::ERROR_LEVEL:
      return LogSeverity::kError;
    case rocksdb::InfoLogLevel::FATAL_LEVEL:
      return LogSeverity::kFatal;
    default:
      return LogSeverity::kInfo;
  }
}

// Formats RocksDB's printf-style lines and passes them on. Never throws.
class InfoLogAdapter : public rocksdb::Logger {
 public:
  // `sink` is used if non-null, else `owned` (which may be null too).
  InfoLogAdapter(idem::Logger* sink, std::unique_ptr<idem::Logger> owned)
      : rocksdb::Logger(rocksdb::InfoLogLevel::WARN_LEVEL),
        owned_(std::move(owned)),
        sink_(sink != nullptr ? sink : owned_.get()) {}

  void Logv(const char* format, va_list ap) override {
    Logv(rocksdb::InfoLogLevel::INFO_LEVEL, format, ap);
  }

  void Logv(const rocksdb::InfoLogLevel level, const char* format,
            va_list ap) override {
    if (sink_ == nullptr || level < GetInfoLogLevel() ||
        level == rocksdb::InfoLogLevel::HEADER_LEVEL) {
      return;
    }
    char buffer[1024];
    va_list copy;
    va_copy(copy, ap);
    const int n = std::vsnprintf(buffer, sizeof(buffer), format, copy);
    va_end(copy);
    if (n < 0) return;
    std::string_view line(buffer, std::min<size_t>(n, sizeof(buffer) - 1));
    while (!line.empty() && line.back() == '\n') line.remove_suffix(1);
    // A logger must not throw into RocksDB; the line is dropped.
    CallUserCode("the logger", [&] {
      sink_->Log(SeverityOf(level), line);
      return absl::OkStatus();
    }).IgnoreError();
  }

 private:
  const std::unique_ptr<idem::Logger> owned_;
  idem::Logger* const sink_;
};

}  // namespace

const char* LogSeverityName(LogSeverity severity) {
  switch (severity) {
    case LogSeverity::kDebug:
      return "debug";
    case LogSeverity::kInfo:
      return "info";
    case LogSeverity::kWarning:
      return "warning";
    case LogSeverity::kError:
      return "error";
    case LogSeverity::kFatal:
      return "fatal";
  }
  return "unknown";
}

Logger::~Logger() = default;

StoreLogFile::StoreLogFile(const std::string& path, Clock* clock, bool rotate)
    : clock_(clock != nullptr ? clock : SystemClock()) {
  struct stat st;
  if (rotate && ::stat(path.c_str(), &st) == 0 &&
      static_cast<size_t>(st.st_size) > kMaxBytes) {
    ::rename(path.c_str(), (path + ".old").c_str());  // best effort
  }
  fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
}

StoreLogFile::~StoreLogFile() {
  if (fd_ >= 0) ::close(fd_);
}

void StoreLogFile::Log(LogSeverity severity, std::string_view message) {
  if (fd_ < 0) return;
  std::string line;
  // A clock that throws only costs the line its time.
  CallUserCode("the clock", [&] {
    line = absl::FormatTime("%Y-%m-%dT%H:%M:%E6SZ ", clock_->Now(),
                            absl::UTCTimeZone());
    return absl::OkStatus();
  }).IgnoreError();
  line += LogSeverityName(severity);
  line += ": ";
  line.append(message);
  line += '\n';
  // One write(2) per line keeps lines whole under O_APPEND; a failed or short
  // write (a full disk) loses the line and nothing else.
  [[maybe_unused]] ssize_t written = ::write(fd_, line.data(), line.size());
}

std::shared_ptr<rocksdb::Logger> MakeInfoLog(Logger* user,
                                             const std::string& log_file,
                                             Clock* clock) {
  std::unique_ptr<Logger> owned;
  if (user == nullptr && !log_file.empty()) {
    owned = std::make_unique<StoreLogFile>(log_file, clock);
  }
  return std::make_shared<InfoLogAdapter>(user, std::move(owned));
}

}  // namespace idem
