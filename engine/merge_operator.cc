#include "engine/merge_operator.h"

#include <string>

namespace idem {

std::string StoredOperand(MergeOp op, std::string_view operand) {
  std::string stored;
  stored.reserve(1 + operand.size());
  stored.push_back(static_cast<char>(op));
  stored.append(operand);
  return stored;
}

std::optional<std::pair<MergeOp, std::string_view>> ParseStoredOperand(
    std::string_view stored) {
  if (stored.empty()) return std::nullopt;
  const auto op = static_cast<MergeOp>(static_cast<uint8_t>(stored[0]));
  const std::string_view operand = stored.substr(1);
  if (!ValidateMerge(op, operand).ok()) return std::nullopt;
  return std::make_pair(op, operand);
}

void PendingMerges::Add(MergeOp op, std::string_view operand) {
  if (!operands_.empty() && operands_.back().first == op) {
    // One operator folds its operands together: the sum of the additions,
    // the max of the maxima, the appends joined. An absent base makes
    // ApplyMerge return the operand, as the fold needs.
    std::string& last = operands_.back().second;
    last = ApplyMerge(last, op, operand);
    return;
  }
  operands_.emplace_back(op, std::string(operand));
}

void PendingMerges::Append(const PendingMerges& later) {
  for (const auto& [op, operand] : later.operands_) Add(op, operand);
}

std::string PendingMerges::FoldOnto(
    std::optional<std::string_view> base) const {
  std::optional<std::string> value;
  if (base.has_value()) value.emplace(*base);
  for (const auto& [op, operand] : operands_) {
    value = ApplyMerge(value, op, operand);
  }
  return value.value_or(std::string());
}

namespace {

class StateMergeOperator final : public rocksdb::MergeOperator {
 public:
  const char* Name() const override { return "idem.state.merge.1"; }

  bool FullMergeV2(const MergeOperationInput& in,
                   MergeOperationOutput* out) const override {
    std::optional<std::string> value;
    if (in.existing_value != nullptr) {
      value.emplace(in.existing_value->data(), in.existing_value->size());
    }
    for (const rocksdb::Slice& stored : in.operand_list) {
      // An operand that does not decode is skipped: never fail.
      if (auto parsed = ParseStoredOperand(stored.ToStringView())) {
        value = ApplyMerge(value, parsed->first, parsed->second);
      }
    }
    out->new_value = value.value_or(std::string());
    return true;
  }

  bool PartialMerge(const rocksdb::Slice&, const rocksdb::Slice& left,
                    const rocksdb::Slice& right, std::string* new_value,
                    rocksdb::Logger*) const override {
    auto l = ParseStoredOperand(left.ToStringView());
    auto r = ParseStoredOperand(right.ToStringView());
    if (!l.has_value() || !r.has_value() || l->first != r->first) return false;
    *new_value =
        StoredOperand(l->first, ApplyMerge(l->second, l->first, r->second));
    return true;
  }
};

}  // namespace

std::shared_ptr<rocksdb::MergeOperator> NewStateMergeOperator() {
  return std::make_shared<StateMergeOperator>();
}

}  // namespace idem
