// The outbox on Kafka (librdkafka's mock cluster): the relay's records and
// headers, a relay stopped between publishing and acknowledging, dead
// letters committed with their offset, and a two-stage pipeline whose first
// stage is a separate process killed mid-stream.

#include <signal.h>
#include <sys/wait.h>

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "idem/engine.h"
#include "idem/kafka/consumer.h"
#include "idem/kafka/outbox_relay.h"
#include "kafka/outbox_relay_hooks.h"
#include "kafka/partition_reader.h"
#include "tests/testing/engine_test_util.h"
#include "tests/testing/kafka_test_util.h"
#include "util/temp_dir.h"

namespace idem {
namespace {

using ::idem::kafka::Consumer;
using ::idem::kafka::ConsumerOptions;
using ::idem::kafka::OutboxRelay;
using ::idem::kafka::OutboxRelayHooks;
using ::idem::kafka::OutboxRelayOptions;
using ::idem::kafka::Record;
using ::idem::test::AppliedCounts;
using ::idem::test::ApplyRecord;
using ::idem::test::EffectErrors;
using ::idem::test::FirstEmitId;
using ::idem::test::KafkaTestBed;
using ::idem::test::PollUntil;
using ::idem::test::StartKafka;
using ::idem::test::TestConsumerOptions;
using ::idem::util::TempDir;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;
using ::testing::SizeIs;

constexpr int kOutboxPartitions = 3;
constexpr char kOutboxDownstream[] = "ledger-entries";

// One record as read back from a topic, with the headers that matter here.
struct ReadBack {
  std::string id;  // from the message-id header
  std::string key;
  std::string value;
  std::vector<std::pair<std::string, std::string>> headers;
};

class KafkaOutboxTest : public ::testing::Test {
 protected:
  void SetUp() override {
    StartKafka("orders", kOutboxPartitions, bed_);
    ASSERT_NE(bed_.cluster, nullptr);
    ASSERT_TRUE(
        bed_.cluster->CreateTopic(kOutboxDownstream, kOutboxPartitions).ok());
  }

  // Commits messages "m0".."m<count-1>" with value "<i>", each emitting its
  // value to kOutboxDownstream keyed "k<i>" with header trace=<i>.
  void CommitEmits(Engine& engine, int count) {
    for (int i = 0; i < count; ++i) {
      const std::string id = absl::StrCat("m", i);
      Message m;
      m.id = id;
      absl::StatusOr<Result> r =
          engine.Process(m, [&](const Message&, Txn& txn) {
            const std::string n = absl::StrCat(i);
            const Txn::Header headers[] = {{"trace", n}};
            txn.EmitWithHeaders(kOutboxDownstream, "k" + n, n, headers);
            return absl::OkStatus();
          });
      ASSERT_TRUE(r.ok() && r->outcome == Outcome::kProcessed) << i;
    }
  }

  OutboxRelayOptions RelayOptions() const {
    OutboxRelayOptions options;
    options.brokers = bed_.cluster->bootstrap_servers();
    options.kafka_config = {{"log_level", "3"}};
    return options;
  }

  // Reads `topic` with a consumer of its own (group `group`, a store of its
  // own) until `count` records arrived.
  std::vector<ReadBack> ReadTopic(const std::string& topic, size_t count,
                                  const std::string& group) {
    std::vector<ReadBack> records;
    auto engine = Engine::Open(dir_.Sub("reader-" + group), Options());
    EXPECT_TRUE(engine.ok()) << engine.status();
    if (!engine.ok()) return records;
    ConsumerOptions options = TestConsumerOptions(bed_, group);
    options.topics = {topic};
    auto consumer = Consumer::Create(engine->get(), options);
    EXPECT_TRUE(consumer.ok()) << consumer.status();
    if (!consumer.ok()) return records;
    absl::Status s = PollUntil(
        **consumer,
        [&](const Record& r, Txn&) {
          ReadBack& back = records.emplace_back();
          back.id = std::string(r.id);
          back.key = std::string(r.key);
          back.value = std::string(r.value);
          for (const auto& [name, value] : r.headers) {
            back.headers.emplace_back(std::string(name), std::string(value));
          }
          return absl::OkStatus();
        },
        [&] { return records.size() >= count; });
    EXPECT_TRUE(s.ok()) << s;
    return records;
  }

  TempDir dir_;
  KafkaTestBed bed_;
};

TEST_F(KafkaOutboxTest, RelayPublishesKeysValuesAndMessageIdHeaderThenAcks) {
  ASSERT_OPEN(engine, dir_.Sub("store"), Options());
  CommitEmits(*engine, 5);
  auto relay = OutboxRelay::Create(engine.get(), RelayOptions());
  ASSERT_TRUE(relay.ok()) << relay.status();
  absl::StatusOr<kafka::RelayReport> drained = (*relay)->Drain();
  ASSERT_TRUE(drained.ok()) << drained.status();
  EXPECT_EQ(drained->published, 5);
  EXPECT_EQ(drained->acknowledged, 5);
  EXPECT_EQ(drained->last_position, 5u);
  absl::StatusOr<std::vector<OutboxEntry>> left = engine->ReadOutbox(10);
  ASSERT_TRUE(left.ok());
  EXPECT_THAT(*left, IsEmpty());
  EXPECT_EQ((*relay)->stats().published, 5);

  std::vector<ReadBack> records = ReadTopic(kOutboxDownstream, 5, "reader");
  ASSERT_THAT(records, SizeIs(5));
  std::set<std::string> seen;
  for (const ReadBack& r : records) {
    const int i = std::stoi(r.value);
    EXPECT_EQ(r.key, absl::StrCat("k", i));
    EXPECT_EQ(r.id, FirstEmitId(absl::StrCat("m", i)));
    // message-id first, then the entry's own headers.
    using H = std::pair<std::string, std::string>;
    EXPECT_THAT(r.headers, ElementsAre(H("message-id", r.id),
                                       H("trace", absl::StrCat(i))));
    seen.insert(r.value);
  }
  EXPECT_THAT(seen, SizeIs(5));
  // An empty outbox: a round publishes nothing.
  absl::StatusOr<kafka::RelayReport> again = (*relay)->RelayOnce();
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->published, 0);
}

// An entry's partition (Txn::EmitOptions) is where the relay publishes it,
// and a tombstone is published as a null value, unlike an empty one.
TEST_F(KafkaOutboxTest, RelayPublishesToTheEntrysPartitionAndTombstones) {
  ASSERT_OPEN(engine, dir_.Sub("store"), Options());
  Message m;
  m.id = "m";
  absl::StatusOr<Result> r = engine->Process(m, [](const Message&, Txn& txn) {
    txn.EmitWithOptions(kOutboxDownstream, "a", "x", {.partition = 2});
    txn.EmitWithOptions(kOutboxDownstream, "b", "",
                        {.partition = 1, .tombstone = true});
    txn.EmitWithOptions(kOutboxDownstream, "c", "", {.partition = 1});
    return absl::OkStatus();
  });
  ASSERT_TRUE(r.ok() && r->outcome == Outcome::kProcessed);
  auto relay = OutboxRelay::Create(engine.get(), RelayOptions());
  ASSERT_TRUE(relay.ok()) << relay.status();
  ASSERT_TRUE((*relay)->Drain().ok());

  auto reader = kafka::PartitionReader::Create(
      bed_.cluster->bootstrap_servers(), {{"log_level", "3"}});
  ASSERT_TRUE(reader.ok()) << reader.status();
  // (partition, key, tombstone, value) of every record, partition by partition.
  std::vector<std::tuple<int32_t, std::string, bool, std::string>> read;
  for (int32_t p = 0; p < kOutboxPartitions; ++p) {
    absl::Status s = (*reader)->Read(
        kOutboxDownstream, p, 0, absl::Seconds(10),
        [&](const kafka::LogRecord& l) {
          read.emplace_back(p, std::string(l.record.key), l.tombstone,
                            std::string(l.record.value));
          return absl::OkStatus();
        });
    ASSERT_TRUE(s.ok()) << s;
  }
  using T = std::tuple<int32_t, std::string, bool, std::string>;
  EXPECT_THAT(read, ElementsAre(T(1, "b", true, ""), T(1, "c", false, ""),
                                T(2, "a", false, "x")));
  EXPECT_EQ(*(*reader)->PartitionCount(kOutboxDownstream, absl::Seconds(10)),
            kOutboxPartitions);
}

// OutboxRelayOptions::skip acknowledges entries without publishing them
// (counted as skipped); publish_first destinations are published too, and
// the prefix acknowledged covers both produce calls.
TEST_F(KafkaOutboxTest, RelaySkipsEntriesAndPublishesSomeDestinationsFirst) {
  ASSERT_TRUE(bed_.cluster->CreateTopic("early", 1).ok());
  ASSERT_OPEN(engine, dir_.Sub("store"), Options());
  Message m;
  m.id = "m";
  absl::StatusOr<Result> r = engine->Process(m, [](const Message&, Txn& txn) {
    for (int i = 0; i < 3; ++i) {
      txn.EmitWithOptions(kOutboxDownstream, absl::StrCat("late-", i), "v",
                          {.partition = 0});
      txn.EmitWithOptions("early", absl::StrCat("early-", i), "v",
                          {.partition = 0});
      txn.EmitWithOptions(kOutboxDownstream, absl::StrCat("skip-", i), "v",
                          {.partition = 0});
    }
    return absl::OkStatus();
  });
  ASSERT_TRUE(r.ok() && r->outcome == Outcome::kProcessed);
  OutboxRelayOptions options = RelayOptions();
  options.max_batch = 4;  // rounds that cut through the three kinds
  options.publish_first = {"early"};
  options.skip = [](const OutboxEntry& entry) {
    return entry.key.starts_with("skip-");
  };
  auto relay = OutboxRelay::Create(engine.get(), options);
  ASSERT_TRUE(relay.ok()) << relay.status();
  absl::StatusOr<kafka::RelayReport> drained = (*relay)->Drain();
  ASSERT_TRUE(drained.ok()) << drained.status();
  EXPECT_EQ(drained->published, 6);
  EXPECT_EQ(drained->skipped, 3);
  EXPECT_EQ(drained->acknowledged, 9);
  EXPECT_EQ((*relay)->stats().skipped, 3);
  EXPECT_THAT(*engine->ReadOutbox(10), IsEmpty());

  auto reader = kafka::PartitionReader::Create(
      bed_.cluster->bootstrap_servers(), {{"log_level", "3"}});
  ASSERT_TRUE(reader.ok()) << reader.status();
  std::vector<std::string> keys;
  for (const char* topic : {"early", kOutboxDownstream}) {
    ASSERT_TRUE((*reader)
                    ->Read(topic, 0, 0, absl::Seconds(10),
                           [&](const kafka::LogRecord& l) {
                             keys.emplace_back(l.record.key);
                             return absl::OkStatus();
                           })
                    .ok());
  }
  EXPECT_THAT(keys, ElementsAre("early-0", "early-1", "early-2", "late-0",
                                "late-1", "late-2"));
}

TEST_F(KafkaOutboxTest, RelayRejectsBadOptionsNamingThem) {
  ASSERT_OPEN(engine, dir_.Sub("store"), Options());
  auto expect_invalid = [&](OutboxRelayOptions options, const char* what) {
    auto relay = OutboxRelay::Create(engine.get(), options);
    EXPECT_EQ(relay.status().code(), absl::StatusCode::kInvalidArgument)
        << what;
    EXPECT_THAT(relay.status().message(), HasSubstr(what));
  };
  OutboxRelayOptions options = RelayOptions();
  options.brokers = "";
  expect_invalid(options, "brokers");
  options = RelayOptions();
  options.max_batch = 0;
  expect_invalid(options, "max_batch");
  options = RelayOptions();
  options.id_header = "";
  expect_invalid(options, "id_header");
  options = RelayOptions();
  options.kafka_config = {{"acks", "1"}};
  expect_invalid(options, "acks");
  options = RelayOptions();
  options.kafka_config = {{"enable.idempotence", "false"}};
  expect_invalid(options, "enable.idempotence");
  EXPECT_EQ(OutboxRelay::Create(nullptr, RelayOptions()).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// A relay stops after publishing a round and before acknowledging it, as a
// crash there would leave it; a second relay publishes the same entries
// again. A downstream idem consumer applies every output exactly once. The
// errors (IDs not applied once) are returned.
std::vector<std::string> StopRelayBetweenPublishAndAck(
    Engine& engine, OutboxRelayOptions options, const OutboxRelayHooks& broken,
    const KafkaTestBed& bed, TempDir& dir, int count) {
  OutboxRelayHooks stop_once = broken;
  stop_once.between_publish_and_ack = [] {
    return absl::AbortedError("stopped between publishing and acknowledging");
  };
  options.max_batch = count;
  auto first = kafka::CreateOutboxRelayWithHooks(&engine, options, stop_once);
  EXPECT_TRUE(first.ok()) << first.status();
  if (!first.ok()) return {"no relay"};
  absl::StatusOr<kafka::RelayReport> stopped = (*first)->RelayOnce();
  EXPECT_EQ(stopped.status().code(), absl::StatusCode::kAborted);
  auto second = kafka::CreateOutboxRelayWithHooks(&engine, options, broken);
  EXPECT_TRUE(second.ok()) << second.status();
  if (!second.ok()) return {"no relay"};
  absl::StatusOr<kafka::RelayReport> drained = (*second)->Drain();
  EXPECT_TRUE(drained.ok()) << drained.status();

  // Downstream: an idem consumer dedupes by the message-id header.
  auto downstream = Engine::Open(dir.Sub("downstream"), Options());
  EXPECT_TRUE(downstream.ok()) << downstream.status();
  if (!downstream.ok()) return {"no downstream engine"};
  ConsumerOptions consumer_options = TestConsumerOptions(bed, "downstream");
  consumer_options.topics = {kOutboxDownstream};
  auto consumer = Consumer::Create(downstream->get(), consumer_options);
  EXPECT_TRUE(consumer.ok()) << consumer.status();
  if (!consumer.ok()) return {"no downstream consumer"};
  std::set<std::string> expected;
  for (int i = 0; i < count; ++i) {
    expected.insert(FirstEmitId(absl::StrCat("m", i)));
  }
  int64_t records = 0;
  const absl::Time deadline = absl::Now() + absl::Seconds(5);
  while (absl::Now() < deadline) {
    absl::StatusOr<kafka::BatchReport> report =
        (*consumer)->PollBatch(ApplyRecord);
    EXPECT_TRUE(report.ok()) << report.status();
    if (!report.ok()) break;
    records += report->records;
    // Both publications arrived; or an empty poll once every message was
    // applied: all there will be. (Counting records instead let an empty
    // poll end the wait when the republished duplicates had arrived before
    // the rest, on a loaded machine. A broken relay, which loses messages,
    // waits for the deadline.)
    if (records >= 2 * count) break;
    if (report->records == 0 &&
        EffectErrors(expected, AppliedCounts(**downstream)).empty()) {
      break;
    }
  }
  return EffectErrors(expected, AppliedCounts(**downstream));
}

// Java's default partitioner for a keyed record, from the algorithm's
// definition (Kafka's Utils.murmur2: seed 0x9747b28c, m 0x5bd1e995, r 24;
// partition = (hash & 0x7fffffff) % partitions).
int32_t JavaMurmur2(std::string_view key) {
  constexpr uint32_t kM = 0x5bd1e995;
  const auto byte = [&](size_t i) {
    return static_cast<uint32_t>(static_cast<uint8_t>(key[i]));
  };
  uint32_t h = 0x9747b28cu ^ static_cast<uint32_t>(key.size());
  for (size_t i = 0; i + 4 <= key.size(); i += 4) {
    uint32_t k =
        byte(i) | byte(i + 1) << 8 | byte(i + 2) << 16 | byte(i + 3) << 24;
    k *= kM;
    k ^= k >> 24;
    k *= kM;
    h *= kM;
    h ^= k;
  }
  const size_t tail = key.size() & ~size_t{3};
  switch (key.size() % 4) {
    case 3:
      h ^= byte(tail + 2) << 16;
      [[fallthrough]];
    case 2:
      h ^= byte(tail + 1) << 8;
      [[fallthrough]];
    case 1:
      h ^= byte(tail);
      h *= kM;
  }
  h ^= h >> 13;
  h *= kM;
  h ^= h >> 15;
  return static_cast<int32_t>(h);
}

int32_t JavaPartition(std::string_view key, int32_t partitions) {
  return static_cast<int32_t>(
      (static_cast<uint32_t>(JavaMurmur2(key)) & 0x7fffffffu) %
      static_cast<uint32_t>(partitions));
}

// The reference above against the hashes Kafka's own tests publish for
// Utils.murmur2 (UtilsTest.testMurmur2), and their partitions among 7.
TEST(JavaMurmur2Test, Murmur2ReferenceMatchesKafkasPublishedHashes) {
  struct Known {
    const char* key;
    int32_t hash;
    int32_t partition_of_7;
  };
  const Known known[] = {
      {"21", -973932308, 3},
      {"foobar", -790332482, 0},
      {"a-little-bit-long-string", -985981536, 1},
      {"a-little-bit-longer-string", -1486304829, 0},
      {"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971, 3},
      {"abc", 479470107, 4},
  };
  for (const Known& k : known) {
    EXPECT_EQ(JavaMurmur2(k.key), k.hash) << k.key;
    EXPECT_EQ(JavaPartition(k.key, 7), k.partition_of_7) << k.key;
  }
}

class KafkaOutboxPartitionerTest : public KafkaOutboxTest {
 protected:
  static constexpr int kSpread = 7;

  // Commits one emit to "spread" (kSpread partitions) per key of Keys(),
  // without a partition, relays them with `config`, and returns the keys
  // that did not land on JavaPartition's partition, as "<key>: <p>".
  std::vector<std::string> MisplacedKeys(
      const std::vector<std::pair<std::string, std::string>>& config) {
    EXPECT_TRUE(bed_.cluster->CreateTopic("spread", kSpread).ok());
    auto engine = Engine::Open(dir_.Sub("spread-store"), Options());
    EXPECT_TRUE(engine.ok()) << engine.status();
    if (!engine.ok()) return {"no engine"};
    for (const std::string& key : Keys()) {
      Message m;
      m.id = key;
      absl::StatusOr<Result> r =
          (*engine)->Process(m, [&](const Message&, Txn& txn) {
            txn.Emit("spread", key, "v");
            return absl::OkStatus();
          });
      EXPECT_TRUE(r.ok() && r->outcome == Outcome::kProcessed) << key;
    }
    OutboxRelayOptions options = RelayOptions();
    options.kafka_config.insert(options.kafka_config.end(), config.begin(),
                                config.end());
    auto relay = OutboxRelay::Create(engine->get(), options);
    EXPECT_TRUE(relay.ok()) << relay.status();
    if (!relay.ok()) return {"no relay"};
    absl::StatusOr<kafka::RelayReport> drained = (*relay)->Drain();
    EXPECT_TRUE(drained.ok()) << drained.status();
    auto reader = kafka::PartitionReader::Create(
        bed_.cluster->bootstrap_servers(), {{"log_level", "3"}});
    EXPECT_TRUE(reader.ok()) << reader.status();
    if (!reader.ok()) return {"no reader"};
    std::vector<std::string> misplaced;
    size_t read = 0;
    for (int32_t p = 0; p < kSpread; ++p) {
      absl::Status s = (*reader)->Read(
          "spread", p, 0, absl::Seconds(10), [&](const kafka::LogRecord& l) {
            ++read;
            const std::string key(l.record.key);
            if (JavaPartition(key, kSpread) != p) {
              misplaced.push_back(absl::StrCat(key, ": ", p));
            }
            return absl::OkStatus();
          });
      EXPECT_TRUE(s.ok()) << s;
    }
    EXPECT_EQ(read, Keys().size());
    return misplaced;
  }

  static std::vector<std::string> Keys() {
    std::vector<std::string> keys = {
        "21",
        "foobar",
        "a-little-bit-long-string",
        "a-little-bit-longer-string",
        "lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8",
        "abc"};
    for (int i = 0; i < 40; ++i) keys.push_back(absl::StrCat("account-", i));
    return keys;
  }
};

// Keyed entries without a partition land where Java's producer would put
// them, so outputs co-partition with topics Java clients write.
TEST_F(KafkaOutboxPartitionerTest, RelayMurmur2PartitionsKeysAsJavaDoes) {
  EXPECT_THAT(MisplacedKeys({}), IsEmpty());
}

// The check above catches librdkafka's own default partitioner (CRC32),
// which the relay replaced.
TEST_F(KafkaOutboxPartitionerTest,
       BrokenVariantMurmur2CheckCatchesLibrdkafkasDefaultPartitioner) {
  EXPECT_THAT(MisplacedKeys({{"partitioner", "consistent_random"}}),
              Not(IsEmpty()));
}

TEST_F(KafkaOutboxTest,
       RelayStoppedBeforeAckRepublishesAndDownstreamAppliesOnce) {
  ASSERT_OPEN(engine, dir_.Sub("store"), Options());
  CommitEmits(*engine, 20);
  EXPECT_THAT(StopRelayBetweenPublishAndAck(*engine, RelayOptions(), {}, bed_,
                                            dir_, 20),
              IsEmpty());
}

// The check fails on a relay that acknowledges before it publishes: the
// stopped round's entries are gone from the outbox but never published.
TEST_F(KafkaOutboxTest, BrokenVariantRelayAckingFirstLosesEntries) {
  ASSERT_OPEN(engine, dir_.Sub("store"), Options());
  CommitEmits(*engine, 20);
  OutboxRelayHooks broken;
  broken.ack_before_publish = true;
  std::vector<std::string> errors = StopRelayBetweenPublishAndAck(
      *engine, RelayOptions(), broken, bed_, dir_, 20);
  EXPECT_THAT(errors, SizeIs(20));
  EXPECT_THAT(errors, ::testing::Each(HasSubstr(": 0")));
}

// A poison record's dead letter is emitted in the commit that moves its
// partition's offset past it: with the relay off (a crash right after the
// commit), the offset has moved and the dead letter waits in the outbox,
// nothing reached the dead-letter topic; a consumer that starts later
// publishes it, once.
TEST_F(KafkaOutboxTest, DeadLetterCommitsWithTheOffsetAndIsPublishedOnce) {
  ASSERT_TRUE(bed_.cluster->CreateTopic("orders.dlq", 1).ok());
  std::vector<kafka::OutgoingRecord> records(3);
  for (int i = 0; i < 3; ++i) {
    records[i].topic = "orders";
    records[i].partition = 0;
    records[i].value = i == 1 ? "poison" : "5";
    records[i].headers = {{"message-id", absl::StrCat("d", i)}};
  }
  ASSERT_TRUE(bed_.producer->Produce(records).ok());
  const std::string store = dir_.Sub("store");
  ConsumerOptions options = TestConsumerOptions(bed_, "g");
  options.max_attempts = 1;
  options.dead_letter_topic = "orders.dlq";
  {
    ASSERT_OPEN(engine, store, Options());
    ConsumerOptions no_relay = options;
    no_relay.relay_outbox = false;
    auto consumer = Consumer::Create(engine.get(), no_relay);
    ASSERT_TRUE(consumer.ok()) << consumer.status();
    absl::Status s = PollUntil(**consumer, ApplyRecord, [&] {
      auto offset = engine->CommittedOffset("orders", 0);
      return offset.ok() && offset->value_or(-1) >= 2;
    });
    ASSERT_TRUE(s.ok()) << s;
    absl::StatusOr<std::vector<OutboxEntry>> waiting = engine->ReadOutbox(10);
    ASSERT_TRUE(waiting.ok());
    ASSERT_THAT(*waiting, SizeIs(1));
    EXPECT_EQ((*waiting)[0].destination, "orders.dlq");
    EXPECT_EQ((*waiting)[0].value, "poison");
    auto seen = engine->Seen("d1");
    ASSERT_TRUE(seen.ok());
    EXPECT_FALSE(*seen);  // free for a corrected redelivery
  }
  {
    ASSERT_OPEN(engine, store, Options());
    auto consumer = Consumer::Create(engine.get(), options);
    ASSERT_TRUE(consumer.ok()) << consumer.status();
    absl::StatusOr<kafka::BatchReport> report =
        (*consumer)->PollBatch(ApplyRecord);
    ASSERT_TRUE(report.ok()) << report.status();
    EXPECT_EQ(report->outbox_published, 1);
    absl::StatusOr<std::vector<OutboxEntry>> left = engine->ReadOutbox(10);
    ASSERT_TRUE(left.ok());
    EXPECT_THAT(*left, IsEmpty());
  }
  std::vector<ReadBack> dead = ReadTopic("orders.dlq", 1, "dlq-reader");
  ASSERT_THAT(dead, SizeIs(1));
  EXPECT_EQ(dead[0].value, "poison");
  std::map<std::string, std::string> headers(dead[0].headers.begin(),
                                             dead[0].headers.end());
  EXPECT_EQ(headers["idem.source.id"], "d1");
  EXPECT_EQ(headers["idem.source.topic"], "orders");
  EXPECT_EQ(headers["idem.source.offset"], "1");
  EXPECT_THAT(headers["idem.error"], HasSubstr("bad amount"));
  EXPECT_EQ(headers["idem.reason"], "non_retriable");  // kInvalidArgument
  // Its own message ID, not the poisoned record's.
  EXPECT_EQ(headers["message-id"], dead[0].id);
  EXPECT_NE(dead[0].id, "d1");
  // Nothing more arrives: it was published once.
  absl::SleepFor(absl::Milliseconds(300));
  EXPECT_THAT(ReadTopic("orders.dlq", 1, "dlq-reader-2"), SizeIs(1));
}

// A two-stage pipeline: stage one (a separate process, SIGKILLed twice in
// mid-stream, then finished in this process) applies orders and forwards each
// to kOutboxDownstream through the outbox; stage two applies what arrives
// there. Every order's effect and every forwarded entry's effect happen exactly
// once.
TEST_F(KafkaOutboxTest, PipelineWithAKilledStageAppliesEverythingOnce) {
  constexpr int kCount = 450;
  const test::ProducedStream stream =
      test::MakeStream(bed_.topic, kOutboxPartitions, kCount, 10, 7);
  ASSERT_TRUE(bed_.producer->Produce(stream.records).ok());
  const std::string store = dir_.Sub("stage1");
  {
    ASSERT_OPEN(create, store, Options());  // so read-only opens work
  }
  auto committed = [&] {
    return test::CommittedRecords(store, bed_.topic, kOutboxPartitions);
  };
  for (int round = 1; round <= 2; ++round) {
    const int64_t before = committed();
    absl::StatusOr<pid_t> child = test::SpawnKafkaChild(
        IDEM_KAFKA_CHILD, {bed_.cluster->bootstrap_servers(), bed_.topic,
                           "stage1", store, kOutboxDownstream});
    ASSERT_TRUE(child.ok()) << child.status();
    const pid_t pid = *child;
    const absl::Time deadline = absl::Now() + absl::Seconds(60);
    while (committed() < before + 60 && absl::Now() < deadline) {
      absl::SleepFor(absl::Milliseconds(20));
    }
    kill(pid, SIGKILL);
    int wstatus = 0;
    ASSERT_EQ(waitpid(pid, &wstatus, 0), pid);
    ASSERT_TRUE(WIFSIGNALED(wstatus)) << "the child ended on its own";
    ASSERT_LT(committed(), kCount) << "killed too late to be mid-stream";
  }

  // Stage one, finished here.
  ASSERT_OPEN(stage1, store, Options());
  auto consumer1 =
      Consumer::Create(stage1.get(), TestConsumerOptions(bed_, "stage1"));
  ASSERT_TRUE(consumer1.ok()) << consumer1.status();
  absl::Status s = PollUntil(
      **consumer1,
      [](const Record& r, Txn& txn) {
        return test::ApplyAndForward(r, txn, kOutboxDownstream);
      },
      [&] {
        auto left = stage1->ReadOutbox(1);
        return committed() >= kCount && left.ok() && left->empty();
      });
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_THAT(EffectErrors(stream.unique_ids, AppliedCounts(*stage1)),
              IsEmpty());

  // Stage two.
  std::set<std::string> forwarded;
  for (const std::string& id : stream.unique_ids) {
    forwarded.insert(FirstEmitId(id));
  }
  ASSERT_OPEN(stage2, dir_.Sub("stage2"), Options());
  ConsumerOptions options2 = TestConsumerOptions(bed_, "stage2");
  options2.topics = {kOutboxDownstream};
  auto consumer2 = Consumer::Create(stage2.get(), options2);
  ASSERT_TRUE(consumer2.ok()) << consumer2.status();
  s = PollUntil(**consumer2, ApplyRecord, [&] {
    return AppliedCounts(*stage2).size() >= forwarded.size();
  });
  ASSERT_TRUE(s.ok()) << s;
  // Let any republished duplicates arrive too.
  for (int i = 0; i < 10; ++i)
    ASSERT_TRUE((*consumer2)->PollBatch(ApplyRecord).ok());
  EXPECT_THAT(EffectErrors(forwarded, AppliedCounts(*stage2)), IsEmpty());
}

}  // namespace
}  // namespace idem
