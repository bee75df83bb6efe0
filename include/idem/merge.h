// Merges: blind writes that fold an operand into a state key's value
// (Txn::Merge), and the built-in operators that fold them.
//
// A merge never reads: merges of one key from concurrent handlers never
// conflict, and the engine folds them when the key is read (a Get, a scan,
// Engine::GetState) or compacted. Each operator is total: it never fails,
// so a compaction can always fold what it finds.
//
// Encodings (the operand a handler passes, and the value a read returns):
//   kAddInt64, kMaxInt64, kMinInt64: the operand is exactly 8 bytes, a
//     little-endian two's-complement int64 (Int64Operand writes one); the
//     folded value is 8 bytes of the same encoding (ReadInt64 reads one).
//     Addition wraps around on overflow (two's complement). An absent value
//     folds as the operand alone (for kAddInt64: 0 + operand); a value that
//     is not 8 bytes (written by Put, say) folds as 0.
//   kAppend: the operand is any bytes, appended to the value (an absent
//     value is empty).
// Operators mixed on one key apply in commit order, each to the result of
// the one before.
//
// Free functions; all thread-safe.

#ifndef IDEM_MERGE_H_
#define IDEM_MERGE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"

namespace idem {

// A built-in merge operator. The values are stored with every merge
// operand: they never change.
enum class MergeOp : uint8_t {
  kAddInt64 = 1,
  kMaxInt64 = 2,
  kMinInt64 = 3,
  kAppend = 4,
};

// The 8-byte little-endian operand of `v` for the int64 operators.
std::string Int64Operand(int64_t v);

// The int64 a folded int64 value holds; nullopt unless `value` is 8 bytes.
std::optional<int64_t> ReadInt64(std::string_view value);

// OK if `op` is a built-in operator and `operand` fits it (8 bytes for the
// int64 operators); kInvalidArgument naming the problem otherwise.
absl::Status ValidateMerge(MergeOp op, std::string_view operand);

// `base` (nullopt: absent) with `operand` folded in by `op`, as the engine
// folds it. REQUIRES: ValidateMerge(op, operand) is OK; otherwise `base` is
// returned unchanged (or empty if absent).
std::string ApplyMerge(std::optional<std::string_view> base, MergeOp op,
                       std::string_view operand);

}  // namespace idem

#endif  // IDEM_MERGE_H_
