// OutboxEntry is one outgoing message a handler emitted (Txn::Emit), as
// Engine::ReadOutbox returns it: committed in the same write as the emitting
// message's dedupe record, state writes and offset, and kept in the store
// until a relay acknowledges it (Engine::AckOutbox). A plain value type: not
// thread-safe. See docs/outbox.md.

#ifndef IDEM_OUTBOX_H_
#define IDEM_OUTBOX_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace idem {

struct OutboxEntry {
  // > 0, strictly increasing in commit order (and in emit order within a
  // commit), never reused by the store, even after acknowledgement.
  uint64_t position = 0;
  // A function of the emitting message's dedupe record and the emit's index
  // within its handler run, and of nothing else: 32 lowercase hex digits,
  // '-', the index in decimal (printable ASCII, no whitespace, at most 64
  // bytes). The digits are the XXH3-128 hash of the message's ID in a
  // store-scoped store, and of its record key (source, partition and the
  // ID's hash) in a partition-scoped one (DedupeScope::kPartition), where one
  // ID on two partitions is two messages. Processing the same input in any
  // store of the same scope emits the same IDs, so a consumer that dedupes
  // by ID applies each output once however often a relay publishes it.
  std::string message_id;
  // Where the relay sends it (a topic or queue name), 1 to kMaxSourceBytes
  // bytes, as the handler gave it.
  std::string destination;
  // The partition of `destination` the relay publishes to; -1 (Emit,
  // EmitWithHeaders): the relay's partitioner chooses one from the key.
  int32_t partition = -1;
  std::string key;
  // Empty when `tombstone` is set: then the relay publishes a null value
  // (Txn::EmitOptions::tombstone).
  std::string value;
  bool tombstone = false;
  // Headers given with Txn::EmitWithHeaders (name, value), in order; a relay
  // publishes them after its own message-ID header. Empty for Txn::Emit.
  std::vector<std::pair<std::string, std::string>> headers;
};

}  // namespace idem

#endif  // IDEM_OUTBOX_H_
