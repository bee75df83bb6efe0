// A test base for changelog mode (ConsumerOptions::changelog_topic) against
// librdkafka's mock cluster: an input topic and its two changelog topics,
// members with stores of their own, generated streams with producer
// duplicates and their expected totals, and the checks on what a member's
// store and the changelog hold. Used by tests/kafka_changelog_test.cc and
// tests/kafka_standby_test.cc; IDEM_KAFKA_CHILD names the child consumer
// (tests/kafka_consumer_child.cc).

#ifndef IDEM_TESTS_TESTING_CHANGELOG_TEST_BASE_H_
#define IDEM_TESTS_TESTING_CHANGELOG_TEST_BASE_H_

#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "idem/clock.h"
#include "idem/engine.h"
#include "idem/kafka/consumer.h"
#include "kafka/changelog_format.h"
#include "kafka/consumer_hooks.h"
#include "kafka/partition_reader.h"
#include "tests/testing/engine_test_util.h"
#include "tests/testing/kafka_test_util.h"
#include "tests/testing/recording_logger.h"
#include "util/temp_dir.h"

namespace idem::test {

using ::idem::kafka::ConsumerOptions;
using ::idem::kafka::Record;
using ::idem::kafka::RestoreReport;
using ::testing::IsEmpty;

constexpr int kPartitions = 3;
constexpr char kTopic[] = "orders";
constexpr char kChangelog[] = "orders-state";

// What was produced: every ID on one partition (a producer duplicate goes
// where its original went), and per partition the sum of its IDs' amounts.
struct Stream {
  std::vector<kafka::OutgoingRecord> records;
  std::set<std::string> ids;
  std::map<int32_t, int64_t> totals;
};

inline void AddMessage(Stream& stream, const std::string& id, int32_t partition,
                       int amount, bool duplicate) {
  kafka::OutgoingRecord record;
  record.topic = kTopic;
  record.partition = partition;
  record.key = id;
  record.value = absl::StrCat(amount);
  record.headers = {{"message-id", id}};
  stream.records.push_back(std::move(record));
  if (!duplicate) {
    stream.ids.insert(id);
    stream.totals[partition] += amount;
  }
}

// `count` new messages "<prefix>-<i>" round-robin over the partitions, each
// 10th followed by a producer duplicate of the one before it.
inline Stream MakeStream(const std::string& prefix, int count) {
  Stream stream;
  for (int i = 0; i < count; ++i) {
    const std::string id = absl::StrCat(prefix, "-", i);
    AddMessage(stream, id, i % kPartitions, 1 + i % 7, false);
    if (i % 10 == 9) AddMessage(stream, id, i % kPartitions, 1 + i % 7, true);
  }
  return stream;
}

class ChangelogTestBase : public ::testing::Test {
 protected:
  void SetUp() override {
    StartKafka(kTopic, kPartitions, bed_);
    ASSERT_NE(bed_.cluster, nullptr);
    // The mock cluster has no admin API: the topics exist beforehand, as
    // an operator would create them.
    ASSERT_TRUE(bed_.cluster->CreateTopic(kChangelog, kPartitions).ok());
    ASSERT_TRUE(
        bed_.cluster->CreateTopic(kafka::DedupeTopicOf(kChangelog), kPartitions)
            .ok());
  }

  // A partition-scoped store; on `clock` if set.
  std::unique_ptr<Engine> OpenStore(const std::string& name,
                                    Clock* clock = nullptr) {
    ::idem::Options options;
    options.dedupe_scope = DedupeScope::kPartition;
    options.clock = clock;
    options.shards = shards_;
    absl::StatusOr<std::unique_ptr<Engine>> engine =
        Engine::Open(dir_.Sub(name), options);
    EXPECT_TRUE(engine.ok()) << engine.status();
    return engine.ok() ? *std::move(engine) : nullptr;
  }

  ConsumerOptions MemberOptions(std::vector<RestoreReport>* reports) {
    ConsumerOptions options = TestConsumerOptions(bed_, "members");
    options.changelog_topic = kChangelog;
    options.max_batch = 40;
    options.workers = workers_;
    options.logger = &logger_;
    options.on_restore = [reports](const RestoreReport& report) {
      reports->push_back(report);
    };
    return options;
  }

  void Produce(const Stream& stream) {
    ASSERT_TRUE(bed_.producer->Produce(stream.records).ok());
  }

  // Offsets committed in `engine`, summed as "records handled".
  static int64_t Handled(Engine& engine) {
    return CommittedRecords(engine, kTopic, kPartitions);
  }

  // Handled(engine) of the store at `store`, read through a read-only
  // engine, so while a child process writes it; 0 if it cannot be opened
  // yet.
  static int64_t HandledInStore(const std::string& store) {
    return CommittedRecords(store, kTopic, kPartitions);
  }

  // Consumes with `engine` until it handled `records` records in all,
  // then closes the consumer (an orderly leave: its changelog published,
  // unless `hooks` say otherwise).
  void ConsumeUntil(Engine& engine, int64_t records,
                    std::vector<RestoreReport>* reports,
                    const kafka::ConsumerHooks& hooks = {},
                    kafka::Handler handler = test::ApplyInPartition) {
    ConsumerOptions options = MemberOptions(reports);
    options.dead_letter = [this](const Record& record, const absl::Status&) {
      dead_lettered_.insert(std::string(record.id));
      return absl::OkStatus();
    };
    auto consumer = kafka::CreateConsumerWithHooks(&engine, options, hooks);
    ASSERT_TRUE(consumer.ok()) << consumer.status();
    absl::Status s = test::PollUntil(
        **consumer, handler, [&] { return Handled(engine) >= records; });
    ASSERT_TRUE(s.ok()) << s;
    ASSERT_TRUE((*consumer)->Close().ok());
  }

  // The engine holds every ID of `ids` applied once and nothing else, and
  // each partition's total.
  static void ExpectExact(Engine& engine, const Stream& all) {
    EXPECT_THAT(test::EffectErrors(all.ids, test::PartitionAppliedCounts(
                                                engine, kTopic, kPartitions)),
                IsEmpty());
    ExpectTotals(engine, all);
  }

  // What `engine` holds that `all` does not say: effect errors and wrong
  // partition totals.
  static std::vector<std::string> Errors(Engine& engine, const Stream& all) {
    std::vector<std::string> errors = EffectErrors(
        all.ids, PartitionAppliedCounts(engine, kTopic, kPartitions));
    std::vector<std::string> totals = TotalErrors(engine, kTopic, all.totals);
    errors.insert(errors.end(), totals.begin(), totals.end());
    return errors;
  }

  // Each partition's "total" is the sum of its IDs' amounts in `all`.
  static void ExpectTotals(Engine& engine, const Stream& all) {
    EXPECT_THAT(TotalErrors(engine, kTopic, all.totals), IsEmpty());
  }

  static void Append(Stream& all, const Stream& more) {
    all.records.insert(all.records.end(), more.records.begin(),
                       more.records.end());
    all.ids.insert(more.ids.begin(), more.ids.end());
    for (const auto& [p, total] : more.totals) all.totals[p] += total;
  }

  // Calls `visit` with each changelog partition's offset records ("o/", one
  // per complete commit or new owner's mark), in log order.
  void ForEachMark(
      const std::function<void(int32_t partition, const kafka::Record& mark)>&
          visit) {
    auto reader = kafka::PartitionReader::Create(
        bed_.cluster->bootstrap_servers(), {{"log_level", "3"}});
    ASSERT_TRUE(reader.ok()) << reader.status();
    for (int32_t p = 0; p < kPartitions; ++p) {
      absl::Status s = (*reader)->Read(
          kChangelog, p, 0, absl::Seconds(10), [&](const kafka::LogRecord& r) {
            std::optional<kafka::ChangelogKey> key =
                kafka::DecodeChangelogKey(r.record.key);
            if (key.has_value() &&
                key->kind == kafka::ChangelogKey::Kind::kOffset) {
              visit(p, r.record);
            }
            return absl::OkStatus();
          });
      EXPECT_TRUE(s.ok()) << s;
    }
  }

  // The offsets of every changelog partition's offset records, in log
  // order, go backwards nowhere: each commit, and each new owner's mark,
  // continues from the last complete commit. Returns the partitions where
  // they do, as "p<partition>: <offset> after <offset>".
  std::vector<std::string> MarksGoingBack() {
    std::vector<std::string> back;
    std::map<int32_t, int64_t> last;  // per partition
    ForEachMark([&](int32_t p, const kafka::Record& mark) {
      const int64_t offset = kafka::DecodeOffsetValue(mark.value).value_or(-2);
      auto [it, first] = last.try_emplace(p, -1);
      if (offset < it->second) {
        back.push_back(
            absl::StrCat("p", p, ": ", offset, " after ", it->second));
      }
      it->second = std::max(it->second, offset);
    });
    return back;
  }

  // Starts the child consumer (tests/kafka_consumer_child.cc) in changelog
  // mode on the store `store`, with `flags` (e.g. --die_at=<step>).
  void SpawnChild(const std::string& store, std::vector<std::string> flags,
                  pid_t* pid) {
    std::vector<std::string> args = {bed_.cluster->bootstrap_servers(), kTopic,
                                     "members", store,
                                     absl::StrCat("--changelog=", kChangelog)};
    args.insert(args.end(), flags.begin(), flags.end());
    absl::StatusOr<pid_t> child = SpawnKafkaChild(IDEM_KAFKA_CHILD, args);
    ASSERT_TRUE(child.ok()) << child.status();
    *pid = *child;
  }

  static int64_t Handled(const Stream& stream) {
    return static_cast<int64_t>(stream.records.size());
  }

  util::TempDir dir_;
  KafkaTestBed bed_;
  int workers_ = 1;  // ConsumerOptions::workers of the members
  int shards_ = 1;   // Options::shards of the stores OpenStore opens
  std::set<std::string> dead_lettered_;
  test::RecordingLogger logger_;
};

}  // namespace idem::test

#endif  // IDEM_TESTS_TESTING_CHANGELOG_TEST_BASE_H_
