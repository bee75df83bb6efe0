#include "kafka/partition_reader.h"

#include <librdkafka/rdkafka.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "kafka/record_ids.h"

namespace idem::kafka {

namespace {

// A handle with the reader's settings, `isolation` its isolation.level.
absl::StatusOr<HandlePtr> NewReaderHandle(const std::string& brokers,
                                          const ConfigList& config,
                                          const std::string& isolation) {
  ConfPtr conf(rd_kafka_conf_new());
  // librdkafka's assign needs a group.id, but the group is never joined:
  // partitions are assigned by hand and nothing is committed. A read ends
  // at the end of the log, where the last fetch waits for records that do
  // not come, and ending the read waits for that fetch: fetch.wait.max.ms
  // bounds it (the default, 500 ms, dominated a standby copy's takeover;
  // 10 ms slowed the read of a long log; idem_kafka_bench BM_Restore and
  // BM_RestoreFromStandby).
  ConfigList settings = {
      {"bootstrap.servers", brokers},
      {"group.id", "idem.partition-reader"},
      {"enable.auto.commit", "false"},
      {"enable.auto.offset.store", "false"},
      {"enable.partition.eof", "true"},
      {"auto.offset.reset", "earliest"},
      {"queued.min.messages", "1000000"},
      {"fetch.max.bytes", "52428800"},
      {"fetch.wait.max.ms", "50"},
      // Records of aborted or still open transactions are never read: a
      // read ends at the last stable offset, where librdkafka reports the
      // partition's end (a zombie member's fenced changelog records are
      // never restored).
      {"isolation.level", isolation},
      {"reconnect.backoff.max.ms", kReconnectBackoffMaxMs}};
  settings.insert(settings.end(), config.begin(), config.end());
  if (absl::Status s = SetConfig(conf.get(), settings); !s.ok()) return s;
  absl::StatusOr<HandlePtr> handle =
      NewHandle(RD_KAFKA_CONSUMER, std::move(conf));
  if (!handle.ok()) return handle.status();
  rd_kafka_poll_set_consumer(handle->get());
  return handle;
}

}  // namespace

absl::StatusOr<std::unique_ptr<PartitionReader>> PartitionReader::Create(
    const std::string& brokers, const ConfigList& config,
    PartitionReaderHooks hooks) {
  absl::StatusOr<HandlePtr> handle =
      NewReaderHandle(brokers, config, "read_committed");
  if (!handle.ok()) return handle.status();
  // Only asked for the end of the log (its high watermark), never read.
  absl::StatusOr<HandlePtr> log_end =
      NewReaderHandle(brokers, config, "read_uncommitted");
  if (!log_end.ok()) return log_end.status();
  return std::unique_ptr<PartitionReader>(new PartitionReader(
      *std::move(handle), *std::move(log_end), std::move(hooks)));
}

absl::StatusOr<int64_t> PartitionReader::LogEnd(const std::string& topic,
                                                int32_t partition,
                                                absl::Duration timeout) {
  int64_t low = 0, end = 0;
  if (absl::Status s =
          FromKafkaError(rd_kafka_query_watermark_offsets(
                             log_end_.get(), topic.c_str(), partition, &low,
                             &end, ToKafkaMillis(timeout)),
                         absl::StrCat("the end of ", topic, "/", partition));
      !s.ok()) {
    return s;
  }
  return end;
}

absl::StatusOr<int64_t> PartitionReader::StableOffset(const std::string& topic,
                                                      int32_t partition,
                                                      int64_t end,
                                                      absl::Duration timeout) {
  // A read_committed reader's high watermark is the last stable offset.
  absl::StatusOr<Watermarks> committed =
      GetWatermarks(topic, partition, timeout);
  if (!committed.ok()) return committed.status();
  int64_t stable = committed->high;
  if (hooks_.stable_offset) {
    stable = hooks_.stable_offset(topic, partition, stable, end);
  }
  return std::min(stable, end);
}

absl::StatusOr<int64_t> PartitionReader::DecidedEnd(const std::string& topic,
                                                    int32_t partition,
                                                    int64_t end,
                                                    absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (true) {
    absl::StatusOr<int64_t> stable =
        StableOffset(topic, partition, end, timeout);
    if (!stable.ok()) return stable.status();
    if (hooks_.stable_offset_is_the_end) return *stable;
    if (*stable >= end) return end;
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(absl::StrCat(
          "reading ", topic, "/", partition, ": its last stable offset stayed ",
          "at ", *stable, ", below the end of the log at ", end, ", for ",
          absl::FormatDuration(timeout),
          ": a transaction there is still open (the brokers abort it after "
          "its producer's transaction.timeout.ms)"));
    }
    absl::SleepFor(absl::Milliseconds(50));
  }
}

absl::StatusOr<int32_t> PartitionReader::PartitionCount(
    const std::string& topic, absl::Duration timeout) {
  return TopicPartitionCount(handle_.get(), topic, timeout);
}

absl::StatusOr<Watermarks> PartitionReader::GetWatermarks(
    const std::string& topic, int32_t partition, absl::Duration timeout) {
  Watermarks marks;
  rd_kafka_resp_err_t err = rd_kafka_query_watermark_offsets(
      handle_.get(), topic.c_str(), partition, &marks.low, &marks.high,
      ToKafkaMillis(timeout));
  if (absl::Status s = FromKafkaError(
          err, absl::StrCat("watermarks of ", topic, "/", partition));
      !s.ok()) {
    return s;
  }
  return marks;
}

absl::Status PartitionReader::Read(
    const std::string& topic, int32_t partition, int64_t from,
    absl::Duration timeout,
    absl::FunctionRef<absl::Status(const LogRecord&)> visit, int64_t* end) {
  return ReadToEnd(topic, partition, from, /*whole=*/false, timeout, visit,
                   end);
}

absl::Status PartitionReader::ReadAllFrom(
    const std::string& topic, int32_t partition, int64_t from,
    absl::Duration timeout,
    absl::FunctionRef<absl::Status(const LogRecord&)> visit, int64_t* end) {
  return ReadToEnd(topic, partition, from, /*whole=*/true, timeout, visit, end);
}

absl::Status PartitionReader::ReadToEnd(
    const std::string& topic, int32_t partition, int64_t from, bool whole,
    absl::Duration timeout,
    absl::FunctionRef<absl::Status(const LogRecord&)> visit, int64_t* end) {
  absl::StatusOr<ReadProgress> read =
      ReadSome(topic, partition, from, whole, /*limit=*/0, timeout, visit);
  if (!read.ok()) return read.status();
  if (end != nullptr) *end = read->high;
  return absl::OkStatus();
}

absl::StatusOr<ReadProgress> PartitionReader::ReadSome(
    const std::string& topic, int32_t partition, int64_t from, bool whole,
    int64_t limit, absl::Duration timeout,
    absl::FunctionRef<absl::Status(const LogRecord&)> visit) {
  return ReadRange(topic, partition, from, whole, limit, timeout, End::kDecided,
                   visit);
}

absl::StatusOr<ReadProgress> PartitionReader::ReadSomeToStable(
    const std::string& topic, int32_t partition, int64_t from, bool whole,
    int64_t limit, absl::Duration timeout,
    absl::FunctionRef<absl::Status(const LogRecord&)> visit) {
  return ReadRange(topic, partition, from, whole, limit, timeout, End::kStable,
                   visit);
}

absl::StatusOr<ReadProgress> PartitionReader::ReadRange(
    const std::string& topic, int32_t partition, int64_t from, bool whole,
    int64_t limit, absl::Duration timeout, End end_at,
    absl::FunctionRef<absl::Status(const LogRecord&)> visit) {
  absl::StatusOr<Watermarks> marks = GetWatermarks(topic, partition, timeout);
  if (!marks.ok()) return marks.status();
  absl::StatusOr<int64_t> log_end = LogEnd(topic, partition, timeout);
  if (!log_end.ok()) return log_end.status();
  // Up to the end of the log once every transaction there is decided, or
  // up to where the undecided ones begin.
  absl::StatusOr<int64_t> end =
      end_at == End::kDecided
          ? DecidedEnd(topic, partition, *log_end, timeout)
          : StableOffset(topic, partition, *log_end, timeout);
  if (!end.ok()) return end.status();
  marks->high = *end;
  if (whole && marks->low > from) {
    return absl::DataLossError(absl::StrCat(
        topic, "/", partition,
        " is truncated: its first retained record is at offset ", marks->low,
        ", and it is needed from offset ", from,
        " on; records were deleted (retention or DeleteRecords), so what is "
        "left is not the whole log"));
  }
  ReadProgress progress;
  progress.high = marks->high;
  progress.log_end = *log_end;
  progress.next = std::max(from, marks->low);
  if (progress.next >= marks->high) {
    progress.at_end = true;
    return progress;
  }
  const int64_t start = progress.next;

  PartitionListPtr list(rd_kafka_topic_partition_list_new(1));
  rd_kafka_topic_partition_list_add(list.get(), topic.c_str(), partition)
      ->offset = start;
  if (absl::Status s =
          FromKafkaError(rd_kafka_assign(handle_.get(), list.get()),
                         absl::StrCat("assigning ", topic, "/", partition));
      !s.ok()) {
    return s;
  }
  // Unassigns on every return, so the next Read starts afresh.
  struct Unassign {
    rd_kafka_t* rk;
    ~Unassign() { rd_kafka_assign(rk, nullptr); }
  } unassign{handle_.get()};

  int64_t& next = progress.next;
  int64_t visited = 0;
  absl::Time last_progress = absl::Now();
  while (next < marks->high) {
    if (limit > 0 && visited == limit) return progress;
    MessagePtr message(rd_kafka_consumer_poll(handle_.get(), 100));
    if (message == nullptr) {
      if (absl::Now() - last_progress > timeout) {
        return absl::DeadlineExceededError(
            absl::StrCat("reading ", topic, "/", partition, ": no record for ",
                         absl::FormatDuration(timeout), " at offset ", next,
                         " of ", marks->high));
      }
      continue;
    }
    if (message->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) {
      // The end moved back (records deleted meanwhile), or the last records
      // are transaction markers, which are not delivered: all is read.
      if (message->offset >= next) break;
      continue;
    }
    if (message->err != RD_KAFKA_RESP_ERR_NO_ERROR) {
      return FromKafkaError(message->err,
                            absl::StrCat("reading ", topic, "/", partition));
    }
    if (message->offset < next) continue;  // a refetch after an error
    last_progress = absl::Now();
    LogRecord record{RecordFromMessage(*message), message->payload == nullptr};
    next = message->offset + 1;
    ++visited;
    if (absl::Status s = visit(record); !s.ok()) return s;
  }
  next = std::max(next, marks->high);
  progress.at_end = true;
  return progress;
}

}  // namespace idem::kafka
