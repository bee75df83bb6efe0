// The engine's RocksDB info log: a rocksdb::Logger that hands each line to an
// idem::Logger, set as DBOptions::info_log of every database the engine
// opens. RocksDB's own file logger is never used: on a full disk its writer
// trips an assertion (Debian builds RocksDB with assertions on) when the
// out-of-space recovery logs after a failed flush of the LOG file.
//
// Without a user logger, lines go to StoreLogFile: appended to <store>/LOG
// with write(2), errors ignored (a full disk drops lines, never fails or
// aborts anything). Read-only opens log nowhere unless the user set a logger.
//
// Thread-safe; RocksDB calls it from its background threads.

#ifndef IDEM_ENGINE_INFO_LOG_H_
#define IDEM_ENGINE_INFO_LOG_H_

#include <memory>
#include <string>

#include "idem/clock.h"
#include "idem/logger.h"
#include "rocksdb/env.h"

namespace idem {

// Appends lines to one file, best effort. The file is opened at
// construction (created if missing; with `rotate`, renamed to LOG.old first
// when it is over kMaxBytes); if it cannot be opened, lines are dropped.
class StoreLogFile : public Logger {
 public:
  static constexpr size_t kMaxBytes = size_t{4} << 20;

  // Lines are stamped with `clock`'s time (borrowed; SystemClock() if null).
  // The engine's own events append without `rotate`: the file is RocksDB's
  // info log's too, which rotates it when it opens.
  StoreLogFile(const std::string& path, Clock* clock, bool rotate = true);
  ~StoreLogFile() override;

  void Log(LogSeverity severity, std::string_view message) override;

 private:
  Clock* const clock_;
  int fd_ = -1;
};

// The info log for a database the engine opens. `user` (borrowed, may be
// null) receives every line at warning level and above; if null and
// `log_file` is non-empty, a StoreLogFile at `log_file` does; otherwise lines
// are dropped. `clock` stamps the file's lines.
std::shared_ptr<rocksdb::Logger> MakeInfoLog(Logger* user,
                                             const std::string& log_file,
                                             Clock* clock);

}  // namespace idem

#endif  // IDEM_ENGINE_INFO_LOG_H_
