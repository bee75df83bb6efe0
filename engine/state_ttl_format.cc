// Format 6 of a store (engine/store.h): state values that may carry an
// expiry. The upgrade of an older store, and its completion after a crash.

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/absl_view.h"
#include "engine/coding.h"
#include "engine/state_value.h"
#include "engine/status_util.h"
#include "engine/store.h"
#include "rocksdb/write_batch.h"

namespace idem {
namespace {

// The state values of `store`, read as raw bytes, that would read as
// envelopes, each with its wrapped form (an envelope that never expires).
absl::StatusOr<std::vector<std::pair<std::string, std::string>>>
FindAmbiguousValues(Store& store) {
  std::vector<std::pair<std::string, std::string>> wrapped;
  std::unique_ptr<rocksdb::Iterator> it(
      store.db->NewIterator(rocksdb::ReadOptions(), store.state));
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    const std::string_view value = it->value().ToStringView();
    if (!LooksLikeEnvelope(value)) continue;
    wrapped.emplace_back(
        it->key().ToString(),
        EncodeStateValue(value, kNeverExpires, /*enveloped=*/true));
  }
  if (!it->status().ok()) {
    return FromRocksStatus(it->status(),
                           "reading state values for the format 6 upgrade");
  }
  return wrapped;
}

// Wraps the ambiguous values and writes kStateTtlReadyKey, in one synced
// write, then switches the merge operator and filter to envelopes.
absl::Status WrapAmbiguousValues(
    Store& store, const StoreParts& parts,
    const std::vector<std::pair<std::string, std::string>>& wrapped) {
  rocksdb::WriteBatch batch;
  for (const auto& [key, value] : wrapped) {
    rocksdb::Status s = batch.Put(store.state, key, value);
    if (!s.ok()) return FromRocksStatus(s, "building the format 6 upgrade");
  }
  rocksdb::Status s =
      batch.Put(store.db->DefaultColumnFamily(), kStateTtlReadyKey, "1");
  if (!s.ok()) return FromRocksStatus(s, "building the format 6 upgrade");
  rocksdb::WriteOptions write;
  write.sync = true;
  s = store.db->Write(write, &batch);
  if (!s.ok()) return FromRocksStatus(s, "writing the format 6 upgrade");
  if (parts.state_ttl != nullptr) {
    parts.state_ttl->enveloped.store(true, std::memory_order_release);
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status MarkStateTtlFormat(Store& store, const Options& options,
                                const StoreParts& parts) {
  if (store.format_version >= kStateTtlFormatVersion) return absl::OkStatus();
  // Read while every value is still raw to the merge operator: nothing
  // else writes, and nothing is wrapped before the marker exists.
  auto wrapped = FindAmbiguousValues(store);
  if (!wrapped.ok()) return wrapped.status();
  if (absl::Status s =
          MarkStoreFormat(store, options, parts, kStateTtlFormatVersion);
      !s.ok()) {
    return s;
  }
  return WrapAmbiguousValues(store, parts, *wrapped);
}

absl::Status FinishStateTtlFormat(Store& store, const StoreParts& parts,
                                  std::string_view path) {
  const bool format5 = store.format_version >= kStateTtlFormatVersion;
  if (!format5) {
    if (parts.state_ttl != nullptr) parts.state_ttl->enveloped.store(false);
    return absl::OkStatus();
  }
  std::string ready;
  rocksdb::Status s =
      store.db->Get(rocksdb::ReadOptions(), store.db->DefaultColumnFamily(),
                    kStateTtlReadyKey, &ready);
  if (s.ok()) {
    if (parts.state_ttl != nullptr) parts.state_ttl->enveloped.store(true);
    return absl::OkStatus();
  }
  if (!s.IsNotFound()) {
    return FromRocksStatus(s, "reading the store's format 6 state");
  }
  if (store.read_only) {
    return absl::FailedPreconditionError(absl::StrCat(
        AbslView(path),
        " was interrupted upgrading to format 6 (state that expires); open "
        "it writable once to finish"));
  }
  // The marker exists but nothing was wrapped: values are still raw. (The
  // WAL's replay at open folded any merges as format 6: a value that ends
  // like an envelope and had merges replayed is the one case this cannot
  // put right.)
  if (parts.state_ttl != nullptr) parts.state_ttl->enveloped.store(false);
  auto wrapped = FindAmbiguousValues(store);
  if (!wrapped.ok()) return wrapped.status();
  return WrapAmbiguousValues(store, parts, *wrapped);
}

}  // namespace idem
