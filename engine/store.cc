#include "engine/store.h"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string_view>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "engine/absl_view.h"
#include "engine/info_log.h"
#include "engine/merge_operator.h"
#include "engine/reported_statistics.h"
#include "engine/status_util.h"
#include "engine/store_directory.h"
#include "rocksdb/cache.h"
#include "rocksdb/env.h"
#include "rocksdb/filter_policy.h"
#include "rocksdb/memtablerep.h"
#include "rocksdb/slice_transform.h"
#include "rocksdb/table.h"

namespace idem {
namespace {

// The hashed dedupe memtable's bucket key: the first 8 bytes of a record key
// (a hash, so uniformly spread). No key is in this transform's domain, so
// none of RocksDB's prefix features applies (prefix entries in the SST and
// memtable Bloom filters, prefix seeks): the filters hold whole keys only,
// as with the sorted memtable. Only the hash memtable, which calls Transform
// directly, uses it.
class MemtableBucketPrefix : public rocksdb::SliceTransform {
 public:
  const char* Name() const override { return "idem.MemtableBucketPrefix"; }
  rocksdb::Slice Transform(const rocksdb::Slice& key) const override {
    return rocksdb::Slice(key.data(), std::min<size_t>(key.size(), 8));
  }
  bool InDomain(const rocksdb::Slice& /*key*/) const override { return false; }
};

// Reads the format version of an existing database from its column family
// names (reads the MANIFEST only; writes nothing).
absl::Status CheckExistingFormat(const rocksdb::DBOptions& db_options,
                                 const std::string& dir,
                                 const std::string& shown,
                                 std::vector<std::string>* names,
                                 int* format_version) {
  rocksdb::Status s = rocksdb::DB::ListColumnFamilies(db_options, dir, names);
  if (!s.ok()) return FromRocksStatus(s, "reading store metadata at " + shown);
  absl::StatusOr<int> version = FormatVersionFromFamilies(*names, shown);
  if (!version.ok()) return version.status();
  *format_version = *version;
  return absl::OkStatus();
}

// Opens the database at `path` with the column families `names`.
absl::StatusOr<std::unique_ptr<Store>> OpenDatabase(
    const std::string& path, const Options& options, const StoreParts& parts,
    rocksdb::Env* env, rocksdb::DBOptions db_options,
    const std::vector<std::string>& names, bool read_only) {
  auto store = std::make_unique<Store>();
  store->env = env;
  store->read_only = read_only;
  const bool partition_scope =
      std::find(names.begin(), names.end(), kPartitionScopeColumnFamily) !=
      names.end();
  std::vector<rocksdb::ColumnFamilyDescriptor> descriptors;
  for (const std::string& name : names) {
    rocksdb::ColumnFamilyOptions cf;
    if (name == kDedupeColumnFamily) {
      cf = MakeDedupeOptions(options, parts.block_cache, parts.dedupe_filter,
                             partition_scope);
    } else if (ParseBucketFamilyName(name).has_value()) {
      cf = MakeBucketOptions(options, parts.block_cache, parts.dedupe_filter,
                             partition_scope);
    } else if (name == kStateColumnFamily) {
      cf = MakeStateOptions(options, parts.block_cache,
                            options.write_buffer_bytes);
      cf.merge_operator = NewStateMergeOperator(parts.state_ttl);
      cf.compaction_filter_factory = parts.state_filter;
      if (options.state_ttl != absl::InfiniteDuration()) {
        // Cold files meet the filter too, as the dedupe family's do.
        cf.periodic_compaction_seconds = static_cast<uint64_t>(
            std::max<int64_t>(1, absl::ToInt64Seconds(options.state_ttl)));
      }
    } else {
      cf = MakeStateOptions(options, parts.block_cache, kSmallWriteBufferBytes);
    }
    descriptors.emplace_back(name, cf);
  }
  rocksdb::Status s =
      read_only ? rocksdb::DB::OpenForReadOnly(db_options, path, descriptors,
                                               &store->handles, &store->db)
                : rocksdb::DB::Open(db_options, path, descriptors,
                                    &store->handles, &store->db);
  if (!s.ok()) return FromRocksStatus(s, "opening idem store at " + path);
  for (size_t i = 0; i < names.size(); ++i) {
    if (names[i] == kDedupeColumnFamily) store->dedupe = store->handles[i];
    if (names[i] == kStateColumnFamily) store->state = store->handles[i];
    if (names[i] == kOffsetsColumnFamily) store->offsets = store->handles[i];
    if (names[i] == kOutboxColumnFamily) store->outbox = store->handles[i];
    if (names[i] == kTimersColumnFamily) store->timers = store->handles[i];
    if (std::optional<int64_t> end = ParseBucketFamilyName(names[i])) {
      store->buckets[*end] = store->handles[i];
    }
  }
  return store;
}

// Builds a complete, empty store in the new directory `staging` (see
// CreateStoreInDirectory) and closes it.
absl::Status BuildEmptyStore(const std::string& staging, const Options& options,
                             const StoreParts& parts, rocksdb::Env* env,
                             rocksdb::DBOptions db_options) {
  db_options.create_if_missing = true;
  db_options.create_missing_column_families = true;
  // The format marker comes last: RocksDB creates missing column families
  // in order, so its presence means all others exist.
  const bool partition_scope = options.dedupe_scope == DedupeScope::kPartition;
  std::vector<std::string> names = {rocksdb::kDefaultColumnFamilyName,
                                    kDedupeColumnFamily,
                                    kStateColumnFamily,
                                    kOffsetsColumnFamily,
                                    kOutboxColumnFamily,
                                    kTimersColumnFamily};
  if (partition_scope) names.push_back(kPartitionScopeColumnFamily);
  names.push_back(FormatColumnFamilyName(
      partition_scope ? 3 : (options.expiry_buckets > 0 ? 2 : 1)));
  absl::StatusOr<std::unique_ptr<Store>> created =
      OpenDatabase(staging, options, parts, env, db_options, names,
                   /*read_only=*/false);
  return created.status();  // closed here
}

// kDataLoss if a write-ahead log of the store at `dir` is damaged anywhere but
// in an incomplete last record. Recovery itself (kPointInTimeRecovery) stops
// silently at the first bad record, which is right for the torn, unsynced
// tail a power loss leaves but would drop every later record, synced or
// not, after damage further in. So the logs are first replayed read-only in
// kTolerateCorruptedTailRecords mode, which reports any bad record except a
// truncated one at the end.
absl::Status CheckWriteAheadLogs(const std::string& dir,
                                 const std::string& shown,
                                 const Options& options,
                                 const StoreParts& parts, rocksdb::Env* env,
                                 rocksdb::DBOptions db_options,
                                 const std::vector<std::string>& names) {
  db_options.wal_recovery_mode =
      rocksdb::WALRecoveryMode::kTolerateCorruptedTailRecords;
  absl::StatusOr<std::unique_ptr<Store>> replayed =
      OpenDatabase(dir, options, parts, env, db_options, names,
                   /*read_only=*/true);
  if (absl::IsDataLoss(replayed.status())) {
    return absl::DataLossError(absl::StrCat(
        shown,
        " has a damaged write-ahead log: valid records follow the "
        "damage, so recovering would silently drop committed writes; "
        "refusing to open it (",
        replayed.status().message(), ")"));
  }
  return replayed.status();
}

// No store at `path` yet (`kind`: missing, empty, or an unfinished
// creation): creates it, unless `read_only` or !create_if_missing
// (kNotFound), and returns what its directory holds then.
absl::StatusOr<DirectoryState> CreateMissingStore(
    const std::string& path, const Options& options, const StoreParts& parts,
    rocksdb::Env* env, const rocksdb::DBOptions& db_options, DirectoryKind kind,
    bool read_only) {
  const char* what = kind == DirectoryKind::kInterruptedCreation
                         ? " (only an unfinished creation, which a "
                           "writable Open with create_if_missing finishes)"
                         : "";
  if (read_only) {
    return absl::NotFoundError(absl::StrCat("no idem store at ", path, what,
                                            "; a read-only open creates none"));
  }
  if (!options.create_if_missing) {
    return absl::NotFoundError(absl::StrCat("no idem store at ", path, what,
                                            " and create_if_missing is false"));
  }
  if (absl::Status s = EnsureStoreDirectory(env, path); !s.ok()) return s;
  const std::string dir = CanonicalStorePath(path);
  if (absl::Status s = CreateStoreInDirectory(
          env, dir, path,
          [&](const std::string& staging) {
            return BuildEmptyStore(staging, options, parts, env, db_options);
          });
      !s.ok()) {
    return s;
  }
  return InspectStoreDirectory(env, dir, path);
}

}  // namespace

std::string FormatColumnFamilyName(int version) {
  return absl::StrCat(kFormatColumnFamilyPrefix, version);
}

absl::Status MarkStoreFormat(Store& store, const Options& options,
                             const StoreParts& parts, int version) {
  if (store.format_version >= version) return absl::OkStatus();
  rocksdb::ColumnFamilyHandle* marker = nullptr;
  rocksdb::Status s = store.db->CreateColumnFamily(
      MakeStateOptions(options, parts.block_cache, kSmallWriteBufferBytes),
      FormatColumnFamilyName(version), &marker);
  if (!s.ok()) {
    return FromRocksStatus(
        s, absl::StrCat("marking the store as format ", version));
  }
  store.handles.push_back(marker);
  store.format_version = version;
  return absl::OkStatus();
}

std::string BucketFamilyName(int64_t end_micros) {
  return absl::StrCat(kBucketFamilyPrefix, end_micros);
}

std::optional<int64_t> ParseBucketFamilyName(std::string_view name) {
  if (!absl::StartsWith(AbslView(name), kBucketFamilyPrefix)) {
    return std::nullopt;
  }
  int64_t end = 0;
  // Only the spelling BucketFamilyName writes: two names for one end would
  // leave one family unread.
  if (!absl::SimpleAtoi(
          AbslView(name.substr(std::string_view(kBucketFamilyPrefix).size())),
          &end) ||
      BucketFamilyName(end) != name) {
    return std::nullopt;
  }
  return end;
}

absl::StatusOr<int> FormatVersionFromFamilies(
    const std::vector<std::string>& names, std::string_view path) {
  int version = 0;
  for (const std::string& name : names) {
    if (!absl::StartsWith(name, kFormatColumnFamilyPrefix)) continue;
    int v = 0;
    const std::string digits =
        name.substr(std::string_view(kFormatColumnFamilyPrefix).size());
    if (!absl::SimpleAtoi(digits, &v) || v < 1 ||
        FormatColumnFamilyName(v) != name) {
      return absl::FailedPreconditionError(absl::StrCat(
          AbslView(path), " has an unreadable format marker '", name, "'"));
    }
    version = std::max(version, v);
  }
  if (version == 0) {
    return absl::FailedPreconditionError(
        absl::StrCat(AbslView(path),
                     " is a RocksDB database but not an idem store (no "
                     "format marker); refusing to open it"));
  }
  if (version > kFormatVersion) {
    return absl::FailedPreconditionError(absl::StrCat(
        AbslView(path), " was written by a newer idem (format ", version,
        "); this build reads format ", kFormatVersion, " and older"));
  }
  for (const char* required :
       {kDedupeColumnFamily, kStateColumnFamily, kOffsetsColumnFamily}) {
    if (std::find(names.begin(), names.end(), required) == names.end()) {
      return absl::DataLossError(
          absl::StrCat(AbslView(path),
                       " is an idem store missing column family ", required));
    }
  }
  return version;
}

rocksdb::DBOptions MakeDbOptions(const Options& options, rocksdb::Env* env,
                                 std::shared_ptr<rocksdb::Statistics> stats) {
  rocksdb::DBOptions db;
  db.env = env;
  db.statistics = std::move(stats);
  db.max_background_jobs = options.max_background_jobs;
  // Bound the WAL so crash recovery replays at most a few memtables.
  db.max_total_wal_size = 4 * options.write_buffer_bytes;
  // Never kSkipAnyCorruptedRecords: recover a consistent prefix.
  db.wal_recovery_mode = rocksdb::WALRecoveryMode::kPointInTimeRecovery;
  db.info_log_level = rocksdb::InfoLogLevel::WARN_LEVEL;
  db.keep_log_file_num = 4;
  // The hashed dedupe memtable takes one writer at a time; every commit goes
  // through the engine's one commit queue (engine/commit_queue.h), whose
  // leader writes its group as one batch, so no write group ever has two
  // memtable writers.
  db.allow_concurrent_memtable_write = false;
  return db;
}

size_t HashedMemtableBuckets(size_t write_buffer_bytes) {
  return std::clamp<size_t>(write_buffer_bytes / 512, 16, size_t{1} << 23);
}

size_t HashedMemtableBudget(size_t write_buffer_bytes) {
  return write_buffer_bytes + write_buffer_bytes / 10 * 3;
}

rocksdb::ColumnFamilyOptions MakeDedupeOptions(
    const Options& options, const std::shared_ptr<rocksdb::Cache>& cache,
    std::shared_ptr<rocksdb::CompactionFilterFactory> filter,
    bool partition_scope) {
  rocksdb::ColumnFamilyOptions cf;
  cf.write_buffer_size = options.write_buffer_bytes;
  cf.compaction_filter_factory = std::move(filter);
  cf.level_compaction_dynamic_level_bytes = true;
  // Cold files must meet the filter too: rewrite every file at least once
  // per window (RocksDB counts whole seconds; 0 would disable it).
  cf.periodic_compaction_seconds = static_cast<uint64_t>(
      std::max<int64_t>(1, absl::ToInt64Seconds(options.dedupe_window)));
  // Keys are hashes and values are short: compression buys nothing.
  cf.compression = rocksdb::kNoCompression;
  rocksdb::BlockBasedTableOptions table;
  table.block_cache = cache;
  if (options.bloom_bits_per_key > 0) {
    table.filter_policy.reset(
        rocksdb::NewBloomFilterPolicy(options.bloom_bits_per_key));
    // Most lookups are misses: check new IDs against the memtable cheaply.
    cf.memtable_prefix_bloom_size_ratio = 0.02;
    cf.memtable_whole_key_filtering = true;
  }
  cf.table_factory.reset(rocksdb::NewBlockBasedTableFactory(table));
  if (!partition_scope) {
    // Hashes are uniformly random: a sorted memtable pays a full skiplist
    // search (some 20 levels of cache misses at a million records) per
    // insert and per lookup that passes the Bloom filter. Buckets by the
    // first 8 key bytes, each a short sorted list, cost a few; the sorting
    // moves to the background flush. Iterators over these families need
    // ReadOptions::total_order_seek (every scan in the engine sets it):
    // without it they see only one bucket of the memtable. A record takes
    // more memory in a bucket than in a skiplist, so the budget grows to
    // keep as many records per flush (HashedMemtableBudget).
    cf.write_buffer_size = HashedMemtableBudget(options.write_buffer_bytes);
    cf.prefix_extractor = std::make_shared<MemtableBucketPrefix>();
    cf.memtable_factory.reset(rocksdb::NewHashLinkListRepFactory(
        HashedMemtableBuckets(options.write_buffer_bytes),
        /*huge_page_tlb_size=*/0, /*bucket_entries_logging_threshold=*/0,
        /*if_log_bucket_dist_when_flash=*/false));
  }
  return cf;
}

rocksdb::ColumnFamilyOptions MakeBucketOptions(
    const Options& options, const std::shared_ptr<rocksdb::Cache>& cache,
    std::shared_ptr<rocksdb::CompactionFilterFactory> filter,
    bool partition_scope) {
  rocksdb::ColumnFamilyOptions cf =
      MakeDedupeOptions(options, cache, std::move(filter), partition_scope);
  // 0 turns periodic compaction off: the whole family goes at its end.
  cf.periodic_compaction_seconds = 0;
  return cf;
}

rocksdb::ColumnFamilyOptions MakeStateOptions(
    const Options& options, const std::shared_ptr<rocksdb::Cache>& cache,
    size_t write_buffer_bytes) {
  rocksdb::ColumnFamilyOptions cf;
  cf.write_buffer_size = write_buffer_bytes;
  cf.level_compaction_dynamic_level_bytes = true;
  rocksdb::BlockBasedTableOptions table;
  table.block_cache = cache;
  if (options.bloom_bits_per_key > 0) {
    table.filter_policy.reset(
        rocksdb::NewBloomFilterPolicy(options.bloom_bits_per_key));
    // A handler's Get of a key the memtable does not hold (a first write,
    // or a key only in files) skips the skiplist search: about 4,500
    // instructions per such read at 10,000 keys (docs/performance.md,
    // "Batch 1 against RocksDB used directly"). 2% of the memtable's budget.
    cf.memtable_prefix_bloom_size_ratio = 0.02;
    cf.memtable_whole_key_filtering = true;
  }
  cf.table_factory.reset(rocksdb::NewBlockBasedTableFactory(table));
  return cf;
}

Store::~Store() {
  if (db == nullptr) return;
  for (rocksdb::ColumnFamilyHandle* h : handles) {
    db->DestroyColumnFamilyHandle(h).PermitUncheckedError();
  }
  // Close reports errors of the final background work; nothing can act on
  // them here and the WAL keeps committed data either way.
  db->Close().PermitUncheckedError();
  delete db;
}

StoreParts MakeStoreParts(const Options& options,
                          std::shared_ptr<TtlFilterFactory> ttl_filter) {
  StoreParts parts;
  // The tickers GetStats reports, no others: counting every read and timing
  // every write costs more than it tells here.
  parts.statistics = NewReportedStatistics();
  parts.block_cache = rocksdb::NewLRUCache(options.block_cache_bytes);
  parts.state_ttl = std::make_shared<StateTtlContext>(
      ttl_filter != nullptr ? ttl_filter->time() : nullptr);
  parts.state_filter = std::make_shared<StateTtlFilterFactory>(parts.state_ttl);
  parts.dedupe_filter = std::move(ttl_filter);
  rocksdb::Env* base =
      options.env != nullptr ? options.env : rocksdb::Env::Default();
  parts.wal_watch = std::make_shared<WalWatch>(base->GetFileSystem());
  parts.env = rocksdb::NewCompositeEnv(parts.wal_watch);
  return parts;
}

absl::StatusOr<std::unique_ptr<Store>> OpenStore(const std::string& path,
                                                 const Options& options,
                                                 const StoreParts& parts,
                                                 bool read_only) {
  rocksdb::Env* env = parts.env != nullptr     ? parts.env.get()
                      : options.env != nullptr ? options.env
                                               : rocksdb::Env::Default();
  rocksdb::DBOptions db_options = MakeDbOptions(options, env, parts.statistics);
  // Nothing is written to the store directory before it passed every check.
  db_options.info_log = MakeInfoLog(options.logger, "", options.clock);

  absl::StatusOr<DirectoryState> state = InspectStoreDirectory(env, path, path);
  if (!state.ok()) return state.status();
  switch (state->kind) {
    case DirectoryKind::kOther:
      return absl::FailedPreconditionError(absl::StrCat(
          path,
          " is not an idem store (a file, or a non-empty directory "
          "without a database); refusing to open it"));
    case DirectoryKind::kMissing:
    case DirectoryKind::kEmpty:
    case DirectoryKind::kInterruptedCreation:
      state = CreateMissingStore(path, options, parts, env, db_options,
                                 state->kind, read_only);
      if (!state.ok()) return state.status();
      break;
    case DirectoryKind::kStore:
      break;
  }

  // Every spelling of the directory (a trailing "/", "./", a symlink) opens
  // it under one name, so RocksDB's lock refuses a second writable engine in
  // this process as it does in another.
  const std::string dir = CanonicalStorePath(path);
  if (state->has_staging && !read_only) RemoveFinishedStaging(env, dir);
  std::vector<std::string> names;
  int format_version = 0;
  if (absl::Status s =
          CheckExistingFormat(db_options, dir, path, &names, &format_version);
      !s.ok()) {
    return s;
  }
  const bool partition_scope =
      std::find(names.begin(), names.end(), kPartitionScopeColumnFamily) !=
      names.end();
  if (!read_only &&
      partition_scope != (options.dedupe_scope == DedupeScope::kPartition)) {
    return absl::FailedPreconditionError(absl::StrCat(
        path, " was created with dedupe_scope ",
        partition_scope ? "kPartition" : "kStore",
        "; open it with the same scope (the scope of a store is fixed when "
        "it is created)"));
  }
  if (state->has_wal_data) {
    if (absl::Status s = CheckWriteAheadLogs(dir, path, options, parts, env,
                                             db_options, names);
        !s.ok()) {
      return s;
    }
  }
  if (!read_only) {
    db_options.info_log =
        MakeInfoLog(options.logger, dir + "/LOG", options.clock);
    // A store written before the outbox or timers gains their (empty)
    // families. Older builds open every family they find, so they still
    // open the store; they just do not relay its outbox (a store with
    // timers or stream times is marked format 5 first: engine/store.h).
    for (const char* added : {kOutboxColumnFamily, kTimersColumnFamily}) {
      if (std::find(names.begin(), names.end(), added) == names.end()) {
        names.push_back(added);
        db_options.create_missing_column_families = true;
      }
    }
  }
  // One writable store per directory in this process, whatever its name
  // (RocksDB's lock does not see through a bind mount).
  StoreClaim claim;
  if (!read_only) {
    absl::StatusOr<StoreClaim> claimed = StoreClaim::Claim(dir, path);
    if (!claimed.ok()) return claimed.status();
    claim = *std::move(claimed);
  }
  // Before the database opens: replaying the WAL may flush, and the flush
  // folds merges as the store's format says.
  if (parts.state_ttl != nullptr) {
    parts.state_ttl->enveloped.store(format_version >= kStateTtlFormatVersion);
  }
  absl::StatusOr<std::unique_ptr<Store>> store =
      OpenDatabase(dir, options, parts, env, db_options, names, read_only);
  if (store.ok()) {
    (*store)->format_version = format_version;
    (*store)->partition_scope = partition_scope;
    (*store)->claim = std::move(claim);
    if (absl::Status s = FinishStateTtlFormat(**store, parts, path); !s.ok()) {
      return s;
    }
  }
  return store;
}

}  // namespace idem
