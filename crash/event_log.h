// The worker's event log: what it delivered, committed and acknowledged,
// written with plain write(2) to a file outside the store so that every line
// written before a kill survives it (the file is not written through the
// crash file system and is never cut by a simulated power loss).
//
// Lines (tab-separated):
//   I <id>...                        about to deliver these to the engine
//   C <sequence> <duplicates> <id>... a batch returned; ids it processed
//   A <partition> <offset> <id>...    acknowledged (partition -1: no position)
//   P <message id> <content>          about to publish an outbox entry to the
//                                     downstream (content: C-escaped)
//   K <count>                         a batch returned this many kConflict
//   X <id> <outcome>                  a conflicting redelivery of <id> was
//                                     not kConflict (but <outcome>)
//   E <message>                       the worker hit an error
//   D                                 the worker consumed the whole stream
// EventLogWriter is safe for concurrent use (one write(2) per line).

#ifndef IDEM_CRASH_EVENT_LOG_H_
#define IDEM_CRASH_EVENT_LOG_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"

namespace idem::crash {

class EventLogWriter {
 public:
  // Opens `path` for appending; aborts the process if it cannot (only used
  // in forked workers, which have nobody to return an error to).
  explicit EventLogWriter(const std::string& path);
  ~EventLogWriter();

  void Invoke(const std::vector<std::string>& ids);
  void Commit(uint64_t sequence, uint64_t duplicates,
              const std::vector<std::string>& processed);
  void Ack(int partition, int64_t offset, const std::vector<std::string>& ids);
  // `content` is any bytes (the log holds it escaped).
  void Publish(const std::string& message_id, const std::string& content);
  void Conflicts(uint64_t count);
  void UnrejectedConflict(const std::string& id, const std::string& outcome);
  void Error(const std::string& message);
  void Done();

 private:
  void WriteLine(std::string line);
  int fd_ = -1;
};

// One cycle's log, parsed.
struct CycleEvents {
  absl::flat_hash_set<std::string> invoked;
  absl::flat_hash_set<std::string> acked;
  uint64_t deliveries = 0;
  uint64_t acked_deliveries = 0;
  uint64_t duplicates = 0;
  uint64_t conflicts = 0;  // kConflict outcomes
  // "<id>: <outcome>" of each conflicting redelivery that was not
  // kConflict.
  std::vector<std::string> unrejected_conflicts;
  struct Commit {
    uint64_t sequence = 0;
    std::vector<std::string> processed;
  };
  std::vector<Commit> commits;
  // Highest acknowledged offset per partition (absent: none this cycle).
  std::vector<int64_t> acked_offsets;
  std::vector<std::string> errors;
  // (message ID, content) of each entry published to the downstream, in
  // order.
  std::vector<std::pair<std::string, std::string>> published;
  bool done = false;
};

// Parses the log at `path`; a torn last line is ignored.
absl::StatusOr<CycleEvents> ReadCycleEvents(const std::string& path,
                                            int partitions);

}  // namespace idem::crash

#endif  // IDEM_CRASH_EVENT_LOG_H_
