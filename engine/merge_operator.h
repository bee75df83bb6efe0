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
// StateMergeOperator is stateless and thread-safe; PendingMerges is a
// value type, not thread-safe.

#ifndef IDEM_ENGINE_MERGE_OPERATOR_H_
#define IDEM_ENGINE_MERGE_OPERATOR_H_

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "idem/merge.h"
#include "rocksdb/merge_operator.h"

namespace idem {

// The stored form of a merge operand: one tag byte (the MergeOp), then the
// operand.
std::string StoredOperand(MergeOp op, std::string_view operand);

// The operator and operand of a stored operand; nullopt if it does not
// decode.
std::optional<std::pair<MergeOp, std::string_view>> ParseStoredOperand(
    std::string_view stored);

// A key's merges, oldest first, not yet folded into a value.
class PendingMerges {
 public:
  // Adds a later merge. REQUIRES: ValidateMerge(op, operand) is OK.
  void Add(MergeOp op, std::string_view operand);
  // Adds `later`'s merges after these.
  void Append(const PendingMerges& later);

  // `base` (nullopt: absent) with every merge folded in, oldest first.
  std::string FoldOnto(std::optional<std::string_view> base) const;

  bool empty() const { return operands_.empty(); }
  // Each merge as (operator, operand), oldest first.
  const std::vector<std::pair<MergeOp, std::string>>& operands() const {
    return operands_;
  }

 private:
  std::vector<std::pair<MergeOp, std::string>> operands_;
};

// The merge operator of the state column family.
std::shared_ptr<rocksdb::MergeOperator> NewStateMergeOperator();

}  // namespace idem

#endif  // IDEM_ENGINE_MERGE_OPERATOR_H_
