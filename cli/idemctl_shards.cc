// Which shards of a sharded store (Options::shards > 1) an idem-ctl
// subcommand runs on: --shard=N, the shard of a partition, or all of them
// (see ShardScope in cli/idemctl_request.h).

#include <optional>
#include <ostream>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "cli/idemctl_request.h"
#include "engine/shard_layout.h"
#include "idem/engine.h"
#include "rocksdb/env.h"

namespace idem::cli::idemctl {
namespace {

// "4 shards (0 to 3)", "1 shard (0)".
std::string ShardRange(int count) {
  return count == 1 ? "1 shard (0)"
                    : absl::StrCat(count, " shards (0 to ", count - 1, ")");
}

}  // namespace

std::optional<int> PrepareShard(Request& request, const std::string& command,
                                ShardScope scope, std::ostream& err) {
  const std::optional<std::string>& flag = request.args.shard;
  if (!flag.has_value()) return std::nullopt;
  if (scope == ShardScope::kWhole) {
    return UsageError(
        err, absl::StrCat("'", command,
                          "' takes no --shard: it runs on the whole store, "
                          "each partition in its own shard"));
  }
  std::optional<int64_t> shard = ParseNonNegative(*flag, kMaxShards - 1);
  if (!shard.has_value()) {
    return UsageError(
        err, absl::StrCat("--shard: '", *flag, "' is not a shard number (0 to ",
                          kMaxShards - 1, ")"));
  }
  if (request.position.has_value()) {
    return UsageError(err,
                      "give the shard to read (--shard) or a partition "
                      "(--source/--partition), not both");
  }
  request.shard = static_cast<int>(*shard);
  return std::nullopt;
}

absl::StatusOr<int> StoreShardCount(const std::string& path) {
  absl::StatusOr<std::optional<int>> count =
      ReadShardCount(rocksdb::Env::Default(), path);
  if (!count.ok()) return count.status();
  return count->value_or(1);
}

std::optional<int> CheckShard(Engine& engine, const std::string& command,
                              ShardScope scope, Request& request,
                              std::ostream& err) {
  request.shard_count = engine.shard_count();
  const std::string range = ShardRange(request.shard_count);
  if (request.shard.has_value() && *request.shard >= request.shard_count) {
    return UsageError(
        err, absl::StrCat("--shard=", *request.shard, ": the store at '",
                          request.args.store, "' has ", range));
  }
  if (scope == ShardScope::kOne && request.shard_count > 1 &&
      !request.shard.has_value() && !request.position.has_value()) {
    return UsageError(
        err, absl::StrCat("'", command, "' reads one shard, and the store at '",
                          request.args.store, "' has ", range,
                          ": pass --shard=N, or the partition whose shard to "
                          "read, --source=S --partition=P (or "
                          "--partition=S:P)"));
  }
  return std::nullopt;
}

Engine& Target(Engine& engine, const Request& r) {
  if (r.shard.has_value()) return *engine.shard(*r.shard);
  if (r.position.has_value()) {
    return *engine.shard(engine.ShardOf(r.position->partition));
  }
  return engine;
}

std::optional<int> TargetShard(Engine& engine, const Request& r) {
  if (engine.shard_count() == 1) return std::nullopt;
  if (r.shard.has_value()) return r.shard;
  if (r.position.has_value()) return engine.ShardOf(r.position->partition);
  return std::nullopt;
}

absl::Status ForEachShard(
    Engine& engine, const Request& r,
    absl::FunctionRef<absl::Status(int shard, Engine& e)> visit) {
  if (r.shard.has_value()) return visit(*r.shard, *engine.shard(*r.shard));
  for (int i = 0; i < engine.shard_count(); ++i) {
    if (absl::Status s = visit(i, *engine.shard(i)); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace idem::cli::idemctl
