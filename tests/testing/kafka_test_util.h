// Helpers for the Kafka consumer's tests: a mock cluster with a producer, a
// stream of records with message-id headers and injected producer
// duplicates, a handler that counts how often each message's effect is
// applied, a reader that counts a topic's message IDs, a loop that polls
// until a condition holds, and a consumer run as a process of its own
// (tests/kafka_consumer_child.cc) with a probe of what its store has committed.

#ifndef IDEM_TESTS_TESTING_KAFKA_TEST_UTIL_H_
#define IDEM_TESTS_TESTING_KAFKA_TEST_UTIL_H_

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "idem/engine.h"
#include "idem/kafka/consumer.h"
#include "idem/kafka/mock_cluster.h"
#include "idem/kafka/producer.h"

namespace idem::test {

// Kafka protocol: API keys and error codes the tests inject
// (kafka::MockCluster::FailNextRequests).
inline constexpr int16_t kOffsetCommit = 8;
inline constexpr int16_t kEndTxn = 26;
inline constexpr int16_t kTxnOffsetCommit = 28;
inline constexpr int32_t kIllegalGeneration = 22;
inline constexpr int32_t kRebalanceInProgress = 27;
inline constexpr int32_t kProducerFenced = 90;

// A mock cluster with one topic and a producer for it; fails the test (and
// leaves `cluster` null) if setting up fails.
struct KafkaTestBed {
  std::unique_ptr<kafka::MockCluster> cluster;
  std::unique_ptr<kafka::Producer> producer;
  std::string topic;
};
void StartKafka(const std::string& topic, int partitions, KafkaTestBed& bed);

// The records produced, per message ID.
struct ProducedStream {
  std::vector<kafka::OutgoingRecord> records;
  std::set<std::string> unique_ids;
  int duplicates = 0;  // records whose ID an earlier record already had
};
// `count` records spread round-robin over `partitions`; every
// `duplicate_every`-th record (0: none) repeats the ID of a random earlier
// record, as a producer retry or a re-publish would. Value: "<amount>".
ProducedStream MakeStream(const std::string& topic, int partitions, int count,
                          int duplicate_every, uint64_t seed);

// The effect of a message: state "applied/<id>" += 1, and the partition's
// "total" (PartitionTxn) += amount. Result: "ok:<id>".
absl::Status ApplyRecord(const kafka::Record& record, Txn& txn);

// As ApplyRecord with every write made through PartitionTxn(topic,
// partition), as changelog mode requires: "applied/<id>" and "total" are
// the partition's.
absl::Status ApplyInPartition(const kafka::Record& record, Txn& txn);

// "applied/<id>" of ApplyInPartition over `partitions` partitions of `topic`.
std::map<std::string, int> PartitionAppliedCounts(Engine& engine,
                                                  const std::string& topic,
                                                  int partitions);

// Stage one of a pipeline: ApplyRecord, then emits the record's key and
// value to `downstream` (committed with it, through the outbox).
absl::Status ApplyAndForward(const kafka::Record& record, Txn& txn,
                             const std::string& downstream);

// The message ID the outbox gives the first emit of the message `id`.
std::string FirstEmitId(std::string_view id);

// As ApplyAndForward with ApplyInPartition (changelog mode).
absl::Status ApplyInPartitionAndForward(const kafka::Record& record, Txn& txn,
                                        const std::string& downstream);

// State "applied/<id>" of every ID in `engine` (IDs never applied absent).
std::map<std::string, int> AppliedCounts(Engine& engine);

// The partitions of `topic` whose "total" (the partition's state, as
// ApplyRecord and ApplyInPartition keep it) in `engine` (in the
// partition's shard) differs from `totals`, as "p<partition> total <got> !=
// <want>"; empty if none.
std::vector<std::string> TotalErrors(Engine& engine, const std::string& topic,
                                     const std::map<int32_t, int64_t>& totals);

// Sums per ID over several engines' AppliedCounts.
std::map<std::string, int> Merge(
    const std::vector<std::map<std::string, int>>&);

// IDs of `expected` not applied exactly once in `applied`, and IDs applied
// that were not expected, as "<id>: <count>" lines; empty if none.
std::vector<std::string> EffectErrors(
    const std::set<std::string>& expected,
    const std::map<std::string, int>& applied);

// How often each message-id header appears in `topic` on `brokers`, each
// partition read from its start with isolation.level `isolation`
// ("read_committed" or "read_uncommitted"). Fails the test if it cannot
// read.
std::map<std::string, int> MessageIdCounts(
    const std::string& brokers, const std::string& topic,
    const std::string& isolation = "read_committed");

// The IDs of `counts` not seen exactly once, as "<id>: <count>"; empty if
// none.
std::vector<std::string> NotOnce(const std::map<std::string, int>& counts);

// Calls consumer.PollBatch(handler) until `done()` or `timeout`; returns
// PollBatch's first error, or kDeadlineExceeded.
absl::Status PollUntil(kafka::Consumer& consumer, kafka::Handler handler,
                       const std::function<bool()>& done,
                       absl::Duration timeout = absl::Seconds(60));

// librdkafka 2.0.2's mock cluster elects the first member of an empty group
// this long after its JoinGroup (its stand-in for the brokers'
// group.initial.rebalance.delay.ms; rdkafka_mock_cgrp.c). Its session sweep,
// once a second, drops a member whose session.timeout.ms has passed since
// that JoinGroup, waiting answer included: the answer is never sent, and the
// member's connection stays blocked until librdkafka gives the JoinGroup up
// (max.poll.interval.ms + 3 s, 303 s by default). A session of exactly this
// long lost that race whenever the sweep ran late (2 of 109 runs of the
// transactional outage test on a loaded machine: the consumer rejoined its
// emptied group and was never answered).
inline constexpr int kMockFirstElectionMs = 3000;
// How long the mock's election may run late without dropping the member: the
// margin its rebalances of a group with members leave too (they wait
// session.timeout.ms - 1 s).
inline constexpr int kMockElectionMarginMs = 1000;
// session.timeout.ms of the tests' consumers (TestConsumerOptions and the
// child consumer): as short as the mock's first election allows, so that a
// killed member's partitions move on soon. A test that sets
// max.poll.interval.ms sets it to at least this (librdkafka refuses less).
inline constexpr int kTestSessionTimeoutMs =
    kMockFirstElectionMs + kMockElectionMarginMs;

// ConsumerOptions for `bed` with fast settings for tests (short poll and
// retry backoff, session.timeout.ms kTestSessionTimeoutMs).
kafka::ConsumerOptions TestConsumerOptions(const KafkaTestBed& bed,
                                           const std::string& group);

// Starts the child consumer `child` (the path of kafka_consumer_child, which
// the tests get as IDEM_KAFKA_CHILD) with `args` as its arguments; its pid,
// or an error if it could not be started. The caller waits for it.
absl::StatusOr<pid_t> SpawnKafkaChild(const std::string& child,
                                      std::vector<std::string> args);

// Calls `done` every 10 ms until it returns true (then true) or `timeout`
// has passed (then false).
bool WaitUntil(const std::function<bool()>& done, absl::Duration timeout);

// Waits up to `timeout` for the child `pid` to end: its wait status, or
// kDeadlineExceeded (the child SIGKILLed and reaped) if it did not end in
// time.
absl::StatusOr<int> WaitForExit(pid_t pid, absl::Duration timeout);

// Waits up to `timeout` for the child `pid` to SIGKILL itself at the kill
// point its --die_at names (test::KillPoint). OK if it did;
// kDeadlineExceeded (the child killed) if it did not end in time; kInternal
// if it ended otherwise.
absl::Status WaitForKillPoint(pid_t pid,
                              absl::Duration timeout = absl::Seconds(60));

// How many records of `topic`'s partitions [0, partitions) `engine` has
// committed: the sum of each committed offset + 1.
int64_t CommittedRecords(Engine& engine, const std::string& topic,
                         int partitions);

// The same for the store at `store`, read through a read-only engine, so
// while another process writes the store; 0 if it cannot be opened yet.
int64_t CommittedRecords(const std::string& store, const std::string& topic,
                         int partitions);

}  // namespace idem::test

#endif  // IDEM_TESTS_TESTING_KAFKA_TEST_UTIL_H_
