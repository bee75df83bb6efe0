// RedisConsumerTest: the fixture of the Redis Streams suites
// (redis_consumer_test.cc, redis_hostile_test.cc). It starts redis-server
// once per suite (servers/redis_server.h), gives each test streams of its
// own (prefix_), a connection to produce and inspect with, and the consumer
// options the tests start from; and the commands the tests share. Not
// thread-safe (a gtest fixture).

#ifndef IDEM_TESTS_BROKERS_REDIS_SUITE_H_
#define IDEM_TESTS_BROKERS_REDIS_SUITE_H_

#include <hiredis/hiredis.h>

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "examples/ledger.h"
#include "gtest/gtest.h"
#include "idem/redis/consumer.h"
#include "redis/connection.h"
#include "servers/redis_server.h"
#include "tests/brokers/server_suite.h"

namespace idem::redis {

using examples::ExpectedBalances;
using examples::LedgerMessage;

// Runs `argv` on `connection`, failing the test on error; returns the reply.
inline Reply RedisCommand(Connection& connection,
                          const std::vector<std::string>& argv) {
  absl::StatusOr<Reply> reply = connection.Command(argv);
  EXPECT_TRUE(reply.ok()) << reply.status();
  return reply.ok() ? *std::move(reply) : nullptr;
}

// XADDs `messages` to `stream`, each with its message-id; every
// `duplicate_every`-th one (0: none) a second time, as a producer retry.
// Returns what applying each message once leaves.
inline ExpectedBalances Produce(Connection& connection,
                                const std::string& stream,
                                const std::vector<LedgerMessage>& messages,
                                int accounts, int duplicate_every) {
  ExpectedBalances expected(accounts);
  for (size_t i = 0; i < messages.size(); ++i) {
    const LedgerMessage& m = messages[i];
    expected.Add(m.payment);
    RedisCommand(connection, {"XADD", stream, "*", "message-id", m.id,
                              "payload", m.payload});
    if (duplicate_every > 0 && i % duplicate_every == 0) {
      RedisCommand(connection, {"XADD", stream, "*", "message-id", m.id,
                                "payload", m.payload});
    }
  }
  return expected;
}

// The group's pending count and lag (XINFO GROUPS); -1 when unknown.
inline std::pair<int64_t, int64_t> PendingAndLag(Connection& connection,
                                                 const std::string& stream,
                                                 const std::string& group) {
  Reply reply = RedisCommand(connection, {"XINFO", "GROUPS", stream});
  if (reply == nullptr || reply->type != REDIS_REPLY_ARRAY) return {-1, -1};
  for (size_t g = 0; g < reply->elements; ++g) {
    const redisReply* fields = reply->element[g];
    int64_t pending = -1, lag = -1;
    bool match = false;
    for (size_t f = 0; f + 1 < fields->elements; f += 2) {
      const std::string_view name = ReplyString(fields->element[f]);
      const redisReply* value = fields->element[f + 1];
      if (name == "name") match = ReplyString(value) == group;
      if (name == "pending") pending = value->integer;
      if (name == "lag" && value->type == REDIS_REPLY_INTEGER) {
        lag = value->integer;
      }
    }
    if (match) return {pending, lag};
  }
  return {-1, -1};
}

// The entries of `stream` as field maps (the last value of a repeated name).
inline std::vector<std::map<std::string, std::string>> Entries(
    Connection& connection, const std::string& stream) {
  std::vector<std::map<std::string, std::string>> out;
  Reply reply = RedisCommand(connection, {"XRANGE", stream, "-", "+"});
  if (reply == nullptr) return out;
  for (size_t i = 0; i < reply->elements; ++i) {
    const redisReply* fields = reply->element[i]->element[1];
    std::map<std::string, std::string>& entry = out.emplace_back();
    for (size_t f = 0; f + 1 < fields->elements; f += 2) {
      entry[std::string(ReplyString(fields->element[f]))] =
          std::string(ReplyString(fields->element[f + 1]));
    }
  }
  return out;
}

class RedisConsumerTest : public test::ServerSuite<RedisConsumerTest> {
 public:
  static absl::StatusOr<std::unique_ptr<servers::ServerProcess>> StartServer() {
    return servers::StartRedisServer();
  }

 protected:
  void SetUp() override {
    ServerSuite::SetUp();
    if (IsSkipped() || HasFailure()) return;
    connection_ = servers::ConnectRedis(server_->port());
    prefix_ = TestName() + "/";  // each test has its own streams
  }

  ConsumerOptions BaseOptions(const std::string& stream,
                              const std::string& consumer) const {
    ConsumerOptions options;
    options.port = server_->port();
    options.stream = stream;
    options.group = "g";
    options.consumer_name = consumer;
    options.claim_idle = absl::Milliseconds(200);
    options.claim_interval = absl::Milliseconds(50);
    options.delivery.max_batch = 50;
    options.delivery.receive_timeout = absl::Milliseconds(20);
    options.delivery.retry_backoff = absl::Milliseconds(1);
    options.delivery.dead_letter_destination = prefix_ + "dead";
    return options;
  }

  // Polls until the group has nothing pending and nothing unread.
  void Drain(Consumer& consumer, const std::string& stream, Handler handler) {
    test::Drain(consumer, handler, [&] {
      return PendingAndLag(*connection_, stream, "g") ==
             std::pair<int64_t, int64_t>(0, 0);
    });
  }

  std::unique_ptr<Connection> connection_;
  std::string prefix_;
};

}  // namespace idem::redis

#endif  // IDEM_TESTS_BROKERS_REDIS_SUITE_H_
