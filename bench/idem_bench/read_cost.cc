// The cost of a dedupe lookup (bench/idem_bench/read_cost.h).

#include "bench/idem_bench/read_cost.h"

#include <algorithm>
#include <chrono>
#include <memory>
#include <utility>

#include "absl/types/span.h"
#include "bench/idem_bench/layout_options.h"
#include "engine/expiry_buckets.h"
#include "engine/record.h"
#include "engine/store.h"
#include "engine/ttl_filter.h"
#include "rocksdb/db.h"
#include "rocksdb/statistics.h"

namespace idem::bench {
namespace {

// Runs Get for each ID against `families` (in order, stopping at the first
// that holds it) and averages the cost.
LookupCost MeasureLookups(
    rocksdb::DB* db, absl::Span<rocksdb::ColumnFamilyHandle* const> families,
    rocksdb::Statistics& stats, const std::vector<std::string>& ids) {
  LookupCost cost;
  const uint64_t useful0 = stats.getTickerCount(rocksdb::BLOOM_FILTER_USEFUL);
  const uint64_t positive0 =
      stats.getTickerCount(rocksdb::BLOOM_FILTER_FULL_POSITIVE);
  const uint64_t blocks0 = stats.getTickerCount(rocksdb::BLOCK_CACHE_DATA_MISS);
  double micros = 0;
  std::string value;
  for (const std::string& id : ids) {
    const DedupeKey key = HashMessageId(id);
    const auto start = std::chrono::steady_clock::now();
    for (rocksdb::ColumnFamilyHandle* cf : families) {
      rocksdb::Status s =
          db->Get(rocksdb::ReadOptions(), cf,
                  rocksdb::Slice(key.data(), key.size()), &value);
      if (s.ok()) {
        ++cost.found;
        break;
      }
    }
    micros += std::chrono::duration<double, std::micro>(
                  std::chrono::steady_clock::now() - start)
                  .count();
    ++cost.lookups;
  }
  if (cost.lookups == 0) return cost;
  const double n = static_cast<double>(cost.lookups);
  const double useful = static_cast<double>(
      stats.getTickerCount(rocksdb::BLOOM_FILTER_USEFUL) - useful0);
  const double positive = static_cast<double>(
      stats.getTickerCount(rocksdb::BLOOM_FILTER_FULL_POSITIVE) - positive0);
  cost.filter_negatives = useful / n;
  cost.filter_probes = (useful + positive) / n;
  cost.data_blocks_read =
      static_cast<double>(stats.getTickerCount(rocksdb::BLOCK_CACHE_DATA_MISS) -
                          blocks0) /
      n;
  cost.micros = micros / n;
  return cost;
}

}  // namespace

absl::StatusOr<ReadCost> MeasureReadCost(
    const std::string& path, const TargetOptions& options,
    const std::vector<std::string>& miss_ids,
    const std::vector<std::string>& hit_ids) {
  ReadCost cost;
  if (options.layout == Layout::kEngine) {
    Options engine_options = EngineOptions(options);
    engine_options.env = nullptr;  // no time-based work in a read-only open
    StoreParts parts = MakeStoreParts(
        engine_options, std::make_shared<TtlFilterFactory>(options.clock));
    absl::StatusOr<std::unique_ptr<Store>> store =
        OpenStore(path, engine_options, parts, /*read_only=*/true);
    if (!store.ok()) return store.status();
    rocksdb::DB* db = (*store)->db;
    // The families the engine probes: idem.dedupe and the expiry buckets
    // that have not ended.
    const DedupeFamilies families =
        LiveDedupeFamilies(**store, TimeToMicros(options.clock->Now()));
    cost.miss = MeasureLookups(db, families, *parts.statistics, miss_ids);
    cost.hit = MeasureLookups(db, families, *parts.statistics, hit_ids);
    db->GetAggregatedIntProperty(
        rocksdb::DB::Properties::kEstimateTableReadersMem,
        &cost.table_readers_bytes);
    return cost;
  }
  RawParts parts = MakeRawParts(options);
  parts.fifo_drops = nullptr;
  const rocksdb::DBOptions db_options =
      RawDbOptions(options, rocksdb::Env::Default(), parts);
  std::vector<std::string> names;
  rocksdb::Status s = rocksdb::DB::ListColumnFamilies(db_options, path, &names);
  if (!s.ok()) return FromRocks(s, "listing column families of " + path);
  std::vector<rocksdb::ColumnFamilyDescriptor> descriptors;
  for (const std::string& name : names) {
    descriptors.emplace_back(name, RawOptionsFor(name, options, parts));
  }
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::DB* db = nullptr;
  s = rocksdb::DB::OpenForReadOnly(db_options, path, descriptors, &handles,
                                   &db);
  if (!s.ok()) return FromRocks(s, "opening " + path + " read-only");
  // A RocksDB layout's one dedupe family.
  std::vector<rocksdb::ColumnFamilyHandle*> families;
  for (size_t i = 0; i < names.size(); ++i) {
    if (IsDedupeFamily(names[i])) families.push_back(handles[i]);
  }
  cost.miss = MeasureLookups(db, families, *parts.statistics, miss_ids);
  cost.hit = MeasureLookups(db, families, *parts.statistics, hit_ids);
  db->GetAggregatedIntProperty(
      rocksdb::DB::Properties::kEstimateTableReadersMem,
      &cost.table_readers_bytes);
  for (rocksdb::ColumnFamilyHandle* h : handles) {
    db->DestroyColumnFamilyHandle(h).PermitUncheckedError();
  }
  db->Close().PermitUncheckedError();
  delete db;
  return cost;
}

}  // namespace idem::bench
