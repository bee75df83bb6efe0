#include "engine/validate.h"

#include <limits>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace idem {
namespace {

using ::testing::HasSubstr;

MATCHER_P(IsInvalidArgumentMentioning, field, "") {
  return arg.code() == absl::StatusCode::kInvalidArgument &&
         ::testing::ExplainMatchResult(
             HasSubstr(field), std::string(arg.message()), result_listener);
}

// ---- Options ----

TEST(ValidateTest, DefaultOptionsAreValid) {
  EXPECT_TRUE(ValidateOptions(Options()).ok());
}

TEST(ValidateTest, RejectsNonPositiveDedupeWindow) {
  Options options;
  options.dedupe_window = absl::ZeroDuration();
  EXPECT_THAT(ValidateOptions(options),
              IsInvalidArgumentMentioning("dedupe_window"));
  options.dedupe_window = -absl::Seconds(1);
  EXPECT_THAT(ValidateOptions(options),
              IsInvalidArgumentMentioning("dedupe_window"));
  options.dedupe_window = -absl::InfiniteDuration();
  EXPECT_THAT(ValidateOptions(options),
              IsInvalidArgumentMentioning("dedupe_window"));
}

TEST(ValidateTest, RejectsInfiniteDedupeWindow) {
  Options options;
  options.dedupe_window = absl::InfiniteDuration();
  EXPECT_THAT(ValidateOptions(options),
              IsInvalidArgumentMentioning("dedupe_window"));
}

TEST(ValidateTest, AcceptsTinyPositiveDedupeWindow) {
  Options options;
  options.dedupe_window = absl::Nanoseconds(1);
  EXPECT_TRUE(ValidateOptions(options).ok());
}

TEST(ValidateTest, RejectsDurabilityOutsideTheEnum) {
  Options options;
  options.durability = static_cast<Durability>(7);
  EXPECT_THAT(ValidateOptions(options),
              IsInvalidArgumentMentioning("durability"));
  options.durability = Durability::kBuffered;
  EXPECT_TRUE(ValidateOptions(options).ok());
}

TEST(ValidateTest, BloomBitsMustBeWithinZeroToSixtyFour) {
  Options options;
  for (int bits : {0, 1, 10, 64}) {
    options.bloom_bits_per_key = bits;
    EXPECT_TRUE(ValidateOptions(options).ok()) << bits;
  }
  for (int bits : {-1, 65, std::numeric_limits<int>::min(),
                   std::numeric_limits<int>::max()}) {
    options.bloom_bits_per_key = bits;
    EXPECT_THAT(ValidateOptions(options),
                IsInvalidArgumentMentioning("bloom_bits_per_key"))
        << bits;
  }
}

TEST(ValidateTest, MaxBackgroundJobsMustBeWithinOneTo256) {
  Options options;
  for (int jobs : {1, 2, 16, 256}) {
    options.max_background_jobs = jobs;
    EXPECT_TRUE(ValidateOptions(options).ok()) << jobs;
  }
  // Regression: 1000000 reached RocksDB, whose thread pools called
  // std::terminate when thread creation failed.
  for (int jobs : {0, -3, 257, 1000000, std::numeric_limits<int>::min(),
                   std::numeric_limits<int>::max()}) {
    options.max_background_jobs = jobs;
    EXPECT_THAT(ValidateOptions(options),
                IsInvalidArgumentMentioning("max_background_jobs"))
        << jobs;
  }
}

TEST(ValidateTest, WriteBufferMustBeWithin64KiBTo4GiB) {
  Options options;
  for (size_t bytes : {size_t{64} << 10, size_t{64} << 20, size_t{4} << 30}) {
    options.write_buffer_bytes = bytes;
    EXPECT_TRUE(ValidateOptions(options).ok()) << bytes;
  }
  // Regression: 1 TiB was accepted, and the write-ahead log's preallocation
  // (about 1.1 times the memtable size) filled the disk.
  for (size_t bytes : {size_t{0}, (size_t{64} << 10) - 1, (size_t{4} << 30) + 1,
                       size_t{1} << 40, std::numeric_limits<size_t>::max()}) {
    options.write_buffer_bytes = bytes;
    EXPECT_THAT(ValidateOptions(options),
                IsInvalidArgumentMentioning("write_buffer_bytes"))
        << bytes;
  }
}

TEST(ValidateTest, BlockCacheMustBeAtMostOneTiB) {
  Options options;
  for (size_t bytes : {size_t{0}, size_t{64} << 20, size_t{1} << 40}) {
    options.block_cache_bytes = bytes;
    EXPECT_TRUE(ValidateOptions(options).ok()) << bytes;
  }
  for (size_t bytes :
       {(size_t{1} << 40) + 1, std::numeric_limits<size_t>::max()}) {
    options.block_cache_bytes = bytes;
    EXPECT_THAT(ValidateOptions(options),
                IsInvalidArgumentMentioning("block_cache_bytes"))
        << bytes;
  }
}

TEST(ValidateTest, BoundsMessageNamesTheRange) {
  Options options;
  options.write_buffer_bytes = size_t{1} << 40;
  EXPECT_THAT(std::string(ValidateOptions(options).message()),
              HasSubstr("[64 KiB, 4 GiB]"));
  options = Options();
  options.max_background_jobs = 1000000;
  EXPECT_THAT(std::string(ValidateOptions(options).message()),
              HasSubstr("[1, 256]"));
}

// ---- IDs ----

TEST(ValidateTest, RejectsEmptyId) {
  EXPECT_THAT(ValidateId(""), IsInvalidArgumentMentioning("id"));
  EXPECT_THAT(ValidateMessage(Message{.id = ""}),
              IsInvalidArgumentMentioning("id"));
}

TEST(ValidateTest, AcceptsIdOfExactlyTheLimit) {
  const std::string id(kMaxIdBytes, 'x');
  ASSERT_EQ(id.size(), 1024u);
  EXPECT_TRUE(ValidateId(id).ok());
  EXPECT_TRUE(ValidateMessage(Message{.id = id}).ok());
}

TEST(ValidateTest, RejectsIdOneByteOverTheLimit) {
  const std::string id(kMaxIdBytes + 1, 'x');
  ASSERT_EQ(id.size(), 1025u);
  EXPECT_THAT(ValidateId(id), IsInvalidArgumentMentioning("1025"));
  EXPECT_THAT(ValidateMessage(Message{.id = id}),
              IsInvalidArgumentMentioning("id"));
}

TEST(ValidateTest, AcceptsSingleByteAndBinaryIds) {
  EXPECT_TRUE(ValidateId("a").ok());
  EXPECT_TRUE(ValidateId(std::string("\0\xff", 2)).ok());
}

// ---- TTL ----

TEST(ValidateTest, RejectsNegativeTtl) {
  Message m{.id = "m"};
  m.ttl = -absl::Microseconds(1);
  EXPECT_THAT(ValidateMessage(m), IsInvalidArgumentMentioning("ttl"));
  m.ttl = -absl::InfiniteDuration();
  EXPECT_THAT(ValidateMessage(m), IsInvalidArgumentMentioning("ttl"));
}

TEST(ValidateTest, RejectsInfiniteTtl) {
  Message m{.id = "m"};
  m.ttl = absl::InfiniteDuration();
  EXPECT_THAT(ValidateMessage(m), IsInvalidArgumentMentioning("ttl"));
}

TEST(ValidateTest, AcceptsZeroAndPositiveTtl) {
  Message m{.id = "m"};
  m.ttl = absl::ZeroDuration();
  EXPECT_TRUE(ValidateMessage(m).ok());
  m.ttl = absl::Hours(24 * 365 * 100);
  EXPECT_TRUE(ValidateMessage(m).ok());
}

// ---- Sources ----

TEST(ValidateTest, SourceMustBeNonEmptyBoundedWithNonNegativePartition) {
  EXPECT_TRUE(ValidateSource("orders", 0).ok());
  EXPECT_TRUE(ValidateSource(std::string(kMaxSourceBytes, 's'),
                             std::numeric_limits<int32_t>::max())
                  .ok());
  EXPECT_THAT(ValidateSource("", 0), IsInvalidArgumentMentioning("source"));
  EXPECT_THAT(ValidateSource(std::string(kMaxSourceBytes + 1, 's'), 0),
              IsInvalidArgumentMentioning("source"));
  EXPECT_THAT(ValidateSource("orders", -1),
              IsInvalidArgumentMentioning("partition"));
  EXPECT_THAT(ValidateSource("orders", std::numeric_limits<int32_t>::min()),
              IsInvalidArgumentMentioning("partition"));
}

TEST(ValidateTest, RejectsTooLongSourceWhenAPositionIsRecorded) {
  const std::string source(kMaxSourceBytes + 1, 's');
  EXPECT_THAT(
      ValidateMessage(Message{.id = "m", .source = source, .offset = 0}),
      IsInvalidArgumentMentioning("source"));
}

TEST(ValidateTest, RejectsTooLongSourceEvenWithoutAnOffset) {
  const std::string source(kMaxSourceBytes + 1, 's');
  EXPECT_THAT(
      ValidateMessage(Message{.id = "m", .source = source, .offset = -1}),
      IsInvalidArgumentMentioning("source"));
}

TEST(ValidateTest, AcceptsSourceOfExactlyTheLimit) {
  const std::string source(kMaxSourceBytes, 's');
  EXPECT_TRUE(
      ValidateMessage(Message{.id = "m", .source = source, .offset = 5}).ok());
}

TEST(ValidateTest, RejectsNegativePartitionWhenAPositionIsRecorded) {
  EXPECT_THAT(ValidateMessage(Message{
                  .id = "m", .source = "t", .partition = -1, .offset = 0}),
              IsInvalidArgumentMentioning("partition"));
}

TEST(ValidateTest, IgnoresPartitionWhenNoPositionIsRecorded) {
  // No offset: the position is not recorded, so the partition is unused.
  EXPECT_TRUE(
      ValidateMessage(
          Message{.id = "m", .source = "t", .partition = -1, .offset = -1})
          .ok());
  // No source: likewise.
  EXPECT_TRUE(
      ValidateMessage(
          Message{.id = "m", .source = "", .partition = -1, .offset = 3})
          .ok());
}

TEST(ValidateTest, AcceptsMessageWithPosition) {
  EXPECT_TRUE(ValidateMessage(Message{.id = "m",
                                      .payload = "p",
                                      .source = "t",
                                      .partition = 7,
                                      .offset = 0})
                  .ok());
}

}  // namespace
}  // namespace idem
