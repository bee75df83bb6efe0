// A private redis-server for the Redis suites (a TestServer): an
// append-only file synced on every write, so a restart keeps the streams,
// groups and acknowledgements. Not thread-safe.

#ifndef IDEM_TESTS_BROKERS_REDIS_SERVER_H_
#define IDEM_TESTS_BROKERS_REDIS_SERVER_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "redis/connection.h"
#include "tests/brokers/server_process.h"

namespace idem::test {

// Starts redis-server; ready once it answers PING.
absl::StatusOr<std::unique_ptr<TestServer>> StartRedisServer();

// A new connection to the server on `port` (for producing and inspecting).
std::unique_ptr<redis::Connection> ConnectRedis(int port);

// Runs `argv` on `connection`, failing the test on error; returns the reply.
redis::Reply RedisCommand(redis::Connection& connection,
                          const std::vector<std::string>& argv);

}  // namespace idem::test

#endif  // IDEM_TESTS_BROKERS_REDIS_SERVER_H_
