#include "engine/store.h"

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <string_view>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "engine/absl_view.h"
#include "engine/status_util.h"
#include "rocksdb/cache.h"
#include "rocksdb/env.h"
#include "rocksdb/filter_policy.h"
#include "rocksdb/table.h"

namespace idem {
namespace {


// What is at `path` before anything is opened.
enum class PathKind { kMissing, kEmptyDirectory, kDatabase, kOther };

absl::StatusOr<PathKind> ClassifyPath(rocksdb::Env* env,
                                      const std::string& path) {
  rocksdb::Status exists = env->FileExists(path);
  if (exists.IsNotFound()) return PathKind::kMissing;
  if (!exists.ok()) return FromRocksStatus(exists, "checking " + path);
  bool is_dir = false;
  rocksdb::Status s = env->IsDirectory(path, &is_dir);
  if (!s.ok()) return FromRocksStatus(s, "checking " + path);
  if (!is_dir) return PathKind::kOther;
  std::vector<std::string> children;
  s = env->GetChildren(path, &children);
  if (!s.ok()) return FromRocksStatus(s, "listing " + path);
  bool empty = true;
  bool has_current = false;
  for (const std::string& child : children) {
    if (child == "." || child == "..") continue;
    empty = false;
    if (child == "CURRENT") has_current = true;
  }
  if (empty) return PathKind::kEmptyDirectory;
  return has_current ? PathKind::kDatabase : PathKind::kOther;
}

// Reads the format version of an existing database from its column family
// names (reads the MANIFEST only; writes nothing).
absl::Status CheckExistingFormat(const rocksdb::DBOptions& db_options,
                                 const std::string& path,
                                 std::vector<std::string>* names,
                                 int* format_version) {
  rocksdb::Status s =
      rocksdb::DB::ListColumnFamilies(db_options, path, names);
  if (!s.ok()) return FromRocksStatus(s, "reading store metadata at " + path);
  absl::StatusOr<int> version = FormatVersionFromFamilies(*names, path);
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
  std::vector<rocksdb::ColumnFamilyDescriptor> descriptors;
  for (const std::string& name : names) {
    rocksdb::ColumnFamilyOptions cf;
    if (name == kDedupeColumnFamily) {
      cf = MakeDedupeOptions(options, parts.block_cache, parts.dedupe_filter);
    } else if (ParseBucketFamilyName(name).has_value()) {
      cf = MakeBucketOptions(options, parts.block_cache, parts.dedupe_filter);
    } else if (name == kStateColumnFamily) {
      cf = MakeStateOptions(options, parts.block_cache,
                            options.write_buffer_bytes);
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
    if (std::optional<int64_t> end = ParseBucketFamilyName(names[i])) {
      store->buckets[*end] = store->handles[i];
    }
  }
  return store;
}

// Creates an empty store at `path` (missing or an empty directory) so that a
// crash at any point leaves either no store or a complete one: the store is
// built in a sibling directory, then renamed into place.
absl::Status CreateStore(const std::string& path, const Options& options,
                         const StoreParts& parts, rocksdb::Env* env,
                         rocksdb::DBOptions db_options) {
  const std::string staging = path + ".idem-creating";
  if (env->FileExists(staging).ok()) {
    // Left by a creation that crashed: it never held committed data.
    rocksdb::Options destroy_options(db_options, rocksdb::ColumnFamilyOptions());
    rocksdb::Status s = rocksdb::DestroyDB(staging, destroy_options);
    // DestroyDB removes the directory too once it is empty.
    if (s.ok() && env->FileExists(staging).ok()) s = env->DeleteDir(staging);
    if (!s.ok()) {
      return FromRocksStatus(s, "removing the unfinished store " + staging);
    }
  }
  db_options.create_if_missing = true;
  db_options.create_missing_column_families = true;
  // The format marker comes last: RocksDB creates missing column families
  // in order, so its presence means all others exist.
  const std::vector<std::string> names = {
      rocksdb::kDefaultColumnFamilyName, kDedupeColumnFamily,
      kStateColumnFamily, kOffsetsColumnFamily,
      FormatColumnFamilyName(options.expiry_buckets > 0 ? 2 : 1)};
  {
    absl::StatusOr<std::unique_ptr<Store>> created =
        OpenDatabase(staging, options, parts, env, db_options, names,
                     /*read_only=*/false);
    if (!created.ok()) return created.status();
  }  // closed here
  // rename(2) also replaces an empty directory at `path`.
  rocksdb::Status s = env->RenameFile(staging, path);
  if (!s.ok()) return FromRocksStatus(s, "moving the new store into " + path);
  const std::string parent = std::filesystem::path(path).parent_path().string();
  std::unique_ptr<rocksdb::Directory> dir;
  s = env->NewDirectory(parent.empty() ? "." : parent, &dir);
  if (s.ok()) s = dir->Fsync();
  return FromRocksStatus(s, "syncing the directory of " + path);
}

}  // namespace

std::string FormatColumnFamilyName(int version) {
  return absl::StrCat(kFormatColumnFamilyPrefix, version);
}

std::string BucketFamilyName(int64_t end_micros) {
  return absl::StrCat(kBucketFamilyPrefix, end_micros);
}

std::optional<int64_t> ParseBucketFamilyName(std::string_view name) {
  if (!absl::StartsWith(AbslView(name), kBucketFamilyPrefix)) {
    return std::nullopt;
  }
  int64_t end = 0;
  if (!absl::SimpleAtoi(
          AbslView(name.substr(std::string_view(kBucketFamilyPrefix).size())),
          &end)) {
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
    if (!absl::SimpleAtoi(digits, &v) || v < 1) {
      return absl::FailedPreconditionError(absl::StrCat(
          AbslView(path), " has an unreadable format marker '", name, "'"));
    }
    version = std::max(version, v);
  }
  if (version == 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        AbslView(path), " is a RocksDB database but not an idem store (no "
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
      return absl::DataLossError(absl::StrCat(
          AbslView(path), " is an idem store missing column family ",
          required));
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
  return db;
}

rocksdb::ColumnFamilyOptions MakeDedupeOptions(
    const Options& options, const std::shared_ptr<rocksdb::Cache>& cache,
    std::shared_ptr<rocksdb::CompactionFilterFactory> filter) {
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
  return cf;
}

rocksdb::ColumnFamilyOptions MakeBucketOptions(
    const Options& options, const std::shared_ptr<rocksdb::Cache>& cache,
    std::shared_ptr<rocksdb::CompactionFilterFactory> filter) {
  rocksdb::ColumnFamilyOptions cf =
      MakeDedupeOptions(options, cache, std::move(filter));
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
  parts.statistics = rocksdb::CreateDBStatistics();
  // Tickers only: timing every read and write costs more than it tells here.
  parts.statistics->set_stats_level(
      rocksdb::StatsLevel::kExceptHistogramOrTimers);
  parts.block_cache = rocksdb::NewLRUCache(options.block_cache_bytes);
  parts.dedupe_filter = std::move(ttl_filter);
  return parts;
}

absl::StatusOr<std::unique_ptr<Store>> OpenStore(const std::string& path,
                                                 const Options& options,
                                                 const StoreParts& parts,
                                                 bool read_only) {
  rocksdb::Env* env =
      options.env != nullptr ? options.env : rocksdb::Env::Default();
  const rocksdb::DBOptions db_options =
      MakeDbOptions(options, env, parts.statistics);

  absl::StatusOr<PathKind> kind = ClassifyPath(env, path);
  if (!kind.ok()) return kind.status();
  switch (*kind) {
    case PathKind::kOther:
      return absl::FailedPreconditionError(absl::StrCat(
          path, " is not an idem store (a file, or a non-empty directory "
                "without a database); refusing to open it"));
    case PathKind::kMissing:
    case PathKind::kEmptyDirectory:
      if (!options.create_if_missing || read_only) {
        return absl::NotFoundError(absl::StrCat(
            "no idem store at ", path, " and create_if_missing is false"));
      }
      if (absl::Status s = CreateStore(path, options, parts, env, db_options);
          !s.ok()) {
        return s;
      }
      break;
    case PathKind::kDatabase:
      break;
  }
  std::vector<std::string> names;
  int format_version = 0;
  if (absl::Status s =
          CheckExistingFormat(db_options, path, &names, &format_version);
      !s.ok()) {
    return s;
  }
  absl::StatusOr<std::unique_ptr<Store>> store =
      OpenDatabase(path, options, parts, env, db_options, names, read_only);
  if (store.ok()) (*store)->format_version = format_version;
  return store;
}

}  // namespace idem
