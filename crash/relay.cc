#include "crash/relay.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "engine/absl_view.h"
#include "engine/outbox_record.h"
#include "engine/record.h"
#include "idem/forwarding_txn.h"

namespace idem::crash {
namespace {

// Entries a relay pass reads and publishes at most.
constexpr size_t kRelayBatch = 64;

void AppendField(std::string_view field, std::string* out) {
  absl::StrAppend(out, field.size(), ":", AbslView(field));
}

// Reads one AppendField from the front of `in`.
std::optional<std::string> TakeField(std::string_view* in) {
  const size_t colon = in->find(':');
  size_t size = 0;
  if (colon == std::string_view::npos ||
      !absl::SimpleAtoi(AbslView(in->substr(0, colon)), &size) ||
      in->size() - colon - 1 < size) {
    return std::nullopt;
  }
  std::string field(in->substr(colon + 1, size));
  in->remove_prefix(colon + 1 + size);
  return field;
}

// The Txn of SelfTest::kEmitOutsideCommit: everything goes to the handler's
// Txn but the emits, which are published at once.
class PublishAtOnceTxn final : public ForwardingTxn {
 public:
  // `partition_scope`: the upstream store's dedupe records are
  // partition-scoped, so the message's record key, which names its emits,
  // holds its source and partition.
  PublishAtOnceTxn(const Message& message, bool partition_scope, Txn& txn,
                   Relay& relay)
      : ForwardingTxn(txn),
        key_(RecordKeyFor(partition_scope, message, HashMessageId(message.id))),
        relay_(relay) {}

  void EmitWithOptions(std::string_view destination, std::string_view key,
                       std::string_view value,
                       const EmitOptions& options) override {
    OutboxEntry entry;
    entry.message_id = OutboxMessageId(key_, next_index_++);
    entry.destination = std::string(destination);
    entry.partition = options.partition;
    entry.key = std::string(key);
    entry.value = std::string(value);
    entry.tombstone = options.tombstone;
    for (const auto& [name, header_value] : options.headers) {
      entry.headers.emplace_back(std::string(name), std::string(header_value));
    }
    if (status_.ok()) status_ = relay_.Publish({entry});
  }

  const absl::Status& status() const { return status_; }

 private:
  const RecordKey key_;
  Relay& relay_;
  uint32_t next_index_ = 0;
  absl::Status status_;
};

}  // namespace

std::string AppliedKey(std::string_view message_id) {
  return absl::StrCat(kAppliedPrefix, AbslView(message_id));
}

std::string EntryContent(const OutboxEntry& entry) {
  std::string out;
  AppendField(entry.destination, &out);
  AppendField(entry.key, &out);
  AppendField(entry.value, &out);
  for (const auto& [name, value] : entry.headers) {
    AppendField(name, &out);
    AppendField(value, &out);
  }
  return out;
}

std::optional<OutboxEntry> ParseEntryContent(std::string_view message_id,
                                             std::string_view content) {
  std::vector<std::string> fields;
  while (!content.empty()) {
    std::optional<std::string> field = TakeField(&content);
    if (!field.has_value()) return std::nullopt;
    fields.push_back(*std::move(field));
  }
  if (fields.size() < 3 || fields.size() % 2 == 0) return std::nullopt;
  OutboxEntry entry;
  entry.message_id = std::string(message_id);
  entry.destination = std::move(fields[0]);
  entry.key = std::move(fields[1]);
  entry.value = std::move(fields[2]);
  for (size_t i = 3; i < fields.size(); i += 2) {
    entry.headers.emplace_back(std::move(fields[i]), std::move(fields[i + 1]));
  }
  return entry;
}

std::string DescribeContent(std::string_view content) {
  std::optional<OutboxEntry> entry = ParseEntryContent("", content);
  if (!entry.has_value()) return absl::CEscape(AbslView(content));
  std::string out = absl::StrCat("(", absl::CEscape(entry->destination), ", ",
                                 absl::CEscape(entry->key), ", ",
                                 absl::CEscape(entry->value));
  for (const auto& [name, value] : entry->headers) {
    absl::StrAppend(&out, ", ", absl::CEscape(name), ": ",
                    absl::CEscape(value));
  }
  return absl::StrCat(out, ")");
}

std::string EncodeAppliedRecord(const AppliedRecord& record) {
  return absl::StrCat(record.count, " ", record.content);
}

std::optional<AppliedRecord> DecodeAppliedRecord(std::string_view value) {
  const size_t space = value.find(' ');
  AppliedRecord record;
  if (space == std::string_view::npos ||
      !absl::SimpleAtoi(AbslView(value.substr(0, space)), &record.count)) {
    return std::nullopt;
  }
  record.content = std::string(value.substr(space + 1));
  return record;
}

Relay::Relay(Engine& upstream, Engine& downstream, const Downstream& workload,
             Durability durability, EventLogWriter& log,
             bool ack_before_publish)
    : upstream_(upstream),
      downstream_(downstream),
      workload_(workload),
      durability_(durability),
      log_(log),
      ack_before_publish_(ack_before_publish),
      upstream_partition_scope_(upstream.options().dedupe_scope ==
                                DedupeScope::kPartition) {}

absl::StatusOr<size_t> Relay::RelayOnce() {
  absl::StatusOr<std::vector<OutboxEntry>> entries =
      upstream_.ReadOutbox(kRelayBatch);
  if (!entries.ok()) return entries.status();
  if (entries->empty()) return 0;
  const uint64_t last = entries->back().position;
  // Broken: a crash before the publication is durable loses the entries.
  if (ack_before_publish_) {
    if (absl::Status s = upstream_.AckOutbox(last); !s.ok()) return s;
  }
  if (absl::Status s = Publish(*entries); !s.ok()) return s;
  // Only now that the downstream holds them durably.
  if (!ack_before_publish_) {
    if (absl::Status s = upstream_.AckOutbox(last); !s.ok()) return s;
  }
  return entries->size();
}

absl::Status Relay::Publish(absl::Span<const OutboxEntry> entries) {
  std::vector<std::string> contents;
  std::vector<Message> messages;
  absl::flat_hash_map<std::string_view, size_t> by_id;
  for (size_t i = 0; i < entries.size(); ++i) {
    contents.push_back(EntryContent(entries[i]));
    log_.Publish(entries[i].message_id, contents.back());
    messages.push_back(
        Message{.id = entries[i].message_id, .payload = entries[i].value});
    by_id.emplace(entries[i].message_id, i);
  }
  absl::StatusOr<std::vector<Result>> results = downstream_.ProcessBatch(
      messages, [&](const Message& m, Txn& txn) -> absl::Status {
        const size_t i = by_id.at(m.id);
        const std::string key = AppliedKey(m.id);
        absl::StatusOr<std::optional<std::string>> stored = txn.Get(key);
        if (!stored.ok()) return stored.status();
        AppliedRecord record{.count = 0, .content = contents[i]};
        if (stored->has_value()) {
          std::optional<AppliedRecord> earlier = DecodeAppliedRecord(**stored);
          if (!earlier.has_value()) {
            return absl::DataLossError(absl::StrCat("bad record at ", key));
          }
          record = *std::move(earlier);
        }
        ++record.count;
        txn.Put(key, EncodeAppliedRecord(record));
        return workload_.Apply(entries[i], txn);
      });
  if (!results.ok()) return results.status();
  uint64_t sequence = 0;
  for (size_t i = 0; i < results->size(); ++i) {
    const Result& r = (*results)[i];
    if (r.outcome == Outcome::kFailed) {
      return absl::InternalError(absl::StrCat("the downstream failed entry ",
                                              entries[i].message_id, ": ",
                                              r.error.ToString()));
    }
    sequence = std::max(sequence, r.sequence);
  }
  if (durability_ == Durability::kBuffered && sequence > 0) {
    return downstream_.WaitDurable(sequence);
  }
  return absl::OkStatus();
}

absl::Status Relay::HandlePublishingAtOnce(
    const Message& message, Txn& txn,
    absl::FunctionRef<absl::Status(const Message&, Txn&)> handle) {
  PublishAtOnceTxn publishing(message, upstream_partition_scope_, txn, *this);
  absl::Status s = handle(message, publishing);
  if (!publishing.status().ok()) return publishing.status();
  return s;
}

}  // namespace idem::crash
