// A private redis-server (a ServerProcess) for the Redis suites, tools and
// benchmark: by default an append-only file synced on every write, so a
// restart keeps the streams, groups and acknowledgements. Not thread-safe.

#ifndef IDEM_SERVERS_REDIS_SERVER_H_
#define IDEM_SERVERS_REDIS_SERVER_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "redis/connection.h"
#include "servers/server_process.h"

namespace idem::servers {

// What the server keeps across a restart.
enum class RedisPersistence {
  // An append-only file, synced on every write (appendfsync always).
  kSyncedAppendOnly,
  // Nothing: no append-only file, no snapshots (a benchmark's plain loops,
  // which keep nothing either, compared with idem on one server).
  kNone,
};

// Starts redis-server; ready once it answers PING.
absl::StatusOr<std::unique_ptr<ServerProcess>> StartRedisServer(
    RedisPersistence persistence = RedisPersistence::kSyncedAppendOnly);

// A server that takes TLS connections only, on its port.
struct RedisTlsServer {
  // Its certificate and key (PEM).
  std::string cert_file;
  std::string key_file;
  // Clients must present a certificate this CA file (PEM) signed; empty:
  // clients need none.
  std::string client_ca_file;
  // requirepass; empty: none.
  std::string password;
  // How the start-up check connects (it must trust cert_file).
  redis::TlsSettings client;
};

// Starts redis-server taking TLS only, without persistence; ready once it
// answers PING over TLS.
absl::StatusOr<std::unique_ptr<ServerProcess>> StartRedisTlsServer(
    const RedisTlsServer& tls);

// A new connection to the server on `port` (for producing and inspecting).
std::unique_ptr<redis::Connection> ConnectRedis(int port);

}  // namespace idem::servers

#endif  // IDEM_SERVERS_REDIS_SERVER_H_
