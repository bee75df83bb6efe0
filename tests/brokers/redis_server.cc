#include "tests/brokers/redis_server.h"

#include <signal.h>

#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace idem::test {

absl::StatusOr<std::unique_ptr<RedisServer>> RedisServer::Start() {
  absl::StatusOr<util::TempDir> dir = util::TempDir::Create("idem_redis_");
  if (!dir.ok()) return dir.status();
  absl::StatusOr<int> port = FreeLoopbackPort();
  if (!port.ok()) return port.status();
  std::unique_ptr<RedisServer> server(new RedisServer(*std::move(dir), *port));
  if (absl::Status s = server->Launch(); !s.ok()) return s;
  return server;
}

RedisServer::~RedisServer() {
  if (process_) process_->Signal(SIGTERM);
}

absl::Status RedisServer::Launch() {
  absl::StatusOr<ChildProcess> process = ChildProcess::Spawn(
      {"redis-server", "--port", absl::StrCat(port_), "--bind", "127.0.0.1",
       "--dir", dir_.path(), "--save", "", "--appendonly", "yes",
       "--appendfsync", "always", "--daemonize", "no"},
      dir_.Sub("redis.log"));
  if (!process.ok()) return process.status();
  process_.emplace(*std::move(process));
  auto connection = Connect();
  absl::Status ready = WaitFor(
      [&] {
        if (process_->Exited()) return true;
        return connection->Command({"PING"}).ok();
      },
      absl::Seconds(10), "redis-server to answer PING");
  if (ready.ok() && process_->Exited()) {
    ready = absl::UnavailableError("redis-server exited");
  }
  if (!ready.ok()) {
    return absl::UnavailableError(
        absl::StrCat(ready.message(), "; its log:\n", Log()));
  }
  return absl::OkStatus();
}

absl::Status RedisServer::Restart() {
  if (process_) process_->Signal(SIGTERM);
  process_.reset();
  return Launch();
}

std::unique_ptr<redis::Connection> RedisServer::Connect() const {
  return std::make_unique<redis::Connection>("127.0.0.1", port_,
                                             absl::Seconds(5));
}

std::string RedisServer::Log() const {
  std::ifstream in(dir_.Sub("redis.log"));
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

redis::Reply RedisCommand(redis::Connection& connection,
                          const std::vector<std::string>& argv) {
  absl::StatusOr<redis::Reply> reply = connection.Command(argv);
  EXPECT_TRUE(reply.ok()) << reply.status();
  return reply.ok() ? *std::move(reply) : nullptr;
}

}  // namespace idem::test
