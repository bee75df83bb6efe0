// Private broker servers and the processes around them, for the broker
// suites (tests/brokers/), idem-broker-demo and the broker benchmarks: a
// child process spawned from an argv (a server, or a consumer to SIGKILL),
// a free loopback port, and a server of its own (ServerProcess) in a
// temporary directory on such a port. Not thread-safe.

#ifndef IDEM_SERVERS_SERVER_PROCESS_H_
#define IDEM_SERVERS_SERVER_PROCESS_H_

#include <sys/types.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "util/temp_dir.h"

namespace idem::servers {

// A TCP port on 127.0.0.1 that was free a moment ago (bound to port 0, then
// released). kUnavailable if no socket could be bound.
absl::StatusOr<int> FreeLoopbackPort();

class ChildProcess {
 public:
  // Spawns argv[0] (searched in PATH) with `argv`, stdout and stderr
  // appended to `log_path`. kUnavailable if it cannot be spawned.
  static absl::StatusOr<ChildProcess> Spawn(
      const std::vector<std::string>& argv, const std::string& log_path);
  ChildProcess(ChildProcess&& other) noexcept;
  ChildProcess& operator=(ChildProcess&& other) noexcept;
  // SIGKILLs and reaps the process if it still runs.
  ~ChildProcess();

  // Sends `signal` and waits for the process to end; returns its wait
  // status. No-op returning -1 once it was reaped.
  int Signal(int signal);
  // Whether the process has exited (reaps it if so).
  bool Exited();
  pid_t pid() const { return pid_; }

 private:
  explicit ChildProcess(pid_t pid) : pid_(pid) {}
  pid_t pid_ = -1;
};

// Polls `ready` every 20 ms until it returns true or `timeout` passes;
// kDeadlineExceeded naming `what` then.
absl::Status WaitFor(const std::function<bool()>& ready, absl::Duration timeout,
                     const std::string& what);

// A private server: its own temporary directory and a free
// loopback port, started from `command(port, dir)` and ready once
// `ready(port)` returns true; stopped with SIGTERM (and the directory
// removed) at the end. Not thread-safe.
class ServerProcess {
 public:
  using Command =
      std::function<std::vector<std::string>(int port, const std::string& dir)>;
  using Ready = std::function<bool(int port)>;
  // Stops a server whose spawned process does not stop it on SIGTERM (a
  // wrapper script); called before that SIGTERM. May be empty.
  using Stop = std::function<void(const std::string& dir)>;

  // Starts the server; kUnavailable (or kDeadlineExceeded) with the reason
  // and the server's log if it cannot start within `timeout`.
  static absl::StatusOr<std::unique_ptr<ServerProcess>> Start(
      std::string name, Command command, Ready ready,
      absl::Duration timeout = absl::Seconds(15), Stop stop = nullptr);
  ~ServerProcess();

  int port() const { return port_; }
  const std::string& dir() const { return dir_.path(); }
  // The spawned process (for a server that is its own process, e.g.
  // nats-server and redis-server, the server's pid), or -1.
  pid_t pid() const { return process_.has_value() ? process_->pid() : -1; }
  // Stops the server (SIGTERM, so it syncs what it keeps) and starts it
  // again on the same port and directory.
  absl::Status Restart();
  // What the server printed.
  std::string Log() const;

 private:
  ServerProcess(std::string name, Command command, Ready ready,
                absl::Duration timeout, Stop stop, util::TempDir dir, int port);
  absl::Status Launch();
  void Halt();

  const std::string name_;
  const Command command_;
  const Ready ready_;
  const absl::Duration timeout_;
  const Stop stop_;
  util::TempDir dir_;
  const int port_;
  std::optional<ChildProcess> process_;
};

}  // namespace idem::servers

#endif  // IDEM_SERVERS_SERVER_PROCESS_H_
