// Processes for the broker suites: a child process spawned from an argv
// (a server, or a consumer to SIGKILL), a free loopback port, and the rule
// for a server that cannot start: the test fails under CI (CI=true) and is
// skipped with the reason otherwise, never silently. Not thread-safe.

#ifndef IDEM_TESTS_BROKERS_SERVER_PROCESS_H_
#define IDEM_TESTS_BROKERS_SERVER_PROCESS_H_

#include <sys/types.h>

#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace idem::test {

// A TCP port on 127.0.0.1 that was free a moment ago (bound to port 0, then
// released). kUnavailable if no socket could be bound.
absl::StatusOr<int> FreeLoopbackPort();

// Whether the suite runs under CI (CI=true): a server that cannot start
// then fails the test.
bool UnderCi();

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

}  // namespace idem::test

#endif  // IDEM_TESTS_BROKERS_SERVER_PROCESS_H_
