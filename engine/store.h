// Store owns the RocksDB database behind an engine: its column families, the
// TTL filter factory, the statistics object and the block cache. OpenStore
// checks that a directory is an idem store of a format this build reads
// before opening anything for write, so a foreign or newer directory is left
// untouched.
//
// Column families:
//   default             unused
//   idem.dedupe         dedupe key -> record (see engine/record.h), TTL filter
//   idem.dedupe.until.<E>  (format 2) an expiry bucket: dedupe records that
//                       all expire before E (microseconds since the epoch),
//                       dropped whole once E has passed
//                       (engine/expiry_buckets.h)
//   idem.state          the handlers' state keys and values, as given
//   idem.offsets        offset key -> offset (see engine/record.h)
//   idem.outbox         position -> outgoing message, and the outbox cursor
//                       (see engine/outbox_record.h); created by any
//                       writable open of a store that lacks it
//   idem.timers         timers, their by-key index and the partitions'
//                       stream times (see engine/timer_record.h); created
//                       by any writable open of a store that lacks it
//   idem.scope.partition  (format 3) empty; present in a store created with
//                       DedupeScope::kPartition (record keys carry their
//                       partition, engine/record.h)
//   idem.format.<N>     empty; its name records the store's format version N
//                       (the highest present counts)
//
// A Store is not copyable; its members are constant after OpenStore except
// the expiry buckets (and the handles and format version that go with
// them), which change only while the engine holds its store lock
// exclusively. RocksDB's DB is safe for concurrent use. Destroying it closes
// the database.
// StoreParts outlive any one Store: an engine reopens its store after an I/O
// error with the same parts, so counters and caches carry over.

#ifndef IDEM_ENGINE_STORE_H_
#define IDEM_ENGINE_STORE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/store_claim.h"
#include "engine/ttl_filter.h"
#include "engine/wal_watch.h"
#include "idem/options.h"
#include "rocksdb/cache.h"
#include "rocksdb/compaction_filter.h"
#include "rocksdb/db.h"
#include "rocksdb/statistics.h"

namespace idem {

// The newest format this build reads and writes. Format 2 adds expiry
// buckets, format 3 partition-scoped dedupe keys, format 4 merge operands
// in idem.state (Txn::Merge; engine/merge_operator.h), which a build
// without the state's merge operator cannot read, format 5 timers and
// stream times in idem.timers, which an older build would open but
// ignore (no timer would fire, stream times would stop). A store without any of
// them is written as format 1, which older builds read; a store is marked
// with a newer format when it first needs it. Format 5 adds the timers
// family and stream times (engine/timer_writes.h); format 6 state values
// and merge operands that carry an expiry (engine/state_value.h), which a
// build without it would read as part of the value.
inline constexpr int kFormatVersion = 6;
inline constexpr int kMergeFormatVersion = 4;
inline constexpr int kTimerFormatVersion = 5;
inline constexpr int kStateTtlFormatVersion = 6;
// In the default family of a store of format 6: present once the raw
// values that would read as envelopes were wrapped (MarkStateTtlFormat).
inline constexpr char kStateTtlReadyKey[] = "idem.state_ttl.ready";
inline constexpr char kDedupeColumnFamily[] = "idem.dedupe";
inline constexpr char kBucketFamilyPrefix[] = "idem.dedupe.until.";
inline constexpr char kStateColumnFamily[] = "idem.state";
inline constexpr char kOffsetsColumnFamily[] = "idem.offsets";
inline constexpr char kOutboxColumnFamily[] = "idem.outbox";
inline constexpr char kTimersColumnFamily[] = "idem.timers";
inline constexpr char kPartitionScopeColumnFamily[] = "idem.scope.partition";
inline constexpr char kFormatColumnFamilyPrefix[] = "idem.format.";

struct Store {
  Store() = default;
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;
  ~Store();

  rocksdb::DB* db = nullptr;
  rocksdb::Env* env = nullptr;
  // All open handles (owned); the named ones point into this vector.
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::ColumnFamilyHandle* dedupe = nullptr;
  rocksdb::ColumnFamilyHandle* state = nullptr;
  rocksdb::ColumnFamilyHandle* offsets = nullptr;
  // Null only in a read-only open of a store written before the outbox.
  rocksdb::ColumnFamilyHandle* outbox = nullptr;
  // Null only in a read-only open of a store written before timers.
  rocksdb::ColumnFamilyHandle* timers = nullptr;
  // Expiry buckets by end (microseconds): every record in the family expires
  // before its end.
  std::map<int64_t, rocksdb::ColumnFamilyHandle*> buckets;
  // The highest idem.format.<N> present.
  int format_version = 1;
  // Dedupe records are keyed by partition (idem.scope.partition exists).
  bool partition_scope = false;
  // Opened with DB::OpenForReadOnly: every write fails.
  bool read_only = false;
  // A writable store's claim on its directory (engine/store_claim.h),
  // released after the database closes (members go after ~Store's body).
  StoreClaim claim;
};

// Long-lived objects shared by every Store an engine opens.
struct StoreParts {
  std::shared_ptr<rocksdb::Statistics> statistics;
  std::shared_ptr<rocksdb::Cache> block_cache;
  // The filter of the dedupe column family: normally a TtlFilterFactory;
  // tests may substitute a deliberately broken one.
  std::shared_ptr<rocksdb::CompactionFilterFactory> dedupe_filter;
  // The file system of Options::env (or RocksDB's default), watched for
  // failed WAL syncs (engine/wal_watch.h), and the environment that does
  // the store's file I/O through it: RocksDB's default environment
  // otherwise (its thread pools and clock).
  std::shared_ptr<WalWatch> wal_watch;
  std::shared_ptr<rocksdb::Env> env;
  // The state family's merge operator and TTL filter judge by it; OpenStore
  // and MarkStateTtlFormat set its format.
  std::shared_ptr<StateTtlContext> state_ttl;
  std::shared_ptr<StateTtlFilterFactory> state_filter;
};

// Memtable size for the small column families (offsets, default, format).
inline constexpr size_t kSmallWriteBufferBytes = size_t{4} << 20;

// The RocksDB options of an engine's store, for OpenStore and for tools
// that measure alternatives to them. `statistics`, `cache` and `filter` are
// shared, not copied.
rocksdb::DBOptions MakeDbOptions(const Options& options, rocksdb::Env* env,
                                 std::shared_ptr<rocksdb::Statistics> stats);
// `partition_scope`: the store's record keys start with their partition
// (DedupeScope::kPartition), so they are not uniformly random and keep the
// sorted skiplist memtable; store-scoped keys (hashes) get the hashed one
// (HashedMemtableBuckets, HashedMemtableBudget).
rocksdb::ColumnFamilyOptions MakeDedupeOptions(
    const Options& options, const std::shared_ptr<rocksdb::Cache>& cache,
    std::shared_ptr<rocksdb::CompactionFilterFactory> filter,
    bool partition_scope);
// An expiry bucket: the dedupe options without periodic compaction (the
// family is dropped whole within about one window).
rocksdb::ColumnFamilyOptions MakeBucketOptions(
    const Options& options, const std::shared_ptr<rocksdb::Cache>& cache,
    std::shared_ptr<rocksdb::CompactionFilterFactory> filter,
    bool partition_scope);

// The bucket count of a hashed dedupe memtable of `write_buffer_bytes`:
// one per 512 bytes, so a full memtable has about 10 records per bucket.
// Each bucket costs an 8-byte slot and, once it holds two records, a
// 16-byte header, out of the memtable's own budget: under 5% of it.
size_t HashedMemtableBuckets(size_t write_buffer_bytes);
// The memtable budget of a hashed dedupe family for `write_buffer_bytes`:
// 1.3 times it. A record takes about 64 bytes in a bucket's list (RocksDB's
// arena rounds each node up to 16 bytes) against about 52 in a sorted
// skiplist; with the larger budget the hashed memtable holds at least as
// many records per flush, so flushes, and the write amplification, stay
// those of the sorted one (docs/performance.md, "Per-call costs and the hashed
// memtable").
size_t HashedMemtableBudget(size_t write_buffer_bytes);
// State, offsets and the small column families.
rocksdb::ColumnFamilyOptions MakeStateOptions(
    const Options& options, const std::shared_ptr<rocksdb::Cache>& cache,
    size_t write_buffer_bytes);

// The name of the format marker family of version `version`.
std::string FormatColumnFamilyName(int version);

// Marks `store` as format `version` (creates its marker family) unless it
// is of that format or newer already. REQUIRES: the store is writable and
// nothing else uses it (the engine holds its store lock exclusively).
absl::Status MarkStoreFormat(Store& store, const Options& options,
                             const StoreParts& parts, int version);

// Marks `store` as format 5 (kStateTtlFormatVersion) unless it is already:
// finds the raw values that would read as envelopes (engine/state_value.h),
// creates the marker family, then writes those values wrapped together
// with kStateTtlReadyKey in one synced write, and switches
// parts.state_ttl to envelopes. A crash between the marker and that write
// leaves a store of format 5 without the key, which OpenStore finishes
// (FinishStateTtlFormat). REQUIRES: as MarkStoreFormat.
absl::Status MarkStateTtlFormat(Store& store, const Options& options,
                                const StoreParts& parts);

// For a store just opened: sets parts.state_ttl's format from the store's;
// a writable store of format 5 without kStateTtlReadyKey gets its wrapping
// write now. kFailedPrecondition for a read-only open of such a store.
absl::Status FinishStateTtlFormat(Store& store, const StoreParts& parts,
                                  std::string_view path);

// The name of the expiry bucket ending at `end_micros`, and back (nullopt for
// a name that is not a bucket's).
std::string BucketFamilyName(int64_t end_micros);
std::optional<int64_t> ParseBucketFamilyName(std::string_view name);

// The format version of a store whose column families are `names` (as
// DB::ListColumnFamilies reports them): the highest idem.format.<N>.
// kFailedPrecondition for no marker, an unreadable marker or a format newer
// than kFormatVersion; kDataLoss if a required column family is missing.
// `path` only names the store in errors.
absl::StatusOr<int> FormatVersionFromFamilies(
    const std::vector<std::string>& names, std::string_view path);

// Creates the parts for `options` with a TtlFilterFactory on `clock`.
StoreParts MakeStoreParts(const Options& options,
                          std::shared_ptr<TtlFilterFactory> ttl_filter);

// Opens or creates the store at `path`. Error codes as for Engine::Open.
// With `read_only`, opens an existing store for reads only (writes nothing,
// not even a WAL replay's flush); its Store::read_only is set.
// REQUIRES: options passed ValidateOptions.
absl::StatusOr<std::unique_ptr<Store>> OpenStore(const std::string& path,
                                                 const Options& options,
                                                 const StoreParts& parts,
                                                 bool read_only = false);

}  // namespace idem

#endif  // IDEM_ENGINE_STORE_H_
