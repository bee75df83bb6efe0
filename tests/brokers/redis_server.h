// RedisServer is a private redis-server for the Redis suites: its own
// temporary directory, a free loopback port, an append-only file synced on
// every write (so a restart keeps the streams, groups and acks), stopped
// and removed at the end. Not thread-safe.

#ifndef IDEM_TESTS_BROKERS_REDIS_SERVER_H_
#define IDEM_TESTS_BROKERS_REDIS_SERVER_H_

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "redis/connection.h"
#include "tests/brokers/server_process.h"
#include "util/temp_dir.h"

namespace idem::test {

class RedisServer {
 public:
  // Starts redis-server and waits until it answers PING. kUnavailable (or
  // kDeadlineExceeded) with the reason and the server's log if it cannot.
  static absl::StatusOr<std::unique_ptr<RedisServer>> Start();
  ~RedisServer();

  int port() const { return port_; }
  // Stops the server (SIGTERM: it syncs its append-only file) and starts it
  // again on the same port and directory.
  absl::Status Restart();
  // A new connection to the server (for producing and inspecting).
  std::unique_ptr<redis::Connection> Connect() const;
  std::string Log() const;

 private:
  RedisServer(util::TempDir dir, int port)
      : dir_(std::move(dir)), port_(port) {}
  absl::Status Launch();

  util::TempDir dir_;
  const int port_;
  std::optional<ChildProcess> process_;
};

// Runs `argv` on `connection`, failing the test on error; returns the reply.
redis::Reply RedisCommand(redis::Connection& connection,
                          const std::vector<std::string>& argv);

}  // namespace idem::test

#endif  // IDEM_TESTS_BROKERS_REDIS_SERVER_H_
