#include "cli/idemctl.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "idem/engine.h"
#include "idem/message.h"
#include "idem/options.h"
#include "idem/stats.h"
#include "util/json_writer.h"

namespace idem::cli {
namespace {

using util::JsonWriter;

constexpr char kHint[] = "Run 'idem-ctl --help' for usage.";

// One subcommand: its name, how many arguments it takes and its runner.
struct Command {
  std::string_view name;
  std::string_view arg_name;  // empty: takes no argument
  int (*run)(Engine& engine, const IdemctlArgs& args, std::ostream& out,
             std::ostream& err);
};

int Fail(std::ostream& err, std::string_view what, const absl::Status& s) {
  err << "idem-ctl: " << what << ": " << s.ToString() << "\n";
  return kExitStoreFailure;
}

int UsageError(std::ostream& err, std::string_view message) {
  err << "idem-ctl: " << message << "\n" << kHint << "\n";
  return kExitUsage;
}

std::string FormatUtc(absl::Time t) {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%E6SZ", t, absl::UTCTimeZone());
}

void PrintStatsJson(const Stats& s, std::ostream& out) {
  JsonWriter j;
  j.BeginObject();
  const std::pair<const char*, uint64_t> counts[] = {
      {"processed", s.processed},
      {"duplicates", s.duplicates},
      {"failed", s.failed},
      {"expired_dropped", s.expired_dropped},
      {"outbox_pending", s.outbox_pending},
      {"outbox_emitted", s.outbox_emitted},
      {"outbox_acknowledged", s.outbox_acknowledged},
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

int RunStats(Engine& engine, const IdemctlArgs& args, std::ostream& out,
             std::ostream& err) {
  absl::StatusOr<Stats> stats = engine.GetStats();
  if (!stats.ok()) return Fail(err, "reading stats", stats.status());
  const Stats& s = *stats;
  if (args.json) {
    PrintStatsJson(s, out);
    return kExitOk;
  }
  out << absl::StrFormat(
      "store                     %s\n"
      "estimated dedupe records  %d (live and expired, not yet compacted)\n"
      "expiry buckets            %d (dropped since opened: %d)\n"
      "outbox entries pending    %d\n"
      "live SST bytes            %d\n"
      "memory                    memtables %d, block cache %d, SST readers "
      "%d bytes\n"
      "counters since this idem-ctl opened the store:\n"
      "  processed %d, duplicates %d, failed %d, expired dropped %d\n"
      "  user bytes %d; written: WAL %d, flush %d, compaction %d\n",
      args.store, s.estimated_live_records, s.expiry_buckets,
      s.expiry_buckets_dropped, s.outbox_pending, s.live_sst_bytes,
      s.memtable_bytes, s.block_cache_bytes, s.table_reader_bytes, s.processed,
      s.duplicates, s.failed, s.expired_dropped, s.user_bytes, s.wal_bytes,
      s.flush_bytes, s.compaction_bytes);
  return kExitOk;
}

int RunSeen(Engine& engine, const IdemctlArgs& args, std::ostream& out,
            std::ostream& err) {
  const std::string& id = args.command[1];
  absl::StatusOr<bool> seen = engine.Seen(id);
  if (!seen.ok()) return Fail(err, "checking the ID", seen.status());
  if (args.json) {
    JsonWriter j;
    j.BeginObject();
    j.Key("id");
    j.Bytes(id);
    j.Field("seen", *seen);
    j.EndObject();
    out << j.str() << "\n";
  } else {
    out << (*seen ? "seen" : "not seen") << "\n";
  }
  return *seen ? kExitOk : kExitNotSeen;
}

int RunForget(Engine& engine, const IdemctlArgs& args, std::ostream& out,
              std::ostream& err) {
  const std::string& id = args.command[1];
  absl::StatusOr<bool> was_seen = engine.Seen(id);
  if (!was_seen.ok()) return Fail(err, "checking the ID", was_seen.status());
  if (absl::Status s = engine.Forget(id); !s.ok()) {
    return Fail(err, "forgetting the ID", s);
  }
  if (args.json) {
    JsonWriter j;
    j.BeginObject();
    j.Key("id");
    j.Bytes(id);
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

int RunCompact(Engine& engine, const IdemctlArgs& args, std::ostream& out,
               std::ostream& err) {
  absl::StatusOr<Stats> before = engine.GetStats();
  if (!before.ok()) return Fail(err, "reading stats", before.status());
  if (absl::Status s = engine.CompactExpired(); !s.ok()) {
    return Fail(err, "compacting", s);
  }
  absl::StatusOr<Stats> after = engine.GetStats();
  if (!after.ok()) return Fail(err, "reading stats", after.status());
  if (args.json) {
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

int RunCheckpoint(Engine& engine, const IdemctlArgs& args, std::ostream& out,
                  std::ostream& err) {
  const std::string& dir = args.command[1];
  if (absl::Status s = engine.Checkpoint(dir); !s.ok()) {
    return Fail(err, "writing the checkpoint", s);
  }
  if (args.json) {
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

// One line of `dump`: the entry as a JSON object; keys, values and results
// as byte strings (JsonQuoteBytes).
std::string DumpEntryJson(const DumpEntry& e) {
  JsonWriter j;
  j.BeginObject();
  switch (e.kind) {
    case DumpEntry::Kind::kDedupe:
      j.Field("kind", "dedupe");
      j.Key("key");
      j.Bytes(e.key);
      j.Key("result");
      j.Bytes(e.value);
      j.Field("expires_at", FormatUtc(e.expires_at));
      j.Field("expires_at_unix_micros", absl::ToUnixMicros(e.expires_at));
      j.Field("expired", e.expired);
      if (!e.source.empty() || e.partition != 0) {  // partition-scoped
        j.Key("source");
        j.Bytes(e.source);
        j.Field("partition", e.partition);
      }
      break;
    case DumpEntry::Kind::kState:
      j.Field("kind", "state");
      j.Key("key");
      j.Bytes(e.key);
      j.Key("value");
      j.Bytes(e.value);
      break;
    case DumpEntry::Kind::kOffset:
      j.Field("kind", "offset");
      j.Key("source");
      j.Bytes(e.key);
      j.Field("partition", e.partition);
      j.Field("offset", e.offset);
      break;
    case DumpEntry::Kind::kOutbox:
      j.Field("kind", "outbox");
      j.Field("position", e.position);
      j.Key("message_id");
      j.Bytes(e.message_id);
      j.Key("destination");
      j.Bytes(e.destination);
      j.Key("key");
      j.Bytes(e.key);
      j.Key("value");
      j.Bytes(e.value);
      j.Key("headers");
      j.BeginArray();
      for (const auto& [name, value] : e.headers) {
        j.BeginArray();
        j.Bytes(name);
        j.Bytes(value);
        j.EndArray();
      }
      j.EndArray();
      break;
  }
  j.EndObject();
  return j.str();
}

int RunDump(Engine& engine, const IdemctlArgs& /*args*/, std::ostream& out,
            std::ostream& err) {
  absl::Status s = engine.Dump([&out](const DumpEntry& e) {
    out << DumpEntryJson(e) << "\n";
    return out.good() ? absl::OkStatus()
                      : absl::UnavailableError("output stream failed");
  });
  if (!s.ok()) return Fail(err, "dumping the store", s);
  return kExitOk;
}

constexpr Command kCommands[] = {
    {"stats", "", RunStats},
    {"seen", "ID", RunSeen},
    {"forget", "ID", RunForget},
    {"compact", "", RunCompact},
    {"checkpoint", "DIR", RunCheckpoint},
    {"dump", "", RunDump},
};

}  // namespace

std::string IdemctlUsage() {
  return "Inspects and maintains an idem store. stats, seen and dump open it "
         "read-only\n(they work while a consumer holds it, seeing its commits "
         "as of that moment);\nforget, compact and checkpoint need it not to "
         "be open elsewhere. The store is\nnever created. dump writes every "
         "dedupe record, state entry and offset as JSON\nlines; bytes are "
         "JSON strings with one code point per byte (non-printable\nbytes as "
         "\\u00XX; decode as Latin-1).\n"
         "\n"
         "Usage: idem-ctl --store=PATH [--json] SUBCOMMAND [ARG]\n"
         "  stats | seen ID | forget ID | compact | checkpoint DIR | dump\n"
         "\n"
         "Exit codes: 0 success (seen: the ID was seen), 1 seen: the ID was "
         "not seen,\n2 bad command line (flag, subcommand or argument), "
         "3 failure (store missing,\nI/O error, ...).";
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
  const size_t want_args = command->arg_name.empty() ? 0 : 1;
  if (args.command.size() != want_args + 1) {
    std::string expected = want_args == 0
                               ? absl::StrCat("'", std::string(command->name),
                                              "' takes no arguments")
                               : absl::StrCat("'", std::string(command->name),
                                              "' takes exactly one argument, ",
                                              std::string(command->arg_name));
    return UsageError(err, expected);
  }
  if (command->arg_name == "ID" &&
      (args.command[1].empty() || args.command[1].size() > kMaxIdBytes)) {
    return UsageError(
        err, absl::StrCat("ID must be 1 to ", kMaxIdBytes, " bytes long"));
  }
  if (command->arg_name == "DIR" && args.command[1].empty()) {
    return UsageError(err, "DIR must not be empty");
  }

  Options options;
  options.create_if_missing = false;
  options.durability = Durability::kSync;
  // Inspection works on a store a consumer holds open; changes need it alone.
  options.read_only = command->run == RunStats || command->run == RunSeen ||
                      command->run == RunDump;
  absl::StatusOr<std::unique_ptr<Engine>> engine =
      Engine::Open(args.store, options);
  if (!engine.ok()) {
    std::string what = absl::StrCat("cannot open store at '", args.store, "'");
    if (absl::IsNotFound(engine.status())) {
      absl::StrAppend(&what, " (idem-ctl never creates a store)");
    }
    return Fail(err, what, engine.status());
  }
  return command->run(**engine, args, out, err);
}

}  // namespace idem::cli
