// The file idem-ctl's `export` writes and `import` reads: one partition
// (idem::PartitionSnapshot, idem/partition_snapshot.h) as JSON lines, in the
// format cli/idemctl.h describes: a "partition" line first, then one "state"
// line per state entry and one "dedupe" line per dedupe record, the
// partition's stream time ("stream_time", if it has one) and one "timer"
// line per timer, and an "end" line counting the state entries and dedupe
// records, so that a truncated file is refused. Byte strings use
// util::JsonWriter::Bytes's one-code-point-per-byte convention, read back
// exactly. Functions here are thread-compatible: concurrent calls need
// distinct files.

#ifndef IDEM_CLI_PARTITION_FILE_H_
#define IDEM_CLI_PARTITION_FILE_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "idem/partition_snapshot.h"

namespace idem::cli {

// The longest line the file may have, in bytes: 64 MiB, so that reading a
// file takes bounded memory. Byte strings take up to six bytes per byte
// ("\u00ff"), so a state value or result of about 10 MiB fits.
inline constexpr size_t kMaxPartitionFileLineBytes = size_t{64} << 20;

// Writes `snapshot` to a new file at `path`. kAlreadyExists, writing
// nothing, if `path` exists; kInvalidArgument, writing nothing, if a line
// would be longer than kMaxPartitionFileLineBytes (ReadPartitionFile would
// refuse it); kUnavailable if the file cannot be created or written (what
// was written is then removed).
absl::Status WritePartitionFile(const PartitionSnapshot& snapshot,
                                const std::string& path);

// Reads a file WritePartitionFile wrote. kInvalidArgument for a malformed
// file, with a message naming the path and line: a line longer than
// kMaxPartitionFileLineBytes (read no further), a line that is not a JSON
// object, an unknown kind or member, a member given twice, a missing
// member, a value of the wrong
// type or out of range, a string with a code point above U+00FF, a first
// line that is not the "partition" line, or a missing, misplaced or
// miscounting "end" line. kNotFound if it cannot be opened, kUnavailable if
// reading fails.
absl::StatusOr<PartitionSnapshot> ReadPartitionFile(const std::string& path);

}  // namespace idem::cli

#endif  // IDEM_CLI_PARTITION_FILE_H_
