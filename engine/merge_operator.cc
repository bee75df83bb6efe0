#include "engine/merge_operator.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>

#include "absl/base/attributes.h"
#include "engine/coding.h"

namespace idem {

std::string StoredOperand(MergeOp op, std::string_view operand,
                          std::optional<int64_t> expires_micros,
                          std::optional<int64_t> written_micros) {
  std::string stored;
  stored.reserve(1 + 16 + operand.size());
  uint8_t tag = static_cast<uint8_t>(op);
  if (expires_micros.has_value()) tag |= kOperandExpiryFlag;
  if (written_micros.has_value()) tag |= kOperandWrittenFlag;
  stored.push_back(static_cast<char>(tag));
  if (expires_micros.has_value()) {
    PutFixed64LE(&stored, static_cast<uint64_t>(*expires_micros));
  }
  if (written_micros.has_value()) {
    PutFixed64LE(&stored, static_cast<uint64_t>(*written_micros));
  }
  stored.append(operand);
  return stored;
}

namespace {

// ValidateMerge(op, operand).ok(), without building a status: the test of
// every operand a read or compaction folds.
bool IsFoldable(MergeOp op, std::string_view operand) {
  switch (op) {
    case MergeOp::kAddInt64:
    case MergeOp::kMaxInt64:
    case MergeOp::kMinInt64:
      return operand.size() == 8;
    case MergeOp::kAppend:
      return true;
  }
  return false;
}

// Takes a fixed64 LE field off the front of `rest` if `flag` is in `tag`:
// false if it is but `rest` is too short.
bool TakeField(uint8_t tag, uint8_t flag, std::string_view& rest,
               std::optional<int64_t>& field) {
  if ((tag & flag) == 0) return true;
  if (rest.size() < 8) return false;
  field = static_cast<int64_t>(GetFixed64LE(rest.data()));
  rest.remove_prefix(8);
  return true;
}

// Decodes `stored` into `parsed`: false if it does not decode. Inlined
// into the fold's loop, so that the operand's fields stay in registers
// instead of a std::optional<ParsedOperand> built on the stack and copied
// out at each operand.
ABSL_ATTRIBUTE_ALWAYS_INLINE inline bool DecodeStoredOperand(
    std::string_view stored, ParsedOperand& parsed) {
  if (stored.empty()) return false;
  const auto tag = static_cast<uint8_t>(stored[0]);
  parsed.op =
      static_cast<MergeOp>(tag & ~(kOperandExpiryFlag | kOperandWrittenFlag));
  parsed.operand = stored.substr(1);
  parsed.expires_micros.reset();
  parsed.written_micros.reset();
  return TakeField(tag, kOperandExpiryFlag, parsed.operand,
                   parsed.expires_micros) &&
         TakeField(tag, kOperandWrittenFlag, parsed.operand,
                   parsed.written_micros) &&
         IsFoldable(parsed.op, parsed.operand);
}

}  // namespace

std::optional<ParsedOperand> ParseStoredOperand(std::string_view stored) {
  ParsedOperand parsed{};
  if (!DecodeStoredOperand(stored, parsed)) return std::nullopt;
  return parsed;
}

void PendingMerges::Add(MergeOp op, std::string_view operand,
                        std::optional<int64_t> expires_micros,
                        std::optional<int64_t> written_micros) {
  if (expires_micros.has_value()) expiry_ = expires_micros;
  if (written_micros.has_value()) written_ = written_micros;
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
  if (later.expiry_.has_value()) expiry_ = later.expiry_;
  if (later.written_.has_value()) written_ = later.written_;
}

MergeFold::MergeFold(std::optional<std::string_view> base) {
  if (!base.has_value()) return;
  if (base->size() == 8) {
    // An int64 as ApplyMerge reads it, and the same 8 bytes if an append
    // or Take turns it back into bytes: a counter's base is not copied.
    state_ = State::kInt;
    int_ = static_cast<int64_t>(GetFixed64LE(base->data()));
    return;
  }
  state_ = State::kBytes;
  bytes_.assign(*base);
}

int64_t MergeFold::AsInt() const {
  if (state_ == State::kInt) return int_;
  if (bytes_.size() != 8) return 0;
  return static_cast<int64_t>(GetFixed64LE(bytes_.data()));
}

void MergeFold::Apply(MergeOp op, std::string_view operand) {
  if (!IsFoldable(op, operand)) {
    // Invalid: ApplyMerge keeps the base, an absent one as empty bytes.
    if (state_ == State::kAbsent) {
      state_ = State::kBytes;
      bytes_.clear();
    }
    return;
  }
  if (op == MergeOp::kAppend) {
    if (state_ == State::kInt) {
      bytes_ = Int64Operand(int_);
    } else if (state_ == State::kAbsent) {
      bytes_.clear();
    }
    state_ = State::kBytes;
    bytes_.append(operand);
    return;
  }
  const auto x = static_cast<int64_t>(GetFixed64LE(operand.data()));
  if (state_ == State::kAbsent) {
    int_ = x;  // 0 + x, max(x), min(x)
  } else {
    const int64_t b = AsInt();
    switch (op) {
      case MergeOp::kAddInt64:
        // Two's-complement wrap-around, without signed overflow.
        int_ = static_cast<int64_t>(static_cast<uint64_t>(b) +
                                    static_cast<uint64_t>(x));
        break;
      case MergeOp::kMaxInt64:
        int_ = std::max(b, x);
        break;
      case MergeOp::kMinInt64:
        int_ = std::min(b, x);
        break;
      case MergeOp::kAppend:
        break;
    }
  }
  state_ = State::kInt;
}

std::optional<std::string> MergeFold::Take() {
  const State state = state_;
  state_ = State::kAbsent;
  switch (state) {
    case State::kAbsent:
      return std::nullopt;
    case State::kInt:
      return Int64Operand(int_);
    case State::kBytes:
      return std::move(bytes_);
  }
  return std::nullopt;
}

std::optional<std::string_view> MergeFold::View() {
  switch (state_) {
    case State::kAbsent:
      return std::nullopt;
    case State::kInt:
      EncodeFixed64LE(int_bytes_, static_cast<uint64_t>(int_));
      return std::string_view(int_bytes_, sizeof(int_bytes_));
    case State::kBytes:
      return bytes_;
  }
  return std::nullopt;
}

std::string PendingMerges::FoldOnto(
    std::optional<std::string_view> base) const {
  MergeFold value(base);
  for (const auto& [op, operand] : operands_) value.Apply(op, operand);
  return value.Take().value_or(std::string());
}

namespace {

// When `parsed` was written; operands from before format 6 count as
// written before any value expired.
int64_t WrittenAt(const ParsedOperand& parsed) {
  return parsed.written_micros.value_or(StateReadTime::kNoExpiryCheck);
}

class StateMergeOperator final : public rocksdb::MergeOperator {
 public:
  explicit StateMergeOperator(std::shared_ptr<const StateTtlContext> context)
      : context_(std::move(context)) {}

  const char* Name() const override { return "idem.state.merge.1"; }

  bool FullMergeV2(const MergeOperationInput& in,
                   MergeOperationOutput* out) const override {
    const bool enveloped = context_ != nullptr &&
                           context_->enveloped.load(std::memory_order_acquire);
    std::optional<std::string_view> base_value;
    int64_t expires_micros = kNeverExpires;
    if (in.existing_value != nullptr) {
      const StateValue base =
          DecodeStateValue(in.existing_value->ToStringView(), enveloped);
      base_value = base.value;
      expires_micros = base.expires_micros;
    }
    MergeFold value(base_value);
    for (const rocksdb::Slice& stored : in.operand_list) {
      // An operand that does not decode is skipped: never fail.
      ParsedOperand parsed{};
      if (!DecodeStoredOperand(stored.ToStringView(), parsed)) continue;
      if (WrittenAt(parsed) >= expires_micros) {
        // Written once the value had expired: it starts a new one.
        value.Reset();
        expires_micros = kNeverExpires;
      }
      value.Apply(parsed.op, parsed.operand);
      if (parsed.expires_micros.has_value()) {
        expires_micros = *parsed.expires_micros;
      }
    }
    EncodeStateValueTo(&out->new_value, value.View().value_or(""),
                       expires_micros, enveloped);
    return true;
  }

  bool PartialMerge(const rocksdb::Slice&, const rocksdb::Slice& left,
                    const rocksdb::Slice& right, std::string* new_value,
                    rocksdb::Logger*) const override {
    auto l = ParseStoredOperand(left.ToStringView());
    auto r = ParseStoredOperand(right.ToStringView());
    if (!l.has_value() || !r.has_value() || l->op != r->op) return false;
    // One operand can stand for both only if `r` cannot start a new value
    // where `l` did not: written by the same commit, or while the expiry
    // `l` sets had not passed.
    if (WrittenAt(*l) != WrittenAt(*r) &&
        !(l->expires_micros.has_value() &&
          WrittenAt(*r) < *l->expires_micros)) {
      return false;
    }
    *new_value = StoredOperand(
        l->op, ApplyMerge(l->operand, l->op, r->operand),
        r->expires_micros.has_value() ? r->expires_micros : l->expires_micros,
        l->written_micros);
    return true;
  }

 private:
  const std::shared_ptr<const StateTtlContext> context_;
};

}  // namespace

std::shared_ptr<rocksdb::MergeOperator> NewStateMergeOperator(
    std::shared_ptr<const StateTtlContext> context) {
  return std::make_shared<StateMergeOperator>(std::move(context));
}

}  // namespace idem
