#include "engine/expiry_buckets.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "engine/status_util.h"

namespace idem {
int64_t BucketWidthMicros(const Options& options) {
  return std::max<int64_t>(1,
                           absl::ToInt64Microseconds(options.dedupe_window /
                                                     options.expiry_buckets));
}

std::optional<int64_t> BucketEndFor(const Options& options,
                                    int64_t expiry_micros, int64_t now_micros) {
  if (options.expiry_buckets <= 0) return std::nullopt;
  const int64_t width = BucketWidthMicros(options);
  const int64_t window = absl::ToInt64Microseconds(options.dedupe_window);
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  // Newest bucket end allowed now; beyond it, the filtered family.
  if (now_micros > kMax - window - width) return std::nullopt;
  const int64_t newest = now_micros + window + width;
  if (expiry_micros >= newest) return std::nullopt;
  // The smallest multiple of `width` above the expiry (expiry >= 0 here:
  // expiries are after the epoch).
  const int64_t end = (expiry_micros / width + 1) * width;
  if (end > newest) return std::nullopt;
  return end;
}

absl::Status CreateBucket(Store& store, const Options& options,
                          const StoreParts& parts, int64_t end_micros) {
  if (store.buckets.count(end_micros) > 0) return absl::OkStatus();
  if (absl::Status s = MarkStoreFormat(store, options, parts, 2); !s.ok()) {
    return s;
  }
  rocksdb::ColumnFamilyHandle* handle = nullptr;
  rocksdb::Status s = store.db->CreateColumnFamily(
      MakeBucketOptions(options, parts.block_cache, parts.dedupe_filter,
                        store.partition_scope),
      BucketFamilyName(end_micros), &handle);
  if (!s.ok()) {
    return FromRocksStatus(s, absl::StrCat("creating expiry bucket ",
                                           BucketFamilyName(end_micros)));
  }
  store.handles.push_back(handle);
  store.buckets[end_micros] = handle;
  return absl::OkStatus();
}

bool HasExpiredBuckets(const Store& store, int64_t now_micros) {
  return !store.buckets.empty() && store.buckets.begin()->first <= now_micros;
}

absl::StatusOr<DroppedBuckets> DropExpiredBuckets(Store& store,
                                                  int64_t now_micros) {
  DroppedBuckets dropped;
  while (HasExpiredBuckets(store, now_micros)) {
    auto oldest = store.buckets.begin();
    rocksdb::ColumnFamilyHandle* handle = oldest->second;
    uint64_t records = 0;
    if (store.db->GetIntProperty(
            handle, rocksdb::DB::Properties::kEstimateNumKeys, &records)) {
      dropped.records += records;
    }
    rocksdb::Status s = store.db->DropColumnFamily(handle);
    if (!s.ok()) {
      return FromRocksStatus(s, absl::StrCat("dropping expiry bucket ",
                                             BucketFamilyName(oldest->first)));
    }
    store.buckets.erase(oldest);
    store.handles.erase(
        std::remove(store.handles.begin(), store.handles.end(), handle),
        store.handles.end());
    // Releases the family; its files are deleted once nothing uses them.
    store.db->DestroyColumnFamilyHandle(handle).PermitUncheckedError();
    ++dropped.families;
  }
  return dropped;
}

DedupeFamilies LiveDedupeFamilies(const Store& store, int64_t now_micros) {
  DedupeFamilies families = {store.dedupe};
  for (auto it = store.buckets.upper_bound(now_micros);
       it != store.buckets.end(); ++it) {
    families.push_back(it->second);
  }
  return families;
}

std::vector<rocksdb::ColumnFamilyHandle*> AllDedupeFamilies(
    const Store& store) {
  std::vector<rocksdb::ColumnFamilyHandle*> families = {store.dedupe};
  for (const auto& [end, handle] : store.buckets) families.push_back(handle);
  return families;
}

}  // namespace idem
