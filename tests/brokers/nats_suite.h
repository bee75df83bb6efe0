// NatsConsumerTest: the fixture of the NATS JetStream suites
// (nats_consumer_test.cc, nats_redelivery_test.cc). It starts nats-server
// -js once per suite (servers/nats_server.h), gives each test a stream of
// its own named after it, a client to produce and inspect with, and the
// consumer options the tests start from. Not thread-safe (a gtest fixture).

#ifndef IDEM_TESTS_BROKERS_NATS_SUITE_H_
#define IDEM_TESTS_BROKERS_NATS_SUITE_H_

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "examples/ledger.h"
#include "gtest/gtest.h"
#include "idem/nats/consumer.h"
#include "servers/nats_server.h"
#include "tests/brokers/server_suite.h"

namespace idem::nats {

using examples::ExpectedBalances;
using examples::LedgerMessage;

class NatsConsumerTest : public test::ServerSuite<NatsConsumerTest> {
 public:
  static absl::StatusOr<std::unique_ptr<servers::ServerProcess>> StartServer() {
    return servers::StartNatsServer();
  }

 protected:
  void SetUp() override {
    ServerSuite::SetUp();
    if (IsSkipped() || HasFailure()) return;
    Reconnect();
    // Each test has its own streams: names without '/' or '.'.
    stream_ = TestName();
    for (char& c : stream_) {
      if (c == '/' || c == '.') c = '_';
    }
  }

  void Reconnect() {
    client_.reset();
    absl::StatusOr<std::unique_ptr<servers::NatsClient>> client =
        servers::NatsClient::Connect(servers::NatsUrl(server_->port()));
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = *std::move(client);
  }

  // Reads `stream_` (subject `<stream_>.in`) as durable "d"; IDs from the
  // header "message-id", which JetStream's own duplicate window ignores, so
  // producer duplicates reach the consumer.
  ConsumerOptions BaseOptions() const {
    ConsumerOptions options;
    options.url = servers::NatsUrl(server_->port());
    options.stream = stream_;
    options.subject = stream_ + ".in";
    options.durable = "d";
    options.id_header = "message-id";
    options.ack_wait = absl::Seconds(1);
    options.delivery.max_batch = 50;
    options.delivery.receive_timeout = absl::Milliseconds(20);
    options.delivery.retry_backoff = absl::Milliseconds(1);
    options.delivery.dead_letter_destination = stream_ + ".dead";
    return options;
  }

  // Publishes `messages` to `<stream_>.in` with header message-id; every
  // `duplicate_every`-th (0: none) twice, as a producer retry.
  ExpectedBalances Produce(const std::vector<LedgerMessage>& messages,
                           int accounts, int duplicate_every) {
    ExpectedBalances expected(accounts);
    for (size_t i = 0; i < messages.size(); ++i) {
      expected.Add(messages[i].payment);
      const int copies =
          duplicate_every > 0 && i % duplicate_every == 0 ? 2 : 1;
      for (int c = 0; c < copies; ++c) {
        absl::Status s = client_->Publish(stream_ + ".in", messages[i].payload,
                                          {{"message-id", messages[i].id}});
        EXPECT_TRUE(s.ok()) << s;
      }
    }
    return expected;
  }

  // Creates the stream capturing the dead letters (subject
  // `<stream_>.dead`, stream `<stream_>_dead`), through a consumer of it on
  // a store of its own.
  void CreateDeadLetterStream() {
    ConsumerOptions dead_options = BaseOptions();
    dead_options.stream = stream_ + "_dead";
    dead_options.subject = stream_ + ".dead";
    std::unique_ptr<Engine> unused = OpenEngine("dead-letter-reader");
    auto dead_reader = Consumer::Create(unused.get(), dead_options);
    ASSERT_TRUE(dead_reader.ok()) << dead_reader.status();
  }

  bool Drained(const std::string& stream, const std::string& durable) {
    absl::StatusOr<std::pair<int64_t, int64_t>> pending =
        client_->PendingAndAckPending(stream, durable);
    return pending.ok() && *pending == std::pair<int64_t, int64_t>(0, 0);
  }

  std::unique_ptr<servers::NatsClient> client_;
  std::string stream_;
};

}  // namespace idem::nats

#endif  // IDEM_TESTS_BROKERS_NATS_SUITE_H_
