// The crash harness's outbox relay, for workloads with a Downstream
// (idem/crash/harness.h): it publishes the upstream store's outbox to the
// downstream store, by message ID, and acknowledges only what the downstream
// holds durably. With each entry the downstream applies, it records the
// entry in the downstream's state (AppliedKey), which the verifier reads
// back. It also holds the outbox's broken variants: the handler of
// SelfTest::kEmitOutsideCommit, which publishes from inside the handler
// instead, and the acknowledgement before publication of
// SelfTest::kAckBeforePublish.
//
// Relay is safe for concurrent use from multiple threads (its engines and
// log are); the free functions are pure and thread-safe.

#ifndef IDEM_CRASH_RELAY_H_
#define IDEM_CRASH_RELAY_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "crash/event_log.h"
#include "idem/crash/harness.h"

namespace idem::crash {

// The downstream state key under which the relay records the entry with
// message ID `message_id`: "idem-crash/applied/<message_id>".
inline constexpr char kAppliedPrefix[] = "idem-crash/applied/";
std::string AppliedKey(std::string_view message_id);

// An entry's destination, key, value and headers, each length-prefixed (two
// different contents never encode alike): what the event log records for
// each publication and the downstream for each application.
std::string EntryContent(const OutboxEntry& entry);
// The entry EntryContent encoded (position 0, message ID `message_id`);
// nullopt if `content` is not an encoding.
std::optional<OutboxEntry> ParseEntryContent(std::string_view message_id,
                                             std::string_view content);
// `content` for people: "(destination, key, value[, name: value]...)",
// each C-escaped.
std::string DescribeContent(std::string_view content);

// The value at AppliedKey: how many times the downstream's handler ran for
// the message ID (1 unless its dedupe failed) and the content it first
// applied.
struct AppliedRecord {
  uint64_t count = 0;
  std::string content;
};
std::string EncodeAppliedRecord(const AppliedRecord& record);
std::optional<AppliedRecord> DecodeAppliedRecord(std::string_view value);

class Relay {
 public:
  // The engines and `log` must outlive the relay. `durability` is the
  // engines' (the relay waits for the downstream's commits under kBuffered).
  // `ack_before_publish`: SelfTest::kAckBeforePublish.
  Relay(Engine& upstream, Engine& downstream, const Downstream& workload,
        Durability durability, EventLogWriter& log,
        bool ack_before_publish = false);

  // One pass: reads up to a batch of durable outbox entries, publishes them
  // and acknowledges the last (or, broken, the other way round). Returns how
  // many it relayed (0: the outbox was empty); an engine's error, or kInternal
  // for an entry the downstream's handler failed.
  absl::StatusOr<size_t> RelayOnce();

  // Logs each entry (P), then applies them to the downstream in one
  // ProcessBatch, one message per entry with its message ID as Message::id,
  // and returns once that commit is durable. Errors as RelayOnce.
  absl::Status Publish(absl::Span<const OutboxEntry> entries);

  // SelfTest::kEmitOutsideCommit: runs `handle` on `message` with a Txn whose
  // emits are published (Publish) at once, under the message IDs the outbox
  // would give them, instead of joining the commit. Returns the first
  // publication's error, else `handle`'s status.
  absl::Status HandlePublishingAtOnce(
      const Message& message, Txn& txn,
      absl::FunctionRef<absl::Status(const Message&, Txn&)> handle);

 private:
  Engine& upstream_;
  Engine& downstream_;
  const Downstream& workload_;
  const Durability durability_;
  EventLogWriter& log_;
  const bool ack_before_publish_;
  // The upstream store's dedupe records are partition-scoped (read once:
  // HandlePublishingAtOnce runs inside the upstream's handlers).
  const bool upstream_partition_scope_;
};

}  // namespace idem::crash

#endif  // IDEM_CRASH_RELAY_H_
