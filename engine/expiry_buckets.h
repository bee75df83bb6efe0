// Expiry buckets (Options::expiry_buckets): dedupe records grouped by expiry
// time into column families that are dropped whole once every record in
// them has expired, instead of being rewritten by compactions until the TTL
// filter drops them.
//
// A bucket is named by its end E (idem.dedupe.until.<E>, microseconds since
// the epoch) and holds only records whose expiry is before E, so it may be
// dropped as soon as engine time (engine/engine_clock.h, which never goes
// back, so no later read can find those records live) reaches E, whatever
// window or bucket count created it. Every `now_micros` below is engine
// time. Buckets are E = k * width for whole k, width = dedupe_window /
// expiry_buckets; a record with expiry X goes to the bucket with the
// smallest such E > X, unless that bucket would end later than now + window
// + width (a per-message ttl longer than the window), in which case it stays
// in the filtered family idem.dedupe. So at most expiry_buckets + 2 buckets
// are live at a time.
//
// These functions change a Store's buckets; the caller holds the engine's
// store lock exclusively (readers use the handles under the shared lock).

#ifndef IDEM_ENGINE_EXPIRY_BUCKETS_H_
#define IDEM_ENGINE_EXPIRY_BUCKETS_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/store.h"
#include "idem/options.h"

namespace idem {

// dedupe_window / expiry_buckets in microseconds (at least 1).
// REQUIRES: options.expiry_buckets > 0.
int64_t BucketWidthMicros(const Options& options);

// The end of the bucket for a record expiring at `expiry_micros` committed
// at `now_micros`, or nullopt if it belongs in idem.dedupe (no buckets
// configured, or a ttl beyond the newest bucket).
std::optional<int64_t> BucketEndFor(const Options& options,
                                    int64_t expiry_micros, int64_t now_micros);

// Creates the bucket ending at `end_micros` if it does not exist. Marks the
// store as format 2 first (idem.format.2), so no build that ignores buckets
// can open it once one exists.
absl::Status CreateBucket(Store& store, const Options& options,
                          const StoreParts& parts, int64_t end_micros);

// What DropExpiredBuckets removed.
struct DroppedBuckets {
  uint64_t families = 0;
  uint64_t records = 0;  // RocksDB's estimate, read before each drop
};

// Drops every bucket whose end is at or before `now_micros` (all its records
// have expired).
absl::StatusOr<DroppedBuckets> DropExpiredBuckets(Store& store,
                                                  int64_t now_micros);

// Whether DropExpiredBuckets would drop anything.
bool HasExpiredBuckets(const Store& store, int64_t now_micros);

// A short list of dedupe families (inline up to a few: no allocation on the
// commit path when expiry buckets are off).
using DedupeFamilies = absl::InlinedVector<rocksdb::ColumnFamilyHandle*, 4>;

// The dedupe families that may hold a live record at `now_micros`:
// idem.dedupe, then the buckets not yet ended, oldest first.
DedupeFamilies LiveDedupeFamilies(const Store& store, int64_t now_micros);

// Every dedupe family: idem.dedupe, then every bucket, oldest first.
std::vector<rocksdb::ColumnFamilyHandle*> AllDedupeFamilies(const Store& store);

}  // namespace idem

#endif  // IDEM_ENGINE_EXPIRY_BUCKETS_H_
