// A hand-over in changelog mode never starts before the previous owner's
// transaction is decided: the new owner's check of a partition reads its
// changelog up to the end of the log only once the last stable offset has
// passed it, so a restore includes the previous owner's last commit.
//
// librdkafka 2.0.2's mock cluster keeps no last stable offset (it answers
// the high watermark), so the previous owner's last transaction is
// emulated as still open on partition 0 through PartitionReaderHooks::
// stable_offset (ConsumerHooks::changelog_reader): for two seconds from the
// new owner's first look at that partition, the brokers' answer stays one
// record before the end, where that transaction's last record, the
// commit's mark, would be.

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "idem/engine.h"
#include "idem/kafka/consumer.h"
#include "kafka/consumer_hooks.h"
#include "tests/testing/changelog_test_base.h"
#include "tests/testing/kafka_test_util.h"

namespace idem {
namespace {

using ::idem::kafka::RestoreReport;
using ::idem::test::kTopic;
using ::idem::test::MakeStream;
using ::idem::test::Stream;

constexpr absl::Duration kOpenFor = absl::Seconds(2);

// The emulated open transaction on partition 0 (see the file comment).
kafka::PartitionReaderHooks OpenOnPartitionZero() {
  struct Open {
    absl::Mutex mu;
    std::optional<absl::Time> until;
  };
  auto open = std::make_shared<Open>();
  kafka::PartitionReaderHooks hooks;
  hooks.stable_offset = [open](const std::string&, int32_t partition,
                               int64_t stable, int64_t end) {
    if (partition != 0 || end == 0) return stable;
    absl::MutexLock lock(&open->mu);
    if (!open->until.has_value()) open->until = absl::Now() + kOpenFor;
    return absl::Now() < *open->until ? end - 1 : stable;
  };
  return hooks;
}

class KafkaHandoverTest : public test::ChangelogTestBase {
 protected:
  // What the new owner's check of partition 0 found.
  struct Handover {
    RestoreReport partition0;
    std::optional<int64_t> previous_offset;  // the previous owner's
    bool found = false;
  };

  // Member A handles a stream and leaves; member B, with an empty store
  // and `reader` for its changelog reads, takes every partition over and
  // handles the rest of the stream.
  Handover HandOver(const kafka::PartitionReaderHooks& reader) {
    Handover handover;
    Stream all = MakeStream("first", 90);
    Produce(all);
    std::unique_ptr<Engine> a = OpenStore("a");
    std::unique_ptr<Engine> b = OpenStore("b");
    EXPECT_TRUE(a != nullptr && b != nullptr);
    if (a == nullptr || b == nullptr) return handover;
    std::vector<RestoreReport> a_reports;
    ConsumeUntil(*a, Handled(all), &a_reports);
    absl::StatusOr<std::optional<int64_t>> offset =
        a->CommittedOffset(kTopic, 0);
    EXPECT_TRUE(offset.ok()) << offset.status();
    if (offset.ok()) handover.previous_offset = *offset;
    Stream second = MakeStream("second", 30);
    Produce(second);
    Append(all, second);
    kafka::ConsumerHooks hooks;
    hooks.changelog_reader = reader;
    std::vector<RestoreReport> b_reports;
    ConsumeUntil(*b, Handled(all), &b_reports, hooks);
    for (const RestoreReport& report : b_reports) {
      if (report.partition == 0) {
        handover.partition0 = report;
        handover.found = true;
      }
    }
    EXPECT_TRUE(handover.found) << "partition 0 was never checked";
    ExpectExact(*b, all);
    return handover;
  }
};

TEST_F(KafkaHandoverTest, HandOverWaitsForThePreviousOwnersOpenTransaction) {
  const Handover handover = HandOver(OpenOnPartitionZero());
  ASSERT_TRUE(handover.found);
  ASSERT_TRUE(handover.previous_offset.has_value());
  // The check waited until the transaction was decided, and its restore
  // holds the commit that transaction carried.
  EXPECT_GE(handover.partition0.duration, kOpenFor);
  EXPECT_EQ(handover.partition0.offset, handover.previous_offset);
}

// The broken twin takes the last stable offset for the end of the log: the
// hand-over starts while the transaction is open, and its restore lacks the
// commit that transaction carries.
TEST_F(KafkaHandoverTest,
       BrokenVariantHandOverEndingAtTheLastStableOffsetMissesTheOpenCommit) {
  kafka::PartitionReaderHooks reader = OpenOnPartitionZero();
  reader.stable_offset_is_the_end = true;
  const Handover handover = HandOver(reader);
  ASSERT_TRUE(handover.found);
  ASSERT_TRUE(handover.previous_offset.has_value());
  EXPECT_LT(handover.partition0.duration, kOpenFor);
  EXPECT_NE(handover.partition0.offset, handover.previous_offset);
}

}  // namespace
}  // namespace idem
