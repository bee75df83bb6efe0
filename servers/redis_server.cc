#include "servers/redis_server.h"

#include "absl/strings/str_cat.h"

namespace idem::servers {

absl::StatusOr<std::unique_ptr<ServerProcess>> StartRedisServer(
    RedisPersistence persistence) {
  return ServerProcess::Start(
      "redis-server",
      [persistence](int port,
                    const std::string& dir) -> std::vector<std::string> {
        std::vector<std::string> argv = {"redis-server",
                                         "--port",
                                         absl::StrCat(port),
                                         "--bind",
                                         "127.0.0.1",
                                         "--dir",
                                         dir,
                                         "--save",
                                         "",
                                         "--daemonize",
                                         "no"};
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

std::unique_ptr<redis::Connection> ConnectRedis(int port) {
  return std::make_unique<redis::Connection>("127.0.0.1", port,
                                             absl::Seconds(5));
}

}  // namespace idem::servers
