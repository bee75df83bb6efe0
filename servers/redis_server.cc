#include "servers/redis_server.h"

#include "absl/strings/str_cat.h"

namespace idem::servers {

namespace {

// What every server here runs with: plain connections on `port` ("0":
// none), on loopback, in `dir`, no snapshots.
std::vector<std::string> BaseArgv(const std::string& port,
                                  const std::string& dir) {
  return {"redis-server",
          "--port",
          port,
          "--bind",
          "127.0.0.1",
          "--dir",
          dir,
          "--save",
          "",
          "--daemonize",
          "no"};
}

}  // namespace

absl::StatusOr<std::unique_ptr<ServerProcess>> StartRedisServer(
    RedisPersistence persistence) {
  return ServerProcess::Start(
      "redis-server",
      [persistence](int port,
                    const std::string& dir) -> std::vector<std::string> {
        std::vector<std::string> argv = BaseArgv(absl::StrCat(port), dir);
        if (persistence == RedisPersistence::kSyncedAppendOnly) {
          argv.insert(argv.end(),
                      {"--appendonly", "yes", "--appendfsync", "always"});
        } else {
          argv.insert(argv.end(), {"--appendonly", "no"});
        }
        return argv;
      },
      [](int port) { return ConnectRedis(port)->Command({"PING"}).ok(); });
}

absl::StatusOr<std::unique_ptr<ServerProcess>> StartRedisTlsServer(
    const RedisTlsServer& tls) {
  return ServerProcess::Start(
      "redis-server",
      [tls](int port, const std::string& dir) -> std::vector<std::string> {
        std::vector<std::string> argv = BaseArgv("0", dir);  // TLS only
        const bool client_certs = !tls.client_ca_file.empty();
        argv.insert(argv.end(),
                    {"--appendonly", "no", "--tls-port", absl::StrCat(port),
                     "--tls-cert-file", tls.cert_file, "--tls-key-file",
                     tls.key_file, "--tls-ca-cert-file",
                     client_certs ? tls.client_ca_file : tls.cert_file,
                     "--tls-auth-clients", client_certs ? "yes" : "no"});
        if (!tls.password.empty()) {
          argv.insert(argv.end(), {"--requirepass", tls.password});
        }
        return argv;
      },
      [tls](int port) {
        return redis::Connection("127.0.0.1", port, absl::Seconds(5), "",
                                 tls.password, tls.client)
            .Command({"PING"})
            .ok();
      });
}

std::unique_ptr<redis::Connection> ConnectRedis(int port) {
  return std::make_unique<redis::Connection>("127.0.0.1", port,
                                             absl::Seconds(5));
}

}  // namespace idem::servers
