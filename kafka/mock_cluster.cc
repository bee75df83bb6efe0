// MockCluster: librdkafka's mock cluster, owned through a dedicated producer
// handle that exists only to host it.

#include "idem/kafka/mock_cluster.h"

#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kafka/rdkafka_util.h"

namespace idem::kafka {
namespace {

struct MockClusterDeleter {
  void operator()(rd_kafka_mock_cluster_t* cluster) const {
    rd_kafka_mock_cluster_destroy(cluster);
  }
};

class MockClusterImpl final : public MockCluster {
 public:
  MockClusterImpl(HandlePtr host, rd_kafka_mock_cluster_t* cluster, int brokers)
      : host_(std::move(host)),
        cluster_(cluster),
        brokers_(brokers),
        bootstrap_servers_(rd_kafka_mock_cluster_bootstraps(cluster)) {}

  const std::string& bootstrap_servers() const override {
    return bootstrap_servers_;
  }

  absl::Status CreateTopic(const std::string& topic, int partitions) override {
    if (topic.empty() || partitions < 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "MockCluster::CreateTopic: need a topic name and partitions >= 1, "
          "got '",
          topic, "' with ", partitions));
    }
    return FromKafkaError(
        rd_kafka_mock_topic_create(cluster_.get(), topic.c_str(), partitions,
                                   /*replication_factor=*/1),
        absl::StrCat("creating topic ", topic));
  }

  absl::Status SetBrokerDown(int32_t broker, bool down) override {
    if (broker != -1 && (broker < 1 || broker > brokers_)) {
      return absl::InvalidArgumentError(
          absl::StrCat("MockCluster::SetBrokerDown: no broker ", broker,
                       " (brokers are 1 to ", brokers_, ", or -1 for all)"));
    }
    return FromKafkaError(
        down ? rd_kafka_mock_broker_set_down(cluster_.get(), broker)
             : rd_kafka_mock_broker_set_up(cluster_.get(), broker),
        absl::StrCat(down ? "taking down" : "bringing up", " broker ", broker));
  }

  absl::Status FailNextRequests(int16_t api_key,
                                const std::vector<int32_t>& errors) override {
    if (api_key < 0 || errors.empty()) {
      return absl::InvalidArgumentError(
          "MockCluster::FailNextRequests: an API key >= 0 and at least one "
          "error");
    }
    std::vector<rd_kafka_resp_err_t> codes;
    codes.reserve(errors.size());
    for (int32_t error : errors) {
      codes.push_back(static_cast<rd_kafka_resp_err_t>(error));
    }
    rd_kafka_mock_push_request_errors_array(cluster_.get(), api_key,
                                            codes.size(), codes.data());
    return absl::OkStatus();
  }

  absl::Status HonorAllowAutoCreateTopics() override {
    // Metadata version 4 carries AllowAutoTopicCreation, which the mock's
    // handler reads.
    constexpr int16_t kMetadata = 3;
    return FromKafkaError(
        rd_kafka_mock_set_apiversion(cluster_.get(), kMetadata, 0, 4),
        "MockCluster::HonorAllowAutoCreateTopics");
  }

  void SetTopicError(const std::string& topic, int32_t error) override {
    rd_kafka_mock_topic_set_error(cluster_.get(), topic.c_str(),
                                  static_cast<rd_kafka_resp_err_t>(error));
  }

 private:
  // Declared first so it is destroyed last: the cluster needs its host.
  const HandlePtr host_;
  const std::unique_ptr<rd_kafka_mock_cluster_t, MockClusterDeleter> cluster_;
  const int brokers_;
  const std::string bootstrap_servers_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<MockCluster>> MockCluster::Start(int brokers) {
  if (brokers < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "MockCluster::Start: brokers must be >= 1, got ", brokers));
  }
  ConfPtr conf(rd_kafka_conf_new());
  // The host handle never connects anywhere; keep it quiet. Its
  // socket.nagle.disable is what the mock brokers' sockets get: Kafka brokers
  // set TCP_NODELAY, and without it a response written while the previous
  // one is unacknowledged waits for the client's delayed ACK (about 40 ms on
  // Linux loopback), which no real cluster adds.
  if (absl::Status s = SetConfig(
          conf.get(), {{"log_level", "3"}, {"socket.nagle.disable", "true"}});
      !s.ok()) {
    return s;
  }
  absl::StatusOr<HandlePtr> host =
      NewHandle(RD_KAFKA_PRODUCER, std::move(conf));
  if (!host.ok()) return host.status();
  rd_kafka_mock_cluster_t* cluster =
      rd_kafka_mock_cluster_new(host->get(), brokers);
  if (cluster == nullptr) {
    return absl::UnavailableError(
        "MockCluster::Start: could not start brokers");
  }
  return std::make_unique<MockClusterImpl>(*std::move(host), cluster, brokers);
}

}  // namespace idem::kafka
