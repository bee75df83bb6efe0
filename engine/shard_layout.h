// The directory of a sharded store (Options::shards > 1): a file SHARDS
// holding the shard count ("idem shards N\n"), written last when the store
// is created, beside one ordinary store directory per shard, shard-000,
// shard-001, ... Until SHARDS exists the store is being created: opening it
// again with any count finishes the creation. Once it exists the count is
// fixed: an open with another count, or one that finds a shard missing, is
// refused before any shard opens.
//
// All file operations go through the given rocksdb::Env. Functions only;
// thread-safe.

#ifndef IDEM_ENGINE_SHARD_LAYOUT_H_
#define IDEM_ENGINE_SHARD_LAYOUT_H_

#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/validate.h"  // kMaxShards
#include "idem/options.h"
#include "rocksdb/env.h"

namespace idem {

inline constexpr char kShardsFileName[] = "SHARDS";

// `path`/shard-NNN, the directory of shard `index`.
std::string ShardDirectory(const std::string& path, int index);

// The count in `path`/SHARDS; nullopt if there is no such file (an
// unsharded store, or none yet); kDataLoss if it does not parse.
absl::StatusOr<std::optional<int>> ReadShardCount(rocksdb::Env* env,
                                                  const std::string& path);

// Before an engine with options.shards opens `path`: kFailedPrecondition
// naming both counts if the store there was created with another count
// (an unsharded store counts as 1), kDataLoss naming the shard if a shard
// of a created sharded store is missing, kNotFound if there is no store and
// options.create_if_missing is false or options.read_only. Returns whether
// the store is new (SHARDS must be written once every shard is open).
absl::StatusOr<bool> CheckShardLayout(rocksdb::Env* env,
                                      const std::string& path,
                                      const Options& options);

// Writes `path`/SHARDS for `shards` shards, synced, atomically (a
// temporary file renamed over it).
absl::Status WriteShardCount(rocksdb::Env* env, const std::string& path,
                             int shards);

}  // namespace idem

#endif  // IDEM_ENGINE_SHARD_LAYOUT_H_
