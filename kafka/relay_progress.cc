#include "kafka/relay_progress.h"

#include <memory>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "engine/absl_view.h"
#include "kafka/partition_reader.h"

namespace idem::kafka {

OutgoingRecord RelayProgressRecord(const std::string& progress_topic,
                                   const std::string& transactional_id,
                                   uint64_t position) {
  OutgoingRecord record;
  record.topic = progress_topic;
  record.partition = 0;
  record.key = transactional_id;
  record.value = absl::StrCat(position);
  return record;
}

absl::StatusOr<uint64_t> ReadRelayProgress(const std::string& brokers,
                                           const ConfigList& config,
                                           const std::string& progress_topic,
                                           const std::string& transactional_id,
                                           absl::Duration timeout) {
  absl::StatusOr<std::unique_ptr<PartitionReader>> reader =
      PartitionReader::Create(brokers, config);
  if (!reader.ok()) return reader.status();
  absl::StatusOr<int32_t> partitions =
      (*reader)->PartitionCount(progress_topic, timeout);
  if (!partitions.ok()) {
    return absl::Status(
        partitions.status().code(),
        absl::StrCat("the relay's progress topic ", progress_topic,
                     " (OutboxRelayOptions::progress_topic; create it, "
                     "compacted): ",
                     partitions.status().message()));
  }
  uint64_t progress = 0;
  absl::Status read =
      (*reader)->Read(progress_topic, 0, 0, timeout, [&](const LogRecord& r) {
        if (r.record.key != transactional_id) return absl::OkStatus();
        if (r.tombstone) {
          progress = 0;
          return absl::OkStatus();
        }
        if (!absl::SimpleAtoi(AbslView(r.record.value), &progress)) {
          return absl::DataLossError(
              absl::StrCat("the relay progress record ", progress_topic, "/0@",
                           r.record.offset, " of ", transactional_id,
                           " holds no outbox position"));
        }
        return absl::OkStatus();
      });
  if (!read.ok()) return read;
  return progress;
}

}  // namespace idem::kafka
