#include "servers/server_process.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

extern char** environ;

namespace idem::servers {

absl::StatusOr<int> FreeLoopbackPort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return absl::UnavailableError("socket failed");
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = 0;
  socklen_t length = sizeof(address);
  if (bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    close(fd);
    return absl::UnavailableError(
        absl::StrCat("binding a loopback port: ", std::strerror(errno)));
  }
  close(fd);
  return ntohs(address.sin_port);
}

absl::StatusOr<ChildProcess> ChildProcess::Spawn(
    const std::vector<std::string>& argv, const std::string& log_path) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, log_path.c_str(),
                                   O_WRONLY | O_CREAT | O_APPEND, 0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  std::vector<char*> args;
  for (const std::string& arg : argv)
    args.push_back(const_cast<char*>(arg.c_str()));
  args.push_back(nullptr);
  pid_t pid = -1;
  const int rc =
      posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) {
    return absl::UnavailableError(
        absl::StrCat("spawning ", argv[0], ": ", std::strerror(rc)));
  }
  return ChildProcess(pid);
}

ChildProcess::ChildProcess(ChildProcess&& other) noexcept
    : pid_(std::exchange(other.pid_, -1)) {}

ChildProcess& ChildProcess::operator=(ChildProcess&& other) noexcept {
  if (this != &other) {
    Signal(SIGKILL);
    pid_ = std::exchange(other.pid_, -1);
  }
  return *this;
}

ChildProcess::~ChildProcess() { Signal(SIGKILL); }

int ChildProcess::Signal(int signal) {
  if (pid_ <= 0) return -1;
  kill(pid_, signal);
  int status = 0;
  waitpid(pid_, &status, 0);
  pid_ = -1;
  return status;
}

bool ChildProcess::Exited() {
  if (pid_ <= 0) return true;
  int status = 0;
  if (waitpid(pid_, &status, WNOHANG) == pid_) {
    pid_ = -1;
    return true;
  }
  return false;
}

absl::Status WaitFor(const std::function<bool()>& ready, absl::Duration timeout,
                     const std::string& what) {
  const absl::Time deadline = absl::Now() + timeout;
  while (!ready()) {
    if (absl::Now() > deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat("timed out after ", absl::FormatDuration(timeout),
                       " waiting for ", what));
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<ServerProcess>> ServerProcess::Start(
    std::string name, Command command, Ready ready, absl::Duration timeout,
    Stop stop) {
  absl::StatusOr<util::TempDir> dir =
      util::TempDir::Create(absl::StrCat("idem_", name, "_"));
  if (!dir.ok()) return dir.status();
  absl::StatusOr<int> port = FreeLoopbackPort();
  if (!port.ok()) return port.status();
  std::unique_ptr<ServerProcess> server(
      new ServerProcess(std::move(name), std::move(command), std::move(ready),
                        timeout, std::move(stop), *std::move(dir), *port));
  if (absl::Status s = server->Launch(); !s.ok()) return s;
  return server;
}

ServerProcess::ServerProcess(std::string name, Command command, Ready ready,
                             absl::Duration timeout, Stop stop,
                             util::TempDir dir, int port)
    : name_(std::move(name)),
      command_(std::move(command)),
      ready_(std::move(ready)),
      timeout_(timeout),
      stop_(std::move(stop)),
      dir_(std::move(dir)),
      port_(port) {}

ServerProcess::~ServerProcess() { Halt(); }

void ServerProcess::Halt() {
  if (!process_) return;
  if (stop_) stop_(dir_.path());
  process_->Signal(SIGTERM);
  process_.reset();
}

absl::Status ServerProcess::Launch() {
  absl::StatusOr<ChildProcess> process =
      ChildProcess::Spawn(command_(port_, dir_.path()), dir_.Sub("server.log"));
  if (!process.ok()) return process.status();
  process_.emplace(*std::move(process));
  absl::Status ready =
      WaitFor([&] { return process_->Exited() || ready_(port_); }, timeout_,
              absl::StrCat(name_, " to accept connections"));
  if (!ready.ok()) Halt();
  if (ready.ok() && process_->Exited()) {
    process_.reset();
    ready = absl::UnavailableError(absl::StrCat(name_, " exited"));
  }
  if (!ready.ok()) {
    return absl::UnavailableError(
        absl::StrCat(ready.message(), "; its log:\n", Log()));
  }
  return absl::OkStatus();
}

absl::Status ServerProcess::Restart() {
  Halt();
  return Launch();
}

std::string ServerProcess::Log() const {
  std::ifstream in(dir_.Sub("server.log"));
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace idem::servers
