#include "cli/idemctl.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <system_error>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "cli/idemctl_request.h"
#include "cli/partition_file.h"
#include "engine/store.h"
#include "idem/engine.h"
#include "idem/message.h"
#include "idem/options.h"
#include "idem/partition_snapshot.h"
#include "idem/stats.h"
#include "nlohmann/json.hpp"
#include "rocksdb/db.h"
#include "util/json_writer.h"

namespace idem::cli {

namespace idemctl {

constexpr char kHint[] = "Run 'idem-ctl --help' for usage.";

int Fail(std::ostream& err, std::string_view what, const absl::Status& s) {
  err << "idem-ctl: " << what << ": " << s.ToString() << "\n";
  return kExitStoreFailure;
}

int UsageError(std::ostream& err, std::string_view message) {
  err << "idem-ctl: " << message << "\n" << kHint << "\n";
  return kExitUsage;
}

// "SOURCE:P", as --partition takes it and the text output names it.
std::string PositionName(absl::string_view source, int32_t partition) {
  return absl::StrCat(source, ":", partition);
}

// A partition number (0..INT32_MAX) or an offset (0..INT64_MAX) written in
// decimal; nullopt otherwise.
std::optional<int64_t> ParseNonNegative(absl::string_view text, int64_t max) {
  int64_t value = 0;
  if (!absl::SimpleAtoi(text, &value) || value < 0 || value > max) {
    return std::nullopt;
  }
  return value;
}

std::optional<int32_t> ParsePartition(absl::string_view text) {
  std::optional<int64_t> p =
      ParseNonNegative(text, std::numeric_limits<int32_t>::max());
  if (!p.has_value()) return std::nullopt;
  return static_cast<int32_t>(*p);
}

}  // namespace idemctl

namespace {

using idemctl::CheckShard;
using idemctl::Fail;
using idemctl::ParseNonNegative;
using idemctl::ParsePartition;
using idemctl::Position;
using idemctl::PositionName;
using idemctl::PrepareImport;
using idemctl::PrepareMetrics;
using idemctl::PrepareScan;
using idemctl::PrepareSetOffset;
using idemctl::PrepareShard;
using idemctl::Request;
using idemctl::RunDump;
using idemctl::RunExport;
using idemctl::RunImport;
using idemctl::RunMetrics;
using idemctl::RunOffsets;
using idemctl::RunScan;
using idemctl::RunSetOffset;
using idemctl::RunVerify;
using idemctl::ShardScope;
using idemctl::Target;
using idemctl::UsageError;

using Json = nlohmann::json;
using util::JsonWriter;

enum class Access { kReadOnly, kWritable };

// Whether a subcommand takes --source/--partition: not at all, to name a
// record's partition in a partition-scoped store (kOptional), always, or to
// name the shard to read (kShard: optional; ShardScope::kOne).
enum class PositionFlags { kNone, kOptional, kRequired, kShard };

// One subcommand.
struct Command {
  std::string_view name;
  std::array<std::string_view, 3> args;  // positional arguments; "" ends them
  std::string_view help;
  Access access;
  PositionFlags position;
  ShardScope shards;
  // Checks and parses the arguments before the store is opened: nullopt to
  // go on, or the exit code to return. nullptr: nothing beyond the generic
  // checks of RunIdemctl.
  std::optional<int> (*prepare)(Request& request, std::ostream& err);
  int (*run)(Engine& engine, const Request& r, std::ostream& out,
             std::ostream& err);
};

size_t ArgCount(const Command& c) {
  return std::find(c.args.begin(), c.args.end(), std::string_view()) -
         c.args.begin();
}

// --source and --partition into request.position: a usage error if the
// subcommand does not take them, or requires them and they are missing, or
// they are malformed.
std::optional<int> ParsePositionFlags(const Command& command, Request& request,
                                      std::ostream& err) {
  const IdemctlArgs& args = request.args;
  const std::string name(command.name);
  if (command.position == PositionFlags::kNone) {
    if (args.source.has_value() || args.partition.has_value()) {
      return UsageError(err, absl::StrCat("'", name,
                                          "' takes neither --source nor "
                                          "--partition"));
    }
    return std::nullopt;
  }
  if (!args.partition.has_value()) {
    if (args.source.has_value()) {
      return UsageError(err, "--source needs --partition");
    }
    if (command.position == PositionFlags::kRequired) {
      return UsageError(
          err, absl::StrCat("'", name, "' needs --partition=SOURCE:P"));
    }
    return std::nullopt;
  }
  Position position;
  absl::string_view number = *args.partition;
  if (const size_t colon = number.rfind(':');
      colon != absl::string_view::npos) {
    if (args.source.has_value()) {
      return UsageError(err,
                        "give the source in --partition=SOURCE:P or in "
                        "--source, not both");
    }
    position.source = std::string(number.substr(0, colon));
    number = number.substr(colon + 1);
  } else if (args.source.has_value()) {
    position.source = *args.source;
  }
  std::optional<int32_t> partition = ParsePartition(number);
  if (!partition.has_value()) {
    return UsageError(
        err, absl::StrCat("--partition: '", *args.partition,
                          "' is not P or SOURCE:P with P a partition number "
                          "(0 or more)"));
  }
  position.partition = *partition;
  if (position.source.size() > kMaxSourceBytes) {
    return UsageError(err, absl::StrCat("the source must be at most ",
                                        kMaxSourceBytes, " bytes long"));
  }
  if (position.source.empty() && command.position == PositionFlags::kRequired) {
    return UsageError(err, absl::StrCat("'", name,
                                        "' needs a source: "
                                        "--partition=SOURCE:P"));
  }
  request.position = std::move(position);
  return std::nullopt;
}

// The figures, and the store's shard count ("shards") and, with --shard,
// the shard they are of ("shard").
void PrintStatsJson(const Stats& s, const Request& r, std::ostream& out) {
  JsonWriter j;
  j.BeginObject();
  j.Field("shards", r.shard_count);
  if (r.shard.has_value()) j.Field("shard", *r.shard);
  const std::pair<const char*, uint64_t> counts[] = {
      {"processed", s.processed},
      {"duplicates", s.duplicates},
      {"failed", s.failed},
      {"conflicts", s.conflicts},
      {"handler_reruns", s.handler_reruns},
      {"late_duplicates", s.late_duplicates},
      {"expired_dropped", s.expired_dropped},
      {"outbox_pending", s.outbox_pending},
      {"outbox_emitted", s.outbox_emitted},
      {"outbox_acknowledged", s.outbox_acknowledged},
      {"timers_fired", s.timers_fired},
      {"timers_dead_lettered", s.timers_dead_lettered},
      {"timer_failures", s.timer_failures},
      {"user_bytes", s.user_bytes},
      {"wal_bytes", s.wal_bytes},
      {"flush_bytes", s.flush_bytes},
      {"compaction_bytes", s.compaction_bytes},
      {"live_sst_bytes", s.live_sst_bytes},
      {"estimated_live_records", s.estimated_live_records},
      {"expiry_buckets", s.expiry_buckets},
      {"expiry_buckets_dropped", s.expiry_buckets_dropped},
      {"expiry_bucket_records_dropped", s.expiry_bucket_records_dropped},
      {"memtable_bytes", s.memtable_bytes},
      {"block_cache_bytes", s.block_cache_bytes},
      {"table_reader_bytes", s.table_reader_bytes},
      {"bloom_filter_useful", s.bloom_filter_useful},
      {"bloom_filter_positive", s.bloom_filter_positive},
      {"data_blocks_read", s.data_blocks_read},
  };
  for (const auto& [key, value] : counts) {
    j.Key(key);
    j.Uint(value);
  }
  j.Key("write_amplification");
  j.Number(s.write_amplification);
  j.Key("dedupe_compaction_write_amplification");
  j.Number(s.dedupe_compaction_write_amplification);
  j.EndObject();
  out << j.str() << "\n";
}

// Which shards the figures cover: "all 4 (summed)", "2 of 4", "1".
std::string ShardsCovered(const Request& r) {
  if (r.shard.has_value()) {
    return absl::StrCat(*r.shard, " of ", r.shard_count);
  }
  return r.shard_count == 1
             ? "1"
             : absl::StrCat("all ", r.shard_count, " (figures summed)");
}

int RunStats(Engine& engine, const Request& r, std::ostream& out,
             std::ostream& err) {
  absl::StatusOr<Stats> stats = Target(engine, r).GetStats();
  if (!stats.ok()) return Fail(err, "reading stats", stats.status());
  const Stats& s = *stats;
  if (r.args.json) {
    PrintStatsJson(s, r, out);
    return kExitOk;
  }
  out << absl::StrFormat(
      "store                     %s\n"
      "shards                    %s\n"
      "estimated dedupe records  %d (live and expired, not yet compacted)\n"
      "expiry buckets            %d (dropped since opened: %d)\n"
      "outbox entries pending    %d\n"
      "live SST bytes            %d\n"
      "memory                    memtables %d, block cache %d, SST readers "
      "%d bytes\n"
      "counters since this idem-ctl opened the store:\n"
      "  processed %d, duplicates %d, failed %d, expired dropped %d\n"
      "  user bytes %d; written: WAL %d, flush %d, compaction %d\n",
      r.args.store, ShardsCovered(r), s.estimated_live_records,
      s.expiry_buckets, s.expiry_buckets_dropped, s.outbox_pending,
      s.live_sst_bytes, s.memtable_bytes, s.block_cache_bytes,
      s.table_reader_bytes, s.processed, s.duplicates, s.failed,
      s.expired_dropped, s.user_bytes, s.wal_bytes, s.flush_bytes,
      s.compaction_bytes);
  return kExitOk;
}

// A partition-scoped store keeps records per partition: Seen and Forget of
// an ID alone fail with kFailedPrecondition, which this line explains.
void HintPosition(const Request& r, const absl::Status& s, std::ostream& err) {
  if (absl::IsFailedPrecondition(s) && !r.position.has_value()) {
    err << "idem-ctl: name the message's partition with --source=S "
           "--partition=P (or --partition=S:P)\n";
  }
}

absl::StatusOr<bool> SeenAt(Engine& engine, const Request& r,
                            std::string_view id) {
  if (!r.position.has_value()) return engine.Seen(id);
  return engine.Seen(id, r.position->source, r.position->partition);
}

// The ID and, if given, its partition, as members of the innermost object.
void WriteIdJson(const Request& r, std::string_view id, JsonWriter& j) {
  j.Key("id");
  j.Bytes(id);
  if (r.position.has_value()) {
    j.Key("source");
    j.Bytes(r.position->source);
    j.Field("partition", r.position->partition);
  }
}

int RunSeen(Engine& engine, const Request& r, std::ostream& out,
            std::ostream& err) {
  const std::string& id = r.args.command[1];
  absl::StatusOr<bool> seen = SeenAt(engine, r, id);
  if (!seen.ok()) {
    const int code = Fail(err, "checking the ID", seen.status());
    HintPosition(r, seen.status(), err);
    return code;
  }
  if (r.args.json) {
    JsonWriter j;
    j.BeginObject();
    WriteIdJson(r, id, j);
    j.Field("seen", *seen);
    j.EndObject();
    out << j.str() << "\n";
  } else {
    out << (*seen ? "seen" : "not seen") << "\n";
  }
  return *seen ? kExitOk : kExitNotFound;
}

int RunForget(Engine& engine, const Request& r, std::ostream& out,
              std::ostream& err) {
  const std::string& id = r.args.command[1];
  absl::StatusOr<bool> was_seen = SeenAt(engine, r, id);
  if (!was_seen.ok()) {
    const int code = Fail(err, "checking the ID", was_seen.status());
    HintPosition(r, was_seen.status(), err);
    return code;
  }
  const absl::Status s =
      r.position.has_value()
          ? engine.Forget(id, r.position->source, r.position->partition)
          : engine.Forget(id);
  if (!s.ok()) return Fail(err, "forgetting the ID", s);
  if (r.args.json) {
    JsonWriter j;
    j.BeginObject();
    WriteIdJson(r, id, j);
    j.Field("forgotten", true);
    j.Field("was_seen", *was_seen);
    j.EndObject();
    out << j.str() << "\n";
  } else if (*was_seen) {
    out << "forgotten: its next delivery will run the handler again\n";
  } else {
    out << "not seen (nothing live to forget); any stored record removed\n";
  }
  return kExitOk;
}

int RunGet(Engine& engine, const Request& r, std::ostream& out,
           std::ostream& err) {
  const std::string& key = r.args.command[1];
  // A partition names its shard (Engine::GetState(source, partition, key)).
  absl::StatusOr<std::optional<std::string>> value =
      r.position.has_value()
          ? engine.GetState(r.position->source, r.position->partition, key)
          : Target(engine, r).GetState(key);
  if (!value.ok()) return Fail(err, "reading the state", value.status());
  if (r.args.json) {
    JsonWriter j;
    j.BeginObject();
    j.Key("key");
    j.Bytes(key);
    if (std::optional<int> shard = idemctl::TargetShard(engine, r)) {
      j.Field("shard", *shard);
    }
    j.Field("found", value->has_value());
    j.Key("value");
    if (value->has_value()) {
      j.Bytes(**value);
    } else {
      j.Null();
    }
    j.EndObject();
    out << j.str() << "\n";
  } else if (value->has_value()) {
    out << **value << "\n";  // the bytes as stored
  } else {
    err << "idem-ctl: no state value for that key\n";
  }
  return value->has_value() ? kExitOk : kExitNotFound;
}

int RunCompact(Engine& store, const Request& r, std::ostream& out,
               std::ostream& err) {
  Engine& engine = Target(store, r);
  absl::StatusOr<Stats> before = engine.GetStats();
  if (!before.ok()) return Fail(err, "reading stats", before.status());
  if (absl::Status s = engine.CompactExpired(); !s.ok()) {
    return Fail(err, "compacting", s);
  }
  absl::StatusOr<Stats> after = engine.GetStats();
  if (!after.ok()) return Fail(err, "reading stats", after.status());
  if (r.args.json) {
    JsonWriter j;
    j.BeginObject();
    j.Field("compacted", true);
    j.Field("expired_dropped", after->expired_dropped);
    j.Field("live_sst_bytes_before", before->live_sst_bytes);
    j.Field("live_sst_bytes_after", after->live_sst_bytes);
    j.EndObject();
    out << j.str() << "\n";
  } else {
    out << absl::StrFormat(
        "compacted: %d expired dedupe records dropped; live SST bytes %d -> "
        "%d\n",
        after->expired_dropped, before->live_sst_bytes, after->live_sst_bytes);
  }
  return kExitOk;
}

int RunCheckpoint(Engine& engine, const Request& r, std::ostream& out,
                  std::ostream& err) {
  const std::string& dir = r.args.command[1];
  if (absl::Status s = engine.Checkpoint(dir); !s.ok()) {
    return Fail(err, "writing the checkpoint", s);
  }
  if (r.args.json) {
    JsonWriter j;
    j.BeginObject();
    j.Key("checkpoint");
    j.Bytes(dir);
    j.EndObject();
    out << j.str() << "\n";
  } else {
    out << "checkpoint written to " << dir << "\n";
  }
  return kExitOk;
}

constexpr Command kCommands[] = {
    {"stats",
     {},
     "Store size figures and counters.",
     Access::kReadOnly,
     PositionFlags::kNone,
     ShardScope::kEach,
     nullptr,
     RunStats},
    {"seen",
     {"ID"},
     "Whether a live dedupe record exists for ID (exit 0: seen, 1: not "
     "seen); --source/--partition name its partition in a partition-scoped "
     "store.",
     Access::kReadOnly,
     PositionFlags::kOptional,
     ShardScope::kWhole,
     nullptr,
     RunSeen},
    {"forget",
     {"ID"},
     "Remove ID's dedupe record so its next delivery runs again "
     "(--source/--partition as for seen).",
     Access::kWritable,
     PositionFlags::kOptional,
     ShardScope::kWhole,
     nullptr,
     RunForget},
    {"get",
     {"KEY"},
     "The committed state value of KEY (exit 1: no value); in a sharded "
     "store, of --shard=N or of the partition's shard (--source/--partition).",
     Access::kReadOnly,
     PositionFlags::kShard,
     ShardScope::kOne,
     nullptr,
     RunGet},
    {"scan",
     {},
     "The committed state keys under --prefix (default: all) in key order, "
     "with their values; --limit=N, --reverse; in a sharded store, of one "
     "shard, as for get.",
     Access::kReadOnly,
     PositionFlags::kShard,
     ShardScope::kOne,
     PrepareScan,
     RunScan},
    {"offsets",
     {},
     "Every stored (source, partition, offset).",
     Access::kReadOnly,
     PositionFlags::kNone,
     ShardScope::kEach,
     nullptr,
     RunOffsets},
    {"set-offset",
     {"SOURCE", "PARTITION", "OFFSET"},
     "Rewind or advance the committed offset (a consumer resumes at OFFSET+1; "
     "state and dedupe records stay).",
     Access::kWritable,
     PositionFlags::kNone,
     ShardScope::kWhole,
     PrepareSetOffset,
     RunSetOffset},
    {"compact",
     {},
     "Flush and compact, dropping expired dedupe records.",
     Access::kWritable,
     PositionFlags::kNone,
     ShardScope::kEach,
     nullptr,
     RunCompact},
    {"checkpoint",
     {"DIR"},
     "Write a consistent copy of the store to DIR (must not exist).",
     Access::kWritable,
     PositionFlags::kNone,
     ShardScope::kWhole,
     nullptr,
     RunCheckpoint},
    {"dump",
     {},
     "Every dedupe record, state entry and offset as JSON lines.",
     Access::kReadOnly,
     PositionFlags::kNone,
     ShardScope::kEach,
     nullptr,
     RunDump},
    {"verify",
     {},
     "Decode every stored record; exit 0 if intact, 3 naming the damaged key.",
     Access::kReadOnly,
     PositionFlags::kNone,
     ShardScope::kEach,
     nullptr,
     RunVerify},
    {"metrics",
     {},
     "The store's figures in Prometheus' text exposition format (counters "
     "count from this idem-ctl's open, so read 0).",
     Access::kReadOnly,
     PositionFlags::kNone,
     ShardScope::kEach,
     PrepareMetrics,
     RunMetrics},
    {"export",
     {"FILE"},
     "Write one partition (--partition=SOURCE:P) to FILE (new) as JSON "
     "lines: its state, offset and dedupe records.",
     Access::kReadOnly,
     PositionFlags::kRequired,
     ShardScope::kWhole,
     nullptr,
     RunExport},
    {"import",
     {"FILE"},
     "Replace a partition's state, offset and records with an export's, in "
     "one commit.",
     Access::kWritable,
     PositionFlags::kNone,
     ShardScope::kWhole,
     PrepareImport,
     RunImport},
};

// Whether the store at `path` is partition-scoped (its column families
// include kPartitionScopeColumnFamily). A store whose families cannot be listed
// is taken as store-scoped: Engine::Open then says what is wrong with it.
bool IsPartitionScoped(const std::string& path) {
  std::vector<std::string> families;
  const rocksdb::Status s =
      rocksdb::DB::ListColumnFamilies(rocksdb::DBOptions(), path, &families);
  return s.ok() && std::find(families.begin(), families.end(),
                             kPartitionScopeColumnFamily) != families.end();
}

// How `command` opens the store at `path`: never creating it; read-only for
// inspection, which works on a store a consumer holds open; writable for
// changes, which need it alone and the store's own dedupe scope; with the
// store's shard count (a sharded store is partition-scoped).
absl::StatusOr<Options> OpenOptions(const Command& command,
                                    const std::string& path) {
  absl::StatusOr<int> shards = idemctl::StoreShardCount(path);
  if (!shards.ok()) return shards.status();
  Options options;
  options.create_if_missing = false;
  options.durability = Durability::kSync;
  options.read_only = command.access == Access::kReadOnly;
  options.shards = *shards;
  if (options.shards > 1 || (!options.read_only && IsPartitionScoped(path))) {
    options.dedupe_scope = DedupeScope::kPartition;
  }
  return options;
}

}  // namespace

const std::vector<IdemctlSubcommand>& IdemctlSubcommands() {
  static const std::vector<IdemctlSubcommand>* const subcommands = [] {
    auto* list = new std::vector<IdemctlSubcommand>;
    for (const Command& c : kCommands) {
      list->push_back(IdemctlSubcommand{
          c.name, {c.args.begin(), c.args.begin() + ArgCount(c)}, c.help});
    }
    return list;
  }();
  return *subcommands;
}

std::string IdemctlUsage() {
  return "Inspects and maintains an idem store. stats, seen, get, offsets, "
         "dump, verify,\nmetrics and export open it read-only (they work while "
         "a "
         "consumer holds it, seeing\nits commits as of that moment); forget, "
         "set-offset, compact, checkpoint and\nimport need it not to be open "
         "elsewhere. The store is never created. dump and\nexport write JSON "
         "lines; bytes are JSON strings with one code point per byte\n"
         "(non-printable bytes as \\u00XX; decode as Latin-1).\n"
         "\n"
         "Usage: idem-ctl --store=PATH [--json] SUBCOMMAND [ARG...]\n"
         "  stats | seen ID | forget ID | get KEY | offsets\n"
         "  | scan [--prefix=P] [--limit=N] [--reverse]\n"
         "  | set-offset SOURCE PARTITION OFFSET | compact | checkpoint DIR\n"
         "  | dump | verify | metrics | export --partition=SOURCE:P FILE\n"
         "  | import FILE\n"
         "In a partition-scoped store seen and forget need the message's\n"
         "partition: --source=S --partition=P (or --partition=S:P).\n"
         "In a sharded store get and scan read one shard: --shard=N, or the\n"
         "partition's (--source=S --partition=P); stats, offsets, compact, "
         "dump,\nverify and metrics cover every shard, or --shard=N alone.\n"
         "\n"
         "Exit codes: 0 success (seen: the ID was seen), 1 not found (seen: "
         "the ID was\nnot seen; get: KEY has no value; export: nothing stored "
         "for the partition),\n2 bad command line (flag, subcommand or "
         "argument), 3 failure (store missing or\nopen elsewhere, I/O error, "
         "damage found by verify, a malformed import file).";
}

int RunIdemctl(const IdemctlArgs& args, std::ostream& out, std::ostream& err) {
  if (args.store.empty()) return UsageError(err, "--store=PATH is required");
  if (args.command.empty()) return UsageError(err, "no subcommand given");
  const Command* command = nullptr;
  for (const Command& c : kCommands) {
    if (c.name == args.command[0]) command = &c;
  }
  if (command == nullptr) {
    return UsageError(
        err, absl::StrCat("unknown subcommand '", args.command[0], "'"));
  }
  const std::string name(command->name);
  const size_t want_args = ArgCount(*command);
  if (args.command.size() != want_args + 1) {
    if (want_args == 0) {
      return UsageError(err, absl::StrCat("'", name, "' takes no arguments"));
    }
    if (want_args == 1) {
      return UsageError(
          err, absl::StrCat("'", name, "' takes exactly one argument, ",
                            std::string(command->args[0])));
    }
    return UsageError(
        err,
        absl::StrCat(
            "'", name, "' takes ", want_args, " arguments, ",
            absl::StrJoin(
                command->args.begin(), command->args.begin() + want_args, " ",
                [](std::string* out, std::string_view a) { out->append(a); })));
  }
  for (size_t i = 0; i < want_args; ++i) {
    const std::string_view arg_name = command->args[i];
    const std::string& arg = args.command[i + 1];
    if (arg_name == "ID" && (arg.empty() || arg.size() > kMaxIdBytes)) {
      return UsageError(
          err, absl::StrCat("ID must be 1 to ", kMaxIdBytes, " bytes long"));
    }
    if ((arg_name == "DIR" || arg_name == "FILE") && arg.empty()) {
      return UsageError(
          err, absl::StrCat(std::string(arg_name), " must not be empty"));
    }
  }
  if (name != "scan" &&
      (args.prefix.has_value() || args.limit.has_value() || args.reverse)) {
    return UsageError(err, absl::StrCat("--prefix, --limit and --reverse are "
                                        "for scan, not '",
                                        name, "'"));
  }
  Request request(args);
  if (std::optional<int> code = ParsePositionFlags(*command, request, err)) {
    return *code;
  }
  if (std::optional<int> code =
          PrepareShard(request, name, command->shards, err)) {
    return *code;
  }
  if (command->prepare != nullptr) {
    if (std::optional<int> code = command->prepare(request, err)) return *code;
  }

  absl::StatusOr<Options> options = OpenOptions(*command, args.store);
  if (!options.ok()) {
    return Fail(err, absl::StrCat("reading the store at '", args.store, "'"),
                options.status());
  }
  absl::StatusOr<std::unique_ptr<Engine>> engine =
      Engine::Open(args.store, *options);
  if (!engine.ok()) {
    std::string what = absl::StrCat("cannot open store at '", args.store, "'");
    if (absl::IsNotFound(engine.status())) {
      absl::StrAppend(&what, " (idem-ctl never creates a store)");
    } else if (!options->read_only &&
               absl::IsFailedPrecondition(engine.status()) &&
               (absl::StrContains(engine.status().message(), "lock") ||
                absl::StrContains(engine.status().message(),
                                  "open in another writable engine"))) {
      absl::StrAppend(&what, " (it is open elsewhere: '", name,
                      "' changes the store and needs it alone; stop the "
                      "process that holds it first)");
    }
    return Fail(err, what, engine.status());
  }
  // Where an ID alone names no record, a missing partition is a mistake in
  // the command line, not a failure of the store.
  if (command->position == PositionFlags::kOptional &&
      !request.position.has_value() &&
      (*engine)->options().dedupe_scope == DedupeScope::kPartition) {
    return UsageError(
        err, absl::StrCat("'", name,
                          "' on a partition-scoped store needs the message's "
                          "partition: --source=S --partition=P (or "
                          "--partition=S:P)"));
  }
  if (std::optional<int> code =
          CheckShard(**engine, name, command->shards, request, err)) {
    return *code;
  }
  return command->run(**engine, request, out, err);
}

}  // namespace idem::cli
