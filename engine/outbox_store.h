// The outbox's reads and acknowledgements against the store's idem.outbox
// column family (format: engine/outbox_record.h). The commit path writes
// entries through CommitBuilder (engine/commit_batch.h).
//
// Thread-safe as far as their RocksDB handles are; the caller orders the
// writes (EngineImpl's ordered critical section, order_mu_, assigns the
// outbox positions and queues the commits in that order).

#ifndef IDEM_ENGINE_OUTBOX_STORE_H_
#define IDEM_ENGINE_OUTBOX_STORE_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/outbox_record.h"
#include "idem/outbox.h"
#include "rocksdb/db.h"
#include "rocksdb/write_batch.h"

namespace idem {

// The stored cursor; {0, 0} if none was written yet (or `outbox` is null).
// kDataLoss if it does not decode; the converted RocksDB error if the read
// fails.
absl::StatusOr<OutboxCursor> LoadOutboxCursor(
    rocksdb::DB* db, rocksdb::ColumnFamilyHandle* outbox);

// Up to `max_entries` entries with position > `after`, oldest first, read
// through `read` (a snapshot). kDataLoss naming the position if an entry
// does not decode (or a key is not a position).
absl::StatusOr<std::vector<OutboxEntry>> ReadOutboxEntries(
    rocksdb::DB* db, rocksdb::ColumnFamilyHandle* outbox,
    const rocksdb::ReadOptions& read, uint64_t after, size_t max_entries);

// Adds to `batch` the removal of the entries cursor.acked + 1 .. `position`
// (one range deletion) and the cursor with acked = `position`.
// REQUIRES: cursor.acked < position <= cursor.issued.
absl::Status BuildOutboxAck(rocksdb::ColumnFamilyHandle* outbox,
                            const OutboxCursor& cursor, uint64_t position,
                            rocksdb::WriteBatch& batch);

}  // namespace idem

#endif  // IDEM_ENGINE_OUTBOX_STORE_H_
