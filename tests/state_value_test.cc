// engine/state_value.h, the expiry parts of engine/merge_operator.h and
// the state family's TTL filter (engine/ttl_filter.h): envelopes decode
// only in a store of format 5 and only when they end with the magic; a
// value without expiry stays raw unless it would read as an envelope; the
// merge operator folds by each operand's write time (joining a value live
// then, starting anew over one expired then), takes an operand's expiry,
// combines operands only when that folds the same, and stays total on any
// bytes; the filter cuts expired values down to markers, removes them only
// below a removal horizon, and keeps everything it cannot judge.

#include "engine/state_value.h"

#include <atomic>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "absl/time/time.h"
#include "engine/merge_operator.h"
#include "engine/ttl_filter.h"
#include "gtest/gtest.h"
#include "idem/merge.h"
#include "rocksdb/merge_operator.h"
#include "rocksdb/slice.h"

namespace idem {
namespace {

constexpr int64_t kNowMicros = 1'000'000;

TEST(StateValueTest, PlainValueStaysRawAndExpiringOneRoundTrips) {
  EXPECT_EQ(EncodeStateValue("abc", kNeverExpires, true), "abc");
  const std::string stored = EncodeStateValue("abc", 42, true);
  EXPECT_EQ(stored.size(), 3 + kEnvelopeBytes);
  const StateValue decoded = DecodeStateValue(stored, true);
  EXPECT_EQ(decoded.value, "abc");
  EXPECT_EQ(decoded.expires_micros, 42);
  // A store older than format 5 reads every value raw.
  EXPECT_EQ(DecodeStateValue(stored, false).value, stored);
  EXPECT_EQ(DecodeStateValue(stored, false).expires_micros, kNeverExpires);
}

TEST(StateValueTest, EncodingOverAStringReplacesWhatItHeld) {
  std::string out = "an earlier, longer value";
  EncodeStateValueTo(&out, "abc", 42, true);
  EXPECT_EQ(out, EncodeStateValue("abc", 42, true));
  EncodeStateValueTo(&out, "abc", kNeverExpires, true);
  EXPECT_EQ(out, "abc");
  EncodeStateValueTo(&out, "de", 42, false);
  EXPECT_EQ(out, "de");
}

TEST(StateValueTest, ValueThatLooksLikeAnEnvelopeIsWrappedAndReadsBackWhole) {
  std::string lookalike(8, '\0');
  lookalike.append(kEnvelopeMagic);
  ASSERT_TRUE(LooksLikeEnvelope(lookalike));
  const std::string stored = EncodeStateValue(lookalike, kNeverExpires, true);
  EXPECT_NE(stored, lookalike);
  EXPECT_EQ(DecodeStateValue(stored, true).value, lookalike);
  EXPECT_EQ(LiveStateValue(stored, {true, kNowMicros}), lookalike);
  // Shorter than an envelope, or without the magic: raw.
  EXPECT_FALSE(LooksLikeEnvelope(kEnvelopeMagic));
  EXPECT_FALSE(LooksLikeEnvelope(std::string(kEnvelopeBytes, 'x')));
}

TEST(StateValueTest, ValueIsLiveStrictlyBeforeItsExpiry) {
  const std::string stored = EncodeStateValue("v", kNowMicros, true);
  EXPECT_EQ(LiveStateValue(stored, {true, kNowMicros - 1}), "v");
  EXPECT_EQ(LiveStateValue(stored, {true, kNowMicros}), std::nullopt);
  EXPECT_EQ(LiveStateValue(stored, {true, StateReadTime::kNoExpiryCheck}), "v");
}

TEST(StateValueTest, ExpirySaturatesAndTtlMustBePositive) {
  EXPECT_EQ(ExpiryAfter(5, absl::InfiniteDuration()), kNeverExpires);
  EXPECT_EQ(ExpiryAfter(5, absl::Seconds(1)), 5 + 1'000'000);
  EXPECT_LT(ExpiryAfter(kNowMicros, absl::Hours(int64_t{24} * 365 * 400'000)),
            kNeverExpires);
  EXPECT_EQ(ExpiryAfter(5, absl::Nanoseconds(1)), 6);  // at least 1 µs
  EXPECT_TRUE(ValidateTtl(absl::InfiniteDuration(), "ttl").ok());
  EXPECT_EQ(ValidateTtl(absl::ZeroDuration(), "ttl").code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ValidateTtl(-absl::Seconds(1), "ttl").code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(StateValueTest, OperandCarriesItsExpiryAndOldOperandsParseAsBefore) {
  const std::string old_form = StoredOperand(MergeOp::kAppend, "x");
  ASSERT_EQ(old_form.size(), 2u);
  std::optional<ParsedOperand> parsed = ParseStoredOperand(old_form);
  ASSERT_TRUE(parsed.has_value());
  EXPECT_EQ(parsed->operand, "x");
  EXPECT_EQ(parsed->expires_micros, std::nullopt);
  const std::string with_expiry = StoredOperand(MergeOp::kAppend, "x", 77);
  parsed = ParseStoredOperand(with_expiry);
  ASSERT_TRUE(parsed.has_value());
  EXPECT_EQ(parsed->op, MergeOp::kAppend);
  EXPECT_EQ(parsed->operand, "x");
  EXPECT_EQ(parsed->expires_micros, 77);
  // The flag without room for an expiry does not decode.
  EXPECT_FALSE(ParseStoredOperand(std::string(1, '\x84')).has_value());
}

// Folds `operands` onto `existing` with the state merge operator of a
// format-5 store.
class StateMergeFold {
 public:
  StateMergeFold() {
    auto context = std::make_shared<StateTtlContext>(nullptr);
    context->enveloped = true;
    op_ = NewStateMergeOperator(context);
  }

  // The folded stored value; nullopt if the operator failed.
  std::optional<std::string> Fold(std::optional<std::string> existing,
                                  const std::vector<std::string>& operands) {
    std::vector<rocksdb::Slice> slices(operands.begin(), operands.end());
    rocksdb::Slice existing_slice;
    if (existing.has_value()) existing_slice = *existing;
    rocksdb::Slice key("k");
    std::string out;
    rocksdb::Slice existing_operand;
    rocksdb::MergeOperator::MergeOperationInput in(
        key, existing.has_value() ? &existing_slice : nullptr, slices, nullptr);
    rocksdb::MergeOperator::MergeOperationOutput result(out, existing_operand);
    if (!op_->FullMergeV2(in, &result)) return std::nullopt;
    return out;
  }

  rocksdb::MergeOperator& op() { return *op_; }

 private:
  std::shared_ptr<rocksdb::MergeOperator> op_;
};

// An add of `x` written by a commit at `written`.
std::string AddAt(int64_t x, int64_t written,
                  std::optional<int64_t> expires = {}) {
  return StoredOperand(MergeOp::kAddInt64, Int64Operand(x), expires, written);
}

TEST(StateValueTest,
     MergeWrittenBeforeExpiryJoinsTheValueAndOneAfterStartsAnew) {
  StateMergeFold fold;
  const std::string base = EncodeStateValue(Int64Operand(5), kNowMicros, true);
  // Written while the base was live: joins it and expires with it.
  std::optional<std::string> out = fold.Fold(base, {AddAt(1, kNowMicros - 1)});
  ASSERT_TRUE(out.has_value());
  StateValue v = DecodeStateValue(*out, true);
  EXPECT_EQ(ReadInt64(v.value), 6);
  EXPECT_EQ(v.expires_micros, kNowMicros);
  // Written at the expiry: a new value, without expiry.
  out = fold.Fold(base, {AddAt(1, kNowMicros - 1), AddAt(2, kNowMicros)});
  ASSERT_TRUE(out.has_value());
  v = DecodeStateValue(*out, true);
  EXPECT_EQ(ReadInt64(v.value), 2);
  EXPECT_EQ(v.expires_micros, kNeverExpires);
  // The same over the marker a compaction leaves of the expired base.
  out = fold.Fold(EncodeStateValue("", kNowMicros, true),
                  {AddAt(1, kNowMicros - 1)});
  ASSERT_TRUE(out.has_value());
  EXPECT_EQ(DecodeStateValue(*out, true).expires_micros, kNowMicros);
  // An operand with an expiry sets it; operands from before format 5
  // (no write time) join whatever they fold onto.
  out = fold.Fold(Int64Operand(5),
                  {AddAt(1, kNowMicros, 99),
                   StoredOperand(MergeOp::kAddInt64, Int64Operand(1))});
  ASSERT_TRUE(out.has_value());
  v = DecodeStateValue(*out, true);
  EXPECT_EQ(ReadInt64(v.value), 7);
  EXPECT_EQ(v.expires_micros, 99);
}

TEST(StateValueTest, PartialMergeCombinesOnlyWhatFoldsTheSameEitherWay) {
  StateMergeFold fold;
  std::string combined;
  // One commit's operands combine; the later expiry wins.
  ASSERT_TRUE(fold.op().PartialMerge("k", AddAt(1, 7, 10), AddAt(2, 7),
                                     &combined, nullptr));
  std::optional<ParsedOperand> parsed = ParseStoredOperand(combined);
  ASSERT_TRUE(parsed.has_value());
  EXPECT_EQ(ReadInt64(parsed->operand), 3);
  EXPECT_EQ(parsed->expires_micros, 10);
  EXPECT_EQ(parsed->written_micros, 7);
  // Written before the expiry the left one sets: combinable.
  ASSERT_TRUE(fold.op().PartialMerge("k", AddAt(1, 7, 10), AddAt(2, 9, 19),
                                     &combined, nullptr));
  EXPECT_EQ(ParseStoredOperand(combined)->expires_micros, 19);
  // Otherwise the right one may start a new value: kept apart.
  EXPECT_FALSE(fold.op().PartialMerge("k", AddAt(1, 7), AddAt(2, 9), &combined,
                                      nullptr));
  EXPECT_FALSE(fold.op().PartialMerge("k", AddAt(1, 7, 10), AddAt(2, 10),
                                      &combined, nullptr));
}

TEST(StateValueTest, MergeOperatorIsTotalOnArbitraryBytes) {
  StateMergeFold fold;
  std::mt19937 random(7);
  auto bytes = [&](size_t max) {
    std::string s(random() % (max + 1), '\0');
    for (char& c : s) c = static_cast<char>(random());
    // Often give it a tag or a magic the decoders look for.
    if (!s.empty() && random() % 2 == 0) s[0] = static_cast<char>(0x81);
    if (random() % 4 == 0) s.append(kEnvelopeMagic);
    return s;
  };
  for (int i = 0; i < 2000; ++i) {
    std::vector<std::string> operands;
    for (size_t n = random() % 4; n > 0; --n) operands.push_back(bytes(24));
    std::optional<std::string> existing;
    if (random() % 2 == 0) existing = bytes(40);
    EXPECT_TRUE(fold.Fold(existing, operands).has_value());
  }
}

TEST(StateValueTest, MergeFoldFoldsExactlyAsRepeatedApplyMerge) {
  std::mt19937 random(11);
  const MergeOp ops[] = {MergeOp::kAddInt64, MergeOp::kMaxInt64,
                         MergeOp::kMinInt64, MergeOp::kAppend,
                         static_cast<MergeOp>(9)};  // unknown: invalid
  auto bytes = [&](size_t size) {
    std::string s(size, '\0');
    for (char& c : s) c = static_cast<char>(random());
    return s;
  };
  for (int i = 0; i < 5000; ++i) {
    std::optional<std::string> base;
    // Absent, an int64, or other bytes (which fold as 0).
    if (const int kind = static_cast<int>(random() % 3); kind == 1) {
      base = bytes(8);
    } else if (kind == 2) {
      base = bytes(random() % 12);
    }
    std::optional<std::string> expected = base;
    MergeFold fold(base);
    for (size_t n = random() % 6; n > 0; --n) {
      const MergeOp op = ops[random() % 5];
      // Mostly valid operands; sometimes a wrong-sized int64 one.
      const std::string operand = bytes(
          op == MergeOp::kAppend ? random() % 4 : (random() % 8 == 0 ? 3 : 8));
      expected = ApplyMerge(expected, op, operand);
      fold.Apply(op, operand);
      if (random() % 10 == 0) {
        expected.reset();
        fold.Reset();
      }
    }
    // View and Take give the same value.
    const std::optional<std::string_view> view = fold.View();
    EXPECT_EQ(view.has_value(), expected.has_value()) << "case " << i;
    if (view.has_value() && expected.has_value()) {
      EXPECT_EQ(*view, *expected) << "case " << i;
    }
    EXPECT_EQ(fold.Take(), expected) << "case " << i;
  }
}

TEST(StateValueTest,
     FilterCutsExpiredValuesToMarkersAndRemovesThemBelowTheHorizon) {
  using Decision = rocksdb::CompactionFilter::Decision;
  using ValueType = rocksdb::CompactionFilter::ValueType;
  std::atomic<uint64_t> dropped{0};
  auto decide = [&](const StateTtlFilter& filter, const std::string& value,
                    std::string* changed = nullptr,
                    ValueType type = ValueType::kValue) {
    std::string unused;
    return filter.FilterV2(0, "k", type, value,
                           changed != nullptr ? changed : &unused, &unused);
  };
  const StateTtlFilter automatic(StateReadTime{true, kNowMicros},
                                 StateReadTime::kNoExpiryCheck, &dropped);
  std::string changed;
  EXPECT_EQ(
      decide(automatic, EncodeStateValue("v", kNowMicros, true), &changed),
      Decision::kChangeValue);
  EXPECT_EQ(changed, EncodeStateValue("", kNowMicros, true));
  EXPECT_EQ(decide(automatic, changed), Decision::kKeep);  // a marker
  EXPECT_EQ(decide(automatic, EncodeStateValue("v", kNowMicros + 1, true)),
            Decision::kKeep);
  EXPECT_EQ(decide(automatic, "raw"), Decision::kKeep);
  EXPECT_EQ(decide(automatic, StoredOperand(MergeOp::kAppend, "x", 1, 1),
                   nullptr, ValueType::kMergeOperand),
            Decision::kKeep);
  EXPECT_EQ(dropped.load(), 0u);

  const StateTtlFilter manual(StateReadTime{true, kNowMicros}, kNowMicros - 1,
                              &dropped);
  EXPECT_EQ(decide(manual, EncodeStateValue("v", kNowMicros - 1, true)),
            Decision::kRemove);
  EXPECT_EQ(decide(manual, EncodeStateValue("", kNowMicros - 1, true)),
            Decision::kRemove);
  // Expired after the horizon: only cut down.
  EXPECT_EQ(decide(manual, EncodeStateValue("v", kNowMicros, true)),
            Decision::kChangeValue);
  EXPECT_EQ(dropped.load(), 2u);

  // Before format 5, or without a readable clock, nothing changes.
  const std::string expired = EncodeStateValue("v", 1, true);
  const StateTtlFilter raw(StateReadTime{false, kNowMicros}, kNowMicros,
                           &dropped);
  const StateTtlFilter no_clock(StateReadTime{true},
                                StateReadTime::kNoExpiryCheck, &dropped);
  EXPECT_EQ(decide(raw, expired), Decision::kKeep);
  EXPECT_EQ(decide(no_clock, expired), Decision::kKeep);
}

}  // namespace
}  // namespace idem
