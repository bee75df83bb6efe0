// PartitionReader reads one topic partition of Kafka from its first
// retained record up to the end it had when the read started, without a
// consumer group: what a changelog restore needs (docs/scale-out.md). It
// reads with isolation.level=read_committed (records of aborted and open
// transactions are left out) and keeps a record's null value (a tombstone)
// apart from an empty one. The end of a read is the end of the log (its
// high watermark as a read_uncommitted reader sees it), not the last stable
// offset: records of a transaction still open there are not yet decided,
// so a read first waits until the last stable offset passes the end
// (every transaction open then was committed or aborted), and then reads
// what committed.
//
// Not thread-safe: one call at a time.

#ifndef IDEM_KAFKA_PARTITION_READER_H_
#define IDEM_KAFKA_PARTITION_READER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "idem/kafka/record.h"
#include "kafka/rdkafka_util.h"

namespace idem::kafka {

// One record as read: `record`'s views are valid only during the visit;
// `tombstone` tells a null value (log compaction's deletion marker) from an
// empty one, which Record::value cannot.
struct LogRecord {
  Record record;
  bool tombstone = false;
};

// A partition's retained offsets: [low, high); high is the offset the next
// produced record gets, so the partition is empty when low == high.
struct Watermarks {
  int64_t low = 0;
  int64_t high = 0;
};

// Where a bounded read (PartitionReader::ReadSome) stopped.
struct ReadProgress {
  int64_t next = 0;  // the offset to read from next
  // Where the read ended: the end of the log when the call started (or,
  // for ReadSomeToStable, its last stable offset then).
  int64_t high = 0;
  bool at_end = false;  // every record before `high` was read
  // The end of the log when the call started (its read_uncommitted high
  // watermark); above `high` while a transaction is open before it.
  int64_t log_end = 0;
};

// Stand-ins for tests: librdkafka's mock cluster keeps no last stable
// offset (it equals the high watermark), and a broken variant.
struct PartitionReaderHooks {
  // If set, what the brokers answer for the last stable offset of
  // (`topic`, `partition`), given the real one and the end of the log, e.g.
  // an offset before the end while an emulated transaction is open.
  std::function<int64_t(const std::string& topic, int32_t partition,
                        int64_t stable, int64_t end)>
      stable_offset;
  // Broken: a read ends at the last stable offset, as if nothing came after
  // it, rather than waiting for it to pass the end of the log.
  bool stable_offset_is_the_end = false;
};

class PartitionReader {
 public:
  // `config` is applied after the reader's own settings (e.g. security
  // properties). kInvalidArgument for a bad property, kUnavailable if
  // librdkafka cannot be set up.
  static absl::StatusOr<std::unique_ptr<PartitionReader>> Create(
      const std::string& brokers, const ConfigList& config,
      PartitionReaderHooks hooks = {});

  // The number of partitions of `topic`; kNotFound if it does not exist.
  absl::StatusOr<int32_t> PartitionCount(const std::string& topic,
                                         absl::Duration timeout);

  absl::StatusOr<Watermarks> GetWatermarks(const std::string& topic,
                                           int32_t partition,
                                           absl::Duration timeout);

  // Visits every record of (topic, partition) from `from` (or the first
  // retained one, if later) up to, not including, the end of the log when
  // the call starts, in offset order, once the last stable offset passed
  // that end (see the file comment). Stops at and returns the first non-OK
  // status of `visit`. kDeadlineExceeded if no record arrives for `timeout`
  // while records are still due, or if the last stable offset stays below
  // the end for `timeout` (a transaction there is still open; its
  // producer's transaction.timeout.ms bounds that); Kafka errors as
  // FromKafkaError.
  // `*end`, if given, is set to that high watermark: on success, the offset
  // after the last one read (or skipped, as a transaction's marker is).
  absl::Status Read(const std::string& topic, int32_t partition, int64_t from,
                    absl::Duration timeout,
                    absl::FunctionRef<absl::Status(const LogRecord&)> visit,
                    int64_t* end = nullptr);

  // As Read, but where records from `from` on are no longer all retained
  // (the first retained offset is above `from`: deleted by retention or
  // DeleteRecords), kDataLoss naming the partition and both offsets, before
  // any record is visited: what a restore must not read as if it were whole.
  absl::Status ReadAllFrom(
      const std::string& topic, int32_t partition, int64_t from,
      absl::Duration timeout,
      absl::FunctionRef<absl::Status(const LogRecord&)> visit,
      int64_t* end = nullptr);

  // As ReadAllFrom when `whole` (Read otherwise), but stops once `limit`
  // records were visited (0: no limit), and says where: a read in bounded
  // steps, each from the previous one's `next`.
  absl::StatusOr<ReadProgress> ReadSome(
      const std::string& topic, int32_t partition, int64_t from, bool whole,
      int64_t limit, absl::Duration timeout,
      absl::FunctionRef<absl::Status(const LogRecord&)> visit);

  // As ReadSome, but the read ends at the last stable offset when the call
  // starts, without waiting for it to pass the end of the log: what a
  // reader that reads on later needs (a standby copy). Records of a
  // transaction open there are neither visited nor passed: `next` and
  // `high` stay at most that offset, so a later read from `next` visits
  // them once the transaction committed. `timeout` bounds only the wait
  // for records that are due.
  absl::StatusOr<ReadProgress> ReadSomeToStable(
      const std::string& topic, int32_t partition, int64_t from, bool whole,
      int64_t limit, absl::Duration timeout,
      absl::FunctionRef<absl::Status(const LogRecord&)> visit);

 private:
  PartitionReader(HandlePtr handle, HandlePtr log_end,
                  PartitionReaderHooks hooks)
      : handle_(std::move(handle)),
        log_end_(std::move(log_end)),
        hooks_(std::move(hooks)) {}

  // Where a read ends.
  enum class End {
    kDecided,  // the end of the log, once the last stable offset passed it
    kStable,   // the last stable offset, without waiting
  };

  // The end of the log (the read_uncommitted high watermark).
  absl::StatusOr<int64_t> LogEnd(const std::string& topic, int32_t partition,
                                 absl::Duration timeout);

  // The last stable offset (PartitionReaderHooks::stable_offset's answer if
  // set), given the end of the log `end`.
  absl::StatusOr<int64_t> StableOffset(const std::string& topic,
                                       int32_t partition, int64_t end,
                                       absl::Duration timeout);

  // The end of the log `end`, once the last stable offset reached it,
  // waiting at most `timeout` for that.
  absl::StatusOr<int64_t> DecidedEnd(const std::string& topic,
                                     int32_t partition, int64_t end,
                                     absl::Duration timeout);

  // ReadSome and ReadSomeToStable: the read ends as `end_at` says.
  absl::StatusOr<ReadProgress> ReadRange(
      const std::string& topic, int32_t partition, int64_t from, bool whole,
      int64_t limit, absl::Duration timeout, End end_at,
      absl::FunctionRef<absl::Status(const LogRecord&)> visit);

  // Read and ReadAllFrom: ReadSome without a limit; `*end`, the high
  // watermark.
  absl::Status ReadToEnd(
      const std::string& topic, int32_t partition, int64_t from, bool whole,
      absl::Duration timeout,
      absl::FunctionRef<absl::Status(const LogRecord&)> visit, int64_t* end);

  HandlePtr handle_;   // read_committed: reads, and the last stable offset
  HandlePtr log_end_;  // read_uncommitted: the end of the log
  const PartitionReaderHooks hooks_;
};

}  // namespace idem::kafka

#endif  // IDEM_KAFKA_PARTITION_READER_H_
