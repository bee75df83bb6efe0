#include "servers/redis_server.h"

#include "absl/strings/str_cat.h"

namespace idem::servers {

absl::StatusOr<std::unique_ptr<ServerProcess>> StartRedisServer() {
  return ServerProcess::Start(
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

}  // namespace idem::servers
