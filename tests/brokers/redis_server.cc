#include "tests/brokers/redis_server.h"

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace idem::test {

absl::StatusOr<std::unique_ptr<TestServer>> StartRedisServer() {
  return TestServer::Start(
      "redis-server",
      [](int port, const std::string& dir) -> std::vector<std::string> {
        return {"redis-server",
                "--port",
                absl::StrCat(port),
                "--bind",
                "127.0.0.1",
                "--dir",
                dir,
                "--save",
                "",
                "--appendonly",
                "yes",
                "--appendfsync",
                "always",
                "--daemonize",
                "no"};
      },
      [](int port) { return ConnectRedis(port)->Command({"PING"}).ok(); });
}

std::unique_ptr<redis::Connection> ConnectRedis(int port) {
  return std::make_unique<redis::Connection>("127.0.0.1", port,
                                             absl::Seconds(5));
}

redis::Reply RedisCommand(redis::Connection& connection,
                          const std::vector<std::string>& argv) {
  absl::StatusOr<redis::Reply> reply = connection.Command(argv);
  EXPECT_TRUE(reply.ok()) << reply.status();
  return reply.ok() ? *std::move(reply) : nullptr;
}

}  // namespace idem::test
