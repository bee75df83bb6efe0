#include "idem/merge.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "engine/coding.h"

namespace idem {

std::string Int64Operand(int64_t v) {
  std::string out;
  PutFixed64LE(&out, static_cast<uint64_t>(v));
  return out;
}

std::optional<int64_t> ReadInt64(std::string_view value) {
  if (value.size() != 8) return std::nullopt;
  return static_cast<int64_t>(GetFixed64LE(value.data()));
}

absl::Status ValidateMerge(MergeOp op, std::string_view operand) {
  switch (op) {
    case MergeOp::kAddInt64:
    case MergeOp::kMaxInt64:
    case MergeOp::kMinInt64:
      if (operand.size() != 8) {
        return absl::InvalidArgumentError(
            absl::StrCat("merge: an int64 operand is 8 bytes (Int64Operand); "
                         "this one is ",
                         operand.size()));
      }
      return absl::OkStatus();
    case MergeOp::kAppend:
      return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "merge: unknown MergeOp ", static_cast<int>(op),
      " (the built-in ones are kAddInt64, kMaxInt64, kMinInt64, kAppend)"));
}

std::string ApplyMerge(std::optional<std::string_view> base, MergeOp op,
                       std::string_view operand) {
  if (!ValidateMerge(op, operand).ok()) {
    return std::string(base.value_or(std::string_view()));
  }
  if (op == MergeOp::kAppend) {
    std::string out(base.value_or(std::string_view()));
    out.append(operand);
    return out;
  }
  const int64_t x = *ReadInt64(operand);
  if (!base.has_value()) {
    return Int64Operand(x);  // 0 + x, max(x), min(x)
  }
  // A value that is not an int64 (a Put of other bytes) folds as 0: the
  // operator must never fail.
  const int64_t b = ReadInt64(*base).value_or(0);
  switch (op) {
    case MergeOp::kAddInt64:
      // Two's-complement wrap-around, without signed overflow.
      return Int64Operand(static_cast<int64_t>(static_cast<uint64_t>(b) +
                                               static_cast<uint64_t>(x)));
    case MergeOp::kMaxInt64:
      return Int64Operand(std::max(b, x));
    case MergeOp::kMinInt64:
      return Int64Operand(std::min(b, x));
    case MergeOp::kAppend:
      break;
  }
  return std::string(*base);
}

}  // namespace idem
