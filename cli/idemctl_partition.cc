// idem-ctl's subcommands that read or move one partition's position and
// state: offsets, set-offset, export and import (see cli/idemctl.h).

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "cli/idemctl.h"
#include "cli/idemctl_request.h"
#include "cli/partition_file.h"
#include "idem/engine.h"
#include "idem/message.h"
#include "idem/partition_snapshot.h"
#include "idem/stats.h"
#include "util/json_writer.h"

namespace idem::cli::idemctl {
namespace {

using util::JsonWriter;

// The counts of an export or import, as members of the innermost object or
// as text.
void WriteSnapshotJson(const PartitionSnapshot& s, JsonWriter& j) {
  j.Key("source");
  j.Bytes(s.source);
  j.Field("partition", s.partition);
  j.Field("offset", s.offset);
  j.Field("state_entries", s.entries.size());
  j.Field("dedupe_records", s.records.size());
}

std::string SnapshotText(const PartitionSnapshot& s) {
  return absl::StrCat(PositionName(s.source, s.partition), ": offset ",
                      s.offset.has_value() ? absl::StrCat(*s.offset) : "(none)",
                      ", ", s.entries.size(), " state entries, ",
                      s.records.size(), " dedupe records");
}

}  // namespace

int RunOffsets(Engine& engine, const Request& r, std::ostream& out,
               std::ostream& err) {
  std::vector<DumpEntry> offsets;
  absl::Status s = Target(engine, r).Dump([&offsets](const DumpEntry& e) {
    if (e.kind == DumpEntry::Kind::kOffset) offsets.push_back(e);
    return absl::OkStatus();
  });
  if (!s.ok()) return Fail(err, "reading the offsets", s);
  if (r.args.json) {
    JsonWriter j;
    j.BeginObject();
    j.Key("offsets");
    j.BeginArray();
    for (const DumpEntry& e : offsets) {
      j.BeginObject();
      j.Key("source");
      j.Bytes(e.source);
      j.Field("partition", e.partition);
      j.Field("offset", e.offset);
      j.EndObject();
    }
    j.EndArray();
    j.EndObject();
    out << j.str() << "\n";
    return kExitOk;
  }
  if (offsets.empty()) out << "no offsets stored\n";
  for (const DumpEntry& e : offsets) {
    // Engines refuse to store INT64_MAX (or a negative offset); a store
    // written before they did may still hold one.
    out << PositionName(e.source, e.partition) << " " << e.offset
        << (e.offset >= 0 && e.offset < std::numeric_limits<int64_t>::max()
                ? absl::StrCat(" (a consumer resumes at ", e.offset + 1, ")")
                : std::string(" (not a valid offset: set another with "
                              "set-offset)"))
        << "\n";
  }
  return kExitOk;
}

std::optional<int> PrepareSetOffset(Request& request, std::ostream& err) {
  const std::vector<std::string>& command = request.args.command;
  Position position;
  position.source = command[1];
  if (position.source.empty() || position.source.size() > kMaxSourceBytes) {
    return UsageError(err, absl::StrCat("SOURCE must be 1 to ", kMaxSourceBytes,
                                        " bytes long"));
  }
  std::optional<int32_t> partition = ParsePartition(command[2]);
  if (!partition.has_value()) {
    return UsageError(err, absl::StrCat("PARTITION: '", command[2],
                                        "' is not a partition number (0 or "
                                        "more)"));
  }
  position.partition = *partition;
  std::optional<int64_t> offset =
      ParseNonNegative(command[3], std::numeric_limits<int64_t>::max() - 1);
  if (!offset.has_value()) {
    return UsageError(
        err, absl::StrCat("OFFSET: '", command[3], "' is not an offset (0 to ",
                          std::numeric_limits<int64_t>::max() - 1, ")"));
  }
  request.position = std::move(position);
  request.offset = *offset;
  return std::nullopt;
}

int RunSetOffset(Engine& engine, const Request& r, std::ostream& out,
                 std::ostream& err) {
  const Position& p = *r.position;
  absl::StatusOr<std::optional<int64_t>> previous =
      engine.CommittedOffset(p.source, p.partition);
  if (!previous.ok()) return Fail(err, "reading the offset", previous.status());
  if (absl::Status s =
          engine.SetCommittedOffset(p.source, p.partition, r.offset);
      !s.ok()) {
    return Fail(err, "setting the offset", s);
  }
  if (r.args.json) {
    JsonWriter j;
    j.BeginObject();
    j.Key("source");
    j.Bytes(p.source);
    j.Field("partition", p.partition);
    j.Field("previous_offset", *previous);
    j.Field("offset", r.offset);
    j.Field("resumes_at", r.offset + 1);
    j.EndObject();
    out << j.str() << "\n";
  } else {
    out << PositionName(p.source, p.partition) << ": offset "
        << (previous->has_value() ? absl::StrCat(**previous) : "(none)")
        << " -> " << r.offset << "; a consumer resumes at " << r.offset + 1
        << ". State and dedupe records are unchanged: messages replayed "
           "within the dedupe window are duplicates unless forgotten.\n";
  }
  return kExitOk;
}

int RunExport(Engine& engine, const Request& r, std::ostream& out,
              std::ostream& err) {
  const std::string& file = r.args.command[1];
  absl::StatusOr<PartitionSnapshot> snapshot =
      engine.ExportPartition(r.position->source, r.position->partition);
  if (!snapshot.ok()) {
    return Fail(err, "exporting the partition", snapshot.status());
  }
  if (!snapshot->offset.has_value() && snapshot->entries.empty() &&
      snapshot->records.empty()) {
    // Importing an empty export would clear the partition: more likely a
    // mistyped source or partition than what was meant.
    err << "idem-ctl: nothing stored for "
        << PositionName(snapshot->source, snapshot->partition)
        << " (no offset, state or dedupe records); nothing written\n";
    return kExitNotFound;
  }
  if (absl::Status s = WritePartitionFile(*snapshot, file); !s.ok()) {
    return Fail(err, "writing the export", s);
  }
  if (r.args.json) {
    JsonWriter j;
    j.BeginObject();
    j.Key("export");
    j.Bytes(file);
    WriteSnapshotJson(*snapshot, j);
    j.EndObject();
    out << j.str() << "\n";
  } else {
    out << "exported " << SnapshotText(*snapshot) << " to " << file << "\n";
  }
  return kExitOk;
}

std::optional<int> PrepareImport(Request& request, std::ostream& err) {
  absl::StatusOr<PartitionSnapshot> snapshot =
      ReadPartitionFile(request.args.command[1]);
  if (!snapshot.ok()) {
    return Fail(err, "reading the import file (nothing imported)",
                snapshot.status());
  }
  request.snapshot = *std::move(snapshot);
  return std::nullopt;
}

int RunImport(Engine& engine, const Request& r, std::ostream& out,
              std::ostream& err) {
  const std::string& file = r.args.command[1];
  if (absl::Status s = engine.ImportPartition(r.snapshot); !s.ok()) {
    return Fail(err, "importing (nothing imported)", s);
  }
  // An import is deduplicated: a repeat of one already committed writes
  // nothing and counts as a duplicate.
  absl::StatusOr<Stats> stats = engine.GetStats();
  if (!stats.ok()) return Fail(err, "reading stats", stats.status());
  const bool repeat = stats->duplicates > 0;
  if (r.args.json) {
    JsonWriter j;
    j.BeginObject();
    j.Key("import");
    j.Bytes(file);
    WriteSnapshotJson(r.snapshot, j);
    j.Field("already_imported", repeat);
    j.EndObject();
    out << j.str() << "\n";
  } else if (repeat) {
    out << "already imported: " << SnapshotText(r.snapshot) << " from " << file
        << " (nothing written)\n";
  } else {
    out << "imported " << SnapshotText(r.snapshot) << " from " << file << "\n";
  }
  return kExitOk;
}

}  // namespace idem::cli::idemctl
