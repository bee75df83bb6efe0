#include "engine/shard_layout.h"

#include <memory>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "engine/status_util.h"
#include "engine/store_directory.h"

namespace idem {
namespace {

constexpr char kShardsPrefix[] = "idem shards ";

std::string Join(const std::string& dir, const std::string& name) {
  return dir + "/" + name;
}

bool Exists(rocksdb::Env* env, const std::string& path) {
  return env->FileExists(path).ok();
}

}  // namespace

std::string ShardDirectory(const std::string& path, int index) {
  return Join(path, absl::StrFormat("shard-%03d", index));
}

absl::StatusOr<std::optional<int>> ReadShardCount(rocksdb::Env* env,
                                                  const std::string& path) {
  const std::string file = Join(path, kShardsFileName);
  if (!Exists(env, file)) return std::nullopt;
  std::string text;
  rocksdb::Status s = rocksdb::ReadFileToString(env, file, &text);
  if (!s.ok()) return FromRocksStatus(s, "reading " + file);
  absl::string_view rest(text);
  int count = 0;
  if (!absl::ConsumePrefix(&rest, kShardsPrefix) ||
      !absl::ConsumeSuffix(&rest, "\n") || !absl::SimpleAtoi(rest, &count) ||
      count < 2 || count > kMaxShards) {
    return absl::DataLossError(absl::StrCat(
        file, " does not hold a shard count (\"", kShardsPrefix, "N\")"));
  }
  return count;
}

absl::StatusOr<bool> CheckShardLayout(rocksdb::Env* env,
                                      const std::string& path,
                                      const Options& options) {
  absl::StatusOr<std::optional<int>> stored = ReadShardCount(env, path);
  if (!stored.ok()) return stored.status();
  const bool unsharded_store = Exists(env, Join(path, "CURRENT"));
  const int found = stored->has_value() ? **stored : (unsharded_store ? 1 : 0);
  if (found != 0 && found != options.shards) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the store at ", path, " has ", found,
        found == 1 ? " shard" : " shards",
        "; opened with shards = ", options.shards,
        ": a store keeps the shard count it was created with (idem neither "
        "splits nor joins shards)"));
  }
  if (options.shards == 1) return false;  // an ordinary store, or none yet
  if (stored->has_value()) {
    for (int i = 0; i < options.shards; ++i) {
      const std::string dir = ShardDirectory(path, i);
      if (!Exists(env, Join(dir, "CURRENT"))) {
        return absl::DataLossError(absl::StrCat(
            "shard ", i, " of the store at ", path, " (", dir,
            ") is missing or damaged: refusing to open the store without "
            "it, which would drop its partitions"));
      }
    }
    return false;
  }
  if (options.read_only || !options.create_if_missing) {
    return absl::NotFoundError(
        absl::StrCat("no sharded store at ", path,
                     options.read_only ? " (read_only opens never create one)"
                                       : " (create_if_missing is false)"));
  }
  rocksdb::Status s = env->CreateDirIfMissing(path);
  if (!s.ok()) return FromRocksStatus(s, "creating " + path);
  return true;
}

absl::Status WriteShardCount(rocksdb::Env* env, const std::string& path,
                             int shards) {
  const std::string file = Join(path, kShardsFileName);
  const std::string temp = file + ".tmp";
  rocksdb::Status s =
      rocksdb::WriteStringToFile(env, absl::StrCat(kShardsPrefix, shards, "\n"),
                                 temp, /*should_sync=*/true);
  if (s.ok()) s = env->RenameFile(temp, file);
  if (!s.ok()) return FromRocksStatus(s, "writing " + file);
  return SyncDirectory(env, path);
}

}  // namespace idem
