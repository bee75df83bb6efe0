// How merges are stored and folded in the state column family: each operand
// is one RocksDB merge operand, tagged with its operator (StoredOperand),
// and StateMergeOperator folds them for reads and compactions with
// ApplyMerge (idem/merge.h).
//
// The operator is total: an operand that does not decode (an unknown tag,
// a wrong size) is skipped, never an error, so a compaction never stalls
// on one. PendingMerges is a key's merges not yet folded into a value,
// kept as short as folding allows: adjacent operands of one operator are
// combined (additions summed, appends joined), which is what makes them
// cheap to hold in memory and to write.
//
// Expiry (engine/state_value.h). In a store of format 6 every operand
// carries the engine time of its commit, so a fold gives the same value
// whenever it runs: an operand written while the value it folds onto was
// live joins that value and keeps its expiry; one written at or after that
// expiry starts from an absent value (without expiry). An operand written
// with an expiry (a merge under Options::state_ttl) then sets it. Reads
// hide the folded value once its expiry has passed, as any other.
//
// StateMergeOperator is thread-safe; PendingMerges is a
// value type, not thread-safe.

#ifndef IDEM_ENGINE_MERGE_OPERATOR_H_
#define IDEM_ENGINE_MERGE_OPERATOR_H_

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "engine/state_value.h"
#include "idem/merge.h"
#include "rocksdb/merge_operator.h"

namespace idem {

// The stored form of a merge operand: one tag byte (the MergeOp), then the
// operand. In format 6 the tag's high bits add fields between tag and
// operand, each a fixed64 LE: kOperandExpiryFlag the expiry it sets, then
// kOperandWrittenFlag the engine time of its commit.
inline constexpr uint8_t kOperandExpiryFlag = 0x80;
inline constexpr uint8_t kOperandWrittenFlag = 0x40;
std::string StoredOperand(MergeOp op, std::string_view operand,
                          std::optional<int64_t> expires_micros = {},
                          std::optional<int64_t> written_micros = {});

// A stored operand, decoded.
struct ParsedOperand {
  MergeOp op;
  std::string_view operand;
  std::optional<int64_t> expires_micros;  // set: the folded value's expiry
  std::optional<int64_t> written_micros;  // unset: before format 6
};

// The operator, operand and expiry of a stored operand; nullopt if it does
// not decode.
std::optional<ParsedOperand> ParseStoredOperand(std::string_view stored);

// A value folded operand by operand exactly as repeated ApplyMerge calls
// fold it (value = ApplyMerge(value, op, operand)), but without encoding an
// int64 between operands or copying the value at each: the one fold of the
// reads (PendingMerges::FoldOnto) and of the state family's merge operator.
// A value type, not thread-safe.
class MergeFold {
 public:
  // Starts from `base` (nullopt: absent).
  explicit MergeFold(std::optional<std::string_view> base);
  // Folds in one operand, as ApplyMerge does (an invalid one keeps the
  // value, an absent one becoming empty).
  void Apply(MergeOp op, std::string_view operand);
  // The value is absent again (an expired base, say).
  void Reset() { state_ = State::kAbsent; }
  // The folded value (nullopt: absent). The fold is left absent.
  std::optional<std::string> Take();
  // The folded value (nullopt: absent) without a copy: valid until the
  // fold's next call or its end.
  std::optional<std::string_view> View();

 private:
  enum class State : uint8_t { kAbsent, kInt, kBytes };
  // The value as an int64, as ApplyMerge reads a base that is one: any
  // other bytes as 0.
  int64_t AsInt() const;

  State state_ = State::kAbsent;
  int64_t int_ = 0;    // kInt
  std::string bytes_;  // kBytes
  char int_bytes_[8];  // View() of a kInt
};

// A key's merges, oldest first, not yet folded into a value.
class PendingMerges {
 public:
  // Adds a later merge; with `expires_micros`, it sets the folded value's
  // expiry; `written_micros`, the engine time of its commit, is kept for
  // the stored operands (all merges of one PendingMerges are of one
  // commit). REQUIRES: ValidateMerge(op, operand) is OK.
  void Add(MergeOp op, std::string_view operand,
           std::optional<int64_t> expires_micros = {},
           std::optional<int64_t> written_micros = {});
  // Adds `later`'s merges after these.
  void Append(const PendingMerges& later);

  // `base` (nullopt: absent) with every merge folded in, oldest first.
  std::string FoldOnto(std::optional<std::string_view> base) const;

  bool empty() const { return operands_.empty(); }
  // The expiry the latest merge that set one gave (nullopt: the folded
  // value keeps its base's expiry).
  std::optional<int64_t> expiry() const { return expiry_; }
  // The engine time of the merges' commit, if known.
  std::optional<int64_t> written() const { return written_; }
  // Each merge as (operator, operand), oldest first.
  const std::vector<std::pair<MergeOp, std::string>>& operands() const {
    return operands_;
  }

 private:
  std::vector<std::pair<MergeOp, std::string>> operands_;
  std::optional<int64_t> expiry_;
  std::optional<int64_t> written_;
};

// The merge operator of the state column family. With `context`, it reads
// and writes envelopes once the store is of format 6; without, every value
// is raw. It reads no clock: a fold depends on its inputs only.
std::shared_ptr<rocksdb::MergeOperator> NewStateMergeOperator(
    std::shared_ptr<const StateTtlContext> context = nullptr);

}  // namespace idem

#endif  // IDEM_ENGINE_MERGE_OPERATOR_H_
