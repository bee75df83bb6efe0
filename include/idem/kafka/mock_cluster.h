// idem::kafka::MockCluster is an in-process Kafka cluster (librdkafka's mock
// cluster: produce, fetch, consumer groups, offset commits and rebalances
// over real Kafka protocol on loopback sockets) for tests and demos. It needs
// no server: point a Consumer or Producer at bootstrap_servers().
//
// Requires the optional idem::kafka library. Not for production: data lives
// in memory and is lost with the object. CreateTopic is safe for concurrent
// access from multiple threads without external synchronization.

#ifndef IDEM_KAFKA_MOCK_CLUSTER_H_
#define IDEM_KAFKA_MOCK_CLUSTER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace idem::kafka {

class MockCluster {
 public:
  // Starts a cluster of `brokers` brokers (>= 1, else kInvalidArgument).
  static absl::StatusOr<std::unique_ptr<MockCluster>> Start(int brokers = 1);

  MockCluster() = default;
  MockCluster(const MockCluster&) = delete;
  MockCluster& operator=(const MockCluster&) = delete;
  // Stops the brokers. REQUIRES: no client is still using the cluster.
  virtual ~MockCluster() = default;

  // "host:port,..." of the brokers.
  virtual const std::string& bootstrap_servers() const = 0;

  // Creates `topic` with `partitions` partitions (>= 1). kInvalidArgument for
  // bad arguments; kAlreadyExists if the topic exists.
  virtual absl::Status CreateTopic(const std::string& topic,
                                   int partitions) = 0;

  // Takes broker `broker` down (`down`: it drops its connections and
  // refuses new ones) or brings it back up; -1 for every broker. Brokers are
  // numbered from 1. Leadership does not move, so clients of a down
  // broker's partitions see an outage until it is up again.
  // kInvalidArgument for a broker the cluster does not have.
  virtual absl::Status SetBrokerDown(int32_t broker, bool down) = 0;

  // The next requests of the Kafka API `api_key` (e.g. 26, EndTxn), to any
  // broker, fail with `errors` (Kafka protocol error codes, e.g. 90,
  // PRODUCER_FENCED), one per request, in order. kInvalidArgument for a
  // negative key or no errors.
  virtual absl::Status FailNextRequests(int16_t api_key,
                                        const std::vector<int32_t>& errors) = 0;

  // Metadata responses report `error` (a Kafka protocol error code, e.g.
  // 29, TOPIC_AUTHORIZATION_FAILED; 0 clears it) for `topic`, as brokers do
  // for a topic a client may not see. REQUIRES: `topic` exists (the mock
  // would create it otherwise).
  virtual void SetTopicError(const std::string& topic, int32_t error) = 0;

  // Makes the brokers honor a client's allow.auto.create.topics, as Kafka
  // brokers since 0.11 do: metadata requests of an unknown topic from a
  // consumer (which sends false by default) leave it unknown until
  // CreateTopic. Without it, librdkafka 2.0.2's mock answers Metadata only
  // up to version 2, which cannot carry the setting, and creates every
  // unknown topic a client asks about (with 4 partitions). kUnavailable if
  // the mock refuses.
  virtual absl::Status HonorAllowAutoCreateTopics() = 0;
};

}  // namespace idem::kafka

#endif  // IDEM_KAFKA_MOCK_CLUSTER_H_
