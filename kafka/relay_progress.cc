#include "kafka/relay_progress.h"

#define XXH_INLINE_ALL
#include <xxhash.h>

#include <memory>
#include <optional>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "engine/absl_view.h"

namespace idem::kafka {

namespace {

// The last progress of `transactional_id` on `partition`; nullopt if that
// partition holds none of it.
absl::StatusOr<std::optional<uint64_t>> ReadPartition(
    PartitionReader& reader, const std::string& progress_topic,
    int32_t partition, const std::string& transactional_id,
    absl::Duration timeout) {
  std::optional<uint64_t> progress;
  absl::Status read = reader.Read(
      progress_topic, partition, 0, timeout, [&](const LogRecord& r) {
        if (r.record.key != transactional_id) return absl::OkStatus();
        uint64_t position = 0;
        if (!r.tombstone &&
            !absl::SimpleAtoi(AbslView(r.record.value), &position)) {
          return absl::DataLossError(
              absl::StrCat("the relay progress record ", progress_topic, "/",
                           partition, "@", r.record.offset, " of ",
                           transactional_id, " holds no outbox position"));
        }
        progress = position;  // a tombstone: none (0)
        return absl::OkStatus();
      });
  if (!read.ok()) return read;
  return progress;
}

}  // namespace

int32_t RelayProgressPartition(std::string_view transactional_id,
                               int32_t partitions) {
  if (partitions <= 1) return 0;
  const uint64_t hash =
      XXH64(transactional_id.data(), transactional_id.size(), /*seed=*/0);
  return static_cast<int32_t>(hash % static_cast<uint64_t>(partitions));
}

OutgoingRecord RelayProgressRecord(const std::string& progress_topic,
                                   int32_t partition,
                                   const std::string& transactional_id,
                                   uint64_t position) {
  OutgoingRecord record;
  record.topic = progress_topic;
  record.partition = partition;
  record.key = transactional_id;
  record.value = absl::StrCat(position);
  return record;
}

absl::StatusOr<RelayProgress> ReadRelayProgress(
    const std::string& brokers, const ConfigList& config,
    const std::string& progress_topic, const std::string& transactional_id,
    absl::Duration timeout, PartitionReaderHooks hooks) {
  absl::StatusOr<std::unique_ptr<PartitionReader>> reader =
      PartitionReader::Create(brokers, config, std::move(hooks));
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
  RelayProgress progress;
  progress.partition = RelayProgressPartition(transactional_id, *partitions);
  absl::StatusOr<std::optional<uint64_t>> own = ReadPartition(
      **reader, progress_topic, progress.partition, transactional_id, timeout);
  if (!own.ok()) return own.status();
  if (!own->has_value() && progress.partition != 0) {
    // Written before progress had a partition per relay.
    own = ReadPartition(**reader, progress_topic, 0, transactional_id, timeout);
    if (!own.ok()) return own.status();
  }
  progress.position = own->value_or(0);
  return progress;
}

}  // namespace idem::kafka
