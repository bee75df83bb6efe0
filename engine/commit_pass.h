// The plain values one commit's pass carries between its steps
// (EngineImpl::CommitBatch, engine/engine_commit.cc): what the handlers
// read and wrote, and what the commit learned of its messages before they
// ran. Views into the commit's arguments; not thread-safe.

#ifndef IDEM_ENGINE_COMMIT_PASS_H_
#define IDEM_ENGINE_COMMIT_PASS_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/types/span.h"
#include "engine/commit_batch.h"
#include "engine/record.h"
#include "engine/state_versions.h"
#include "engine/store.h"
#include "engine/timer_writes.h"
#include "idem/engine.h"

namespace idem {

// What HandleMessages found besides the outcomes, for the counters once
// the commit is written: the ages of the records at their duplicates
// (those that know their first processing) and how many came late; and
// how many handlers ran (for Stats::handler_reruns when they run again).
struct DuplicateAges {
  std::vector<int64_t> ages_micros;
  uint64_t late = 0;
  uint64_t handlers = 0;
};

// One batch's pass through its handlers: what HandleMessages reads, and
// where it puts what it decides. `stored` holds the live stored record per
// message (looked up before any handler ran), `record_keys` the keys of
// their records, `fingerprints` each message's fingerprint when conflicts
// are detected (else empty); `reads` gets the handlers' store reads.
struct HandlePass {
  Store& store;
  // The timer writes and timer index reads of the batch's handlers.
  TimerWrites& timers;
  StateReads& timer_reads;
  absl::Span<const Message> messages;
  absl::Span<const RecordPlacement> placements;
  absl::Span<const RecordKey> record_keys;
  absl::Span<const std::optional<LiveRecord>> stored;
  absl::Span<const uint64_t> fingerprints;
  Handler handler;
  int64_t now_micros;
  CommitBuilder& commit;
  DuplicateAges& ages;
  StateReads& reads;
};

// A commit's messages and what it learns of them before its handlers run:
// their records' keys (each message's ID claimed under it), each one's
// live stored record, the stored offsets of their partitions, and each
// one's fingerprint when conflicts are detected (else empty). Views into
// CommitBatch's arguments.
struct CommitInput {
  absl::Span<const Message> messages;
  absl::Span<const RecordPlacement> placements;
  Handler handler;
  int64_t now_micros = 0;
  absl::InlinedVector<RecordKey, 1> record_keys = {};
  LiveLookup stored = {};
  StoredOffsets stored_offsets = {};
  std::vector<uint64_t> fingerprints = {};
};
// One run of a commit's handlers: what they wrote (the commit, its timer
// writes), what they read, and what HandleMessages found besides.
struct HandlerRun {
  HandlerRun(const Store& store, size_t messages);
  CommitBuilder commit;
  DuplicateAges ages;
  StateReads reads;
  TimerWrites timers;
  StateReads timer_reads;
  // Once the commit landed: the sequence of its write's last record
  // (CommitQueue::Writer::last_sequence); 0 if it wrote nothing of its own.
  uint64_t sequence = 0;
};

}  // namespace idem

#endif  // IDEM_ENGINE_COMMIT_PASS_H_
