#include "engine/record.h"

#include <cstdint>
#include <limits>
#include <string>
#include <string_view>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace idem {
namespace {

using namespace std::string_literals;

constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();
constexpr int64_t kInt64Min = std::numeric_limits<int64_t>::min();

// ---- Dedupe keys ----

TEST(RecordTest, HashIsSixteenBytesAndDeterministic) {
  const DedupeKey a = HashMessageId("order-42");
  const DedupeKey b = HashMessageId(std::string("order-") + "42");
  EXPECT_EQ(a.size(), 16u);
  EXPECT_EQ(KeyView(a).size(), kDedupeKeyBytes);
  EXPECT_EQ(a, b);
}

TEST(RecordTest, DifferentIdsHashDifferently) {
  EXPECT_NE(HashMessageId("a"), HashMessageId("b"));
  EXPECT_NE(HashMessageId("m1"), HashMessageId("m2"));
  // A trailing NUL is part of the ID.
  EXPECT_NE(HashMessageId("x"), HashMessageId("x\0"s));
  // Case matters.
  EXPECT_NE(HashMessageId("Order"), HashMessageId("order"));
}

TEST(RecordTest, RecordKeyHashIsTheIdHashInEitherScope) {
  const DedupeKey hash = HashMessageId("order-42");
  EXPECT_EQ(RecordKey::ForStore(hash).hash(), KeyView(hash));
  const RecordKey scoped = RecordKey::ForPartition("orders", 7, hash);
  EXPECT_NE(scoped.view(), KeyView(hash));
  EXPECT_EQ(scoped.hash(), KeyView(hash));
}

TEST(RecordTest, HashIsXxh3With128BitsHighHalfFirstBigEndian) {
  const std::string id = "some message id";
  const XXH128_hash_t h = XXH3_128bits(id.data(), id.size());
  const DedupeKey key = HashMessageId(id);
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(static_cast<uint8_t>(key[i]),
              static_cast<uint8_t>(h.high64 >> (56 - 8 * i)))
        << "byte " << i;
    EXPECT_EQ(static_cast<uint8_t>(key[8 + i]),
              static_cast<uint8_t>(h.low64 >> (56 - 8 * i)))
        << "byte " << 8 + i;
  }
}

TEST(RecordTest, HashOfEmptyInputMatchesPublishedXxh3Vector) {
  // XXH3-128 of the empty input is 99aa06d3014798d8 6001c324468d497f.
  EXPECT_EQ(DedupeKeyToHex(KeyView(HashMessageId(""))),
            "99aa06d3014798d86001c324468d497f");
}

TEST(RecordTest, DedupeKeyToHexIsLowercaseTwoDigitsPerByte) {
  EXPECT_EQ(DedupeKeyToHex(""), "");
  EXPECT_EQ(DedupeKeyToHex("\x00\x01\x0f\x10\xab\xff"s), "00010f10abff");
  const std::string hex = DedupeKeyToHex(KeyView(HashMessageId("m1")));
  EXPECT_EQ(hex.size(), 32u);
  EXPECT_THAT(hex, ::testing::MatchesRegex("[0-9a-f]{32}"));
}

// ---- Time conversion ----

TEST(RecordTest, TimeToMicrosConvertsAndSaturatesAtInfinities) {
  EXPECT_EQ(TimeToMicros(absl::UnixEpoch()), 0);
  EXPECT_EQ(TimeToMicros(absl::FromUnixMicros(1234567)), 1234567);
  EXPECT_EQ(TimeToMicros(absl::FromUnixMicros(-5)), -5);
  EXPECT_EQ(TimeToMicros(absl::InfiniteFuture()), kInt64Max);
  EXPECT_EQ(TimeToMicros(absl::InfinitePast()), kInt64Min);
}

// ---- Dedupe records ----

TEST(RecordTest, RecordRoundTrips) {
  const std::string value = EncodeDedupeRecord(1700000000123456, "ok:42");
  EXPECT_EQ(value.size(), kRecordHeaderBytes + 5);
  EXPECT_EQ(static_cast<uint8_t>(value[0]), kRecordVersion);
  const std::optional<DedupeRecord> record = DecodeDedupeRecord(value);
  ASSERT_TRUE(record.has_value());
  EXPECT_EQ(record->expiry_micros, 1700000000123456);
  EXPECT_EQ(record->result, "ok:42");
}

TEST(RecordTest, RecordWithEmptyResultRoundTrips) {
  const std::string value = EncodeDedupeRecord(99, "");
  EXPECT_EQ(value.size(), kRecordHeaderBytes);
  const std::optional<DedupeRecord> record = DecodeDedupeRecord(value);
  ASSERT_TRUE(record.has_value());
  EXPECT_EQ(record->expiry_micros, 99);
  EXPECT_TRUE(record->result.empty());
}

TEST(RecordTest, RecordWithBinaryResultRoundTrips) {
  const std::string binary = "\x00\xff\x01\x00\x80\x7f"s;
  const std::string value = EncodeDedupeRecord(7, binary);
  const std::optional<DedupeRecord> record = DecodeDedupeRecord(value);
  ASSERT_TRUE(record.has_value());
  EXPECT_EQ(record->expiry_micros, 7);
  EXPECT_EQ(std::string(record->result), binary);
}

TEST(RecordTest, RecordRoundTripsInt64Extremes) {
  for (int64_t expiry : {kInt64Max, kInt64Min, int64_t{0}, int64_t{-1},
                         int64_t{1}, int64_t{0x0102030405060708}}) {
    const std::string value = EncodeDedupeRecord(expiry, "r");
    const std::optional<DedupeRecord> record = DecodeDedupeRecord(value);
    ASSERT_TRUE(record.has_value()) << expiry;
    EXPECT_EQ(record->expiry_micros, expiry);
    EXPECT_EQ(record->result, "r");
  }
}

TEST(RecordTest, RecordExpiryIsLittleEndianAfterVersionByte) {
  const std::string value = EncodeDedupeRecord(0x0102030405060708, "");
  EXPECT_EQ(value, "\x02\x08\x07\x06\x05\x04\x03\x02\x01\xff\xff\xff\xff"s);
  EXPECT_EQ(EncodeDedupeRecordV1(0x0102030405060708, ""),
            "\x01\x08\x07\x06\x05\x04\x03\x02\x01"s);
}

TEST(RecordTest, VersionOneRecordDecodesWithoutTheNewFields) {
  const std::string value = EncodeDedupeRecordV1(1700000000123456, "ok:42");
  const std::optional<DedupeRecord> record = DecodeDedupeRecord(value);
  ASSERT_TRUE(record.has_value());
  EXPECT_EQ(record->version, kRecordVersion1);
  EXPECT_EQ(record->expiry_micros, 1700000000123456);
  EXPECT_EQ(record->result, "ok:42");
  EXPECT_EQ(FirstProcessedMicros(*record), kUnknownFirstProcessed);
  EXPECT_FALSE(record->fingerprint.has_value());
  EXPECT_EQ(record->failure, absl::StatusCode::kOk);
  EXPECT_FALSE(
      DecodeDedupeRecord(EncodeDedupeRecordV1(1, "").substr(0, 8)).has_value());
}

TEST(RecordTest, EveryFieldRoundTrips) {
  DedupeRecord in;
  in.expiry_micros = 1700000000123456;
  in.processed_before_expiry_s = ProcessedBeforeExpiry(
      in.expiry_micros - 3'600'000'000 - 1, in.expiry_micros);
  in.fingerprint = 0x1122334455667788;
  in.failure = absl::StatusCode::kInvalidArgument;
  in.result = "no account 42";
  const std::string value = EncodeDedupeRecord(in);
  // The fingerprint costs 8 bytes, a failure 1.
  EXPECT_EQ(value.size(),
            kRecordHeaderBytes + kFingerprintBytes + 1 + in.result.size());
  EXPECT_EQ(static_cast<uint8_t>(value[0]),
            kRecordVersion | kRecordFingerprint | kRecordFailed);
  const std::optional<DedupeRecord> out = DecodeDedupeRecord(value);
  ASSERT_TRUE(out.has_value());
  EXPECT_EQ(out->expiry_micros, in.expiry_micros);
  EXPECT_EQ(out->fingerprint, in.fingerprint);
  EXPECT_EQ(out->failure, in.failure);
  EXPECT_EQ(out->result, in.result);
  // 3600 s and 1 µs before the expiry, rounded up to whole seconds.
  EXPECT_EQ(out->processed_before_expiry_s, 3601u);
  EXPECT_EQ(FirstProcessedMicros(*out), in.expiry_micros - 3'601'000'000);
}

TEST(RecordTest, FirstProcessedOutOfRangeIsUnknown) {
  EXPECT_EQ(ProcessedBeforeExpiry(kUnknownFirstProcessed, 0), kUnknownAge);
  EXPECT_EQ(ProcessedBeforeExpiry(5, 4), kUnknownAge);  // after the expiry
  EXPECT_EQ(ProcessedBeforeExpiry(kInt64Min + 1, kInt64Max), kUnknownAge);
  EXPECT_EQ(ProcessedBeforeExpiry(7, 7), 0u);
  DedupeRecord near_min;
  near_min.expiry_micros = kInt64Min + 5;
  near_min.processed_before_expiry_s = 10;
  EXPECT_EQ(FirstProcessedMicros(near_min), kUnknownFirstProcessed);
}

TEST(RecordTest, DecodeRejectsMissingFlaggedFieldsAndBadFailureCodes) {
  DedupeRecord in;
  in.fingerprint = 1;
  in.failure = absl::StatusCode::kInternal;
  const std::string value = EncodeDedupeRecord(in);
  for (size_t n = kRecordHeaderBytes; n < value.size(); ++n) {
    EXPECT_FALSE(DecodeDedupeRecord(value.substr(0, n)).has_value()) << n;
  }
  for (int code : {0, 17, 0xff}) {
    std::string bad = value;
    bad[kRecordHeaderBytes + kFingerprintBytes] = static_cast<char>(code);
    EXPECT_FALSE(DecodeDedupeRecord(bad).has_value()) << code;
  }
}

TEST(RecordTest, DecodeRejectsValuesShorterThanTheHeader) {
  EXPECT_FALSE(DecodeDedupeRecord("").has_value());
  EXPECT_FALSE(DecodeDedupeRecord("\x01"s).has_value());
  const std::string full = EncodeDedupeRecord(123, "");
  for (size_t n = 0; n < kRecordHeaderBytes; ++n) {
    EXPECT_FALSE(DecodeDedupeRecord(full.substr(0, n)).has_value())
        << n << " bytes";
  }
  EXPECT_TRUE(DecodeDedupeRecord(full).has_value());
}

TEST(RecordTest, DecodeRejectsUnknownVersionBytes) {
  std::string value = EncodeDedupeRecord(123, "result");
  // 3: a version not written yet; 0x42: version 2 with an unknown flag.
  for (int version : {0, 3, 0x7f, 0xff, 0x42, 0x82}) {
    value[0] = static_cast<char>(version);
    EXPECT_FALSE(DecodeDedupeRecord(value).has_value()) << version;
  }
}

TEST(RecordTest, RecordIsExpiredOnlyOnceNowReachesExpiry) {
  const DedupeRecord record{.expiry_micros = 1000, .result = ""};
  EXPECT_FALSE(IsExpired(record, 999));
  EXPECT_TRUE(IsExpired(record, 1000));
  EXPECT_TRUE(IsExpired(record, 1001));
  const DedupeRecord forever{.expiry_micros = kInt64Max, .result = ""};
  EXPECT_FALSE(IsExpired(forever, kInt64Max - 1));
}

// ---- Offsets ----

TEST(RecordTest, OffsetKeyRoundTrips) {
  const std::string key = EncodeOffsetKey("orders", 3);
  EXPECT_EQ(key, "orders\x00\x00\x00\x03"s);
  const std::optional<OffsetKey> decoded = DecodeOffsetKey(key);
  ASSERT_TRUE(decoded.has_value());
  EXPECT_EQ(decoded->source, "orders");
  EXPECT_EQ(decoded->partition, 3);
}

TEST(RecordTest, OffsetKeyRoundTripsSourceContainingNulBytes) {
  const std::string source = "a\0b\0\0c\0"s;
  const std::string key = EncodeOffsetKey(source, 258);
  EXPECT_EQ(key.size(), source.size() + 4);
  const std::optional<OffsetKey> decoded = DecodeOffsetKey(key);
  ASSERT_TRUE(decoded.has_value());
  EXPECT_EQ(std::string(decoded->source), source);
  EXPECT_EQ(decoded->partition, 258);
}

TEST(RecordTest, OffsetKeyRoundTripsPartitionZeroAndInt32Max) {
  for (int32_t partition :
       {0, 1, 255, 256, 65536, std::numeric_limits<int32_t>::max()}) {
    const std::string key = EncodeOffsetKey("t", partition);
    const std::optional<OffsetKey> decoded = DecodeOffsetKey(key);
    ASSERT_TRUE(decoded.has_value()) << partition;
    EXPECT_EQ(decoded->source, "t");
    EXPECT_EQ(decoded->partition, partition);
  }
  EXPECT_EQ(EncodeOffsetKey("t", std::numeric_limits<int32_t>::max()),
            "t\x7f\xff\xff\xff"s);
}

TEST(RecordTest, OffsetKeysOfOneSourceSortByPartition) {
  // Big-endian partitions keep a source's partitions in numeric order.
  EXPECT_LT(EncodeOffsetKey("t", 1), EncodeOffsetKey("t", 256));
  EXPECT_LT(EncodeOffsetKey("t", 255), EncodeOffsetKey("t", 256));
}

TEST(RecordTest, DecodeOffsetKeyRejectsKeysShorterThanAPartition) {
  EXPECT_FALSE(DecodeOffsetKey("").has_value());
  EXPECT_FALSE(DecodeOffsetKey("abc").has_value());
  // Exactly 4 bytes: an empty source name.
  const std::optional<OffsetKey> decoded = DecodeOffsetKey("\0\0\0\x05"s);
  ASSERT_TRUE(decoded.has_value());
  EXPECT_EQ(decoded->source, "");
  EXPECT_EQ(decoded->partition, 5);
}

TEST(RecordTest, OffsetValueRoundTrips) {
  for (int64_t offset : {int64_t{0}, int64_t{1}, int64_t{-1}, int64_t{1} << 40,
                         kInt64Max, kInt64Min}) {
    const std::string value = EncodeOffsetValue(offset);
    EXPECT_EQ(value.size(), 8u);
    EXPECT_EQ(DecodeOffsetValue(value), std::optional<int64_t>(offset));
  }
  EXPECT_EQ(EncodeOffsetValue(0x0102030405060708),
            "\x08\x07\x06\x05\x04\x03\x02\x01"s);
}

TEST(RecordTest, DecodeOffsetValueRejectsWrongLengths) {
  EXPECT_FALSE(DecodeOffsetValue("").has_value());
  EXPECT_FALSE(DecodeOffsetValue("1234567").has_value());
  EXPECT_FALSE(DecodeOffsetValue("123456789").has_value());
}

}  // namespace
}  // namespace idem
