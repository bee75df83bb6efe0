// KillPoint: where a test's child process (tests/kafka_relay_child.cc,
// tests/kafka_consumer_child.cc) SIGKILLs itself, as its flag
// --die_at=<step>[:<n>] names it: the n-th time (default: the first) the
// process reaches that step. The steps are the seams a child passes on,
// e.g. a relay round's "commit", "ack" and "acked", or a restore's "chunk".
// Not thread-safe: a child reaches its steps from one thread.

#ifndef IDEM_TESTS_TESTING_KILL_POINT_H_
#define IDEM_TESTS_TESTING_KILL_POINT_H_

#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace idem::test {

class KillPoint {
 public:
  // Never kills.
  KillPoint() = default;

  // Parses the value of --die_at: "<step>" or "<step>:<n>" with n >= 1.
  // kInvalidArgument for an empty step or a bad n.
  static absl::StatusOr<KillPoint> Parse(const std::string& value);

  // Counts one more arrival at `step`; SIGKILLs the process if that is the
  // n-th arrival at the point's step.
  void Reach(std::string_view step);

  // The step the process dies at ("" if none).
  const std::string& step() const { return step_; }

 private:
  std::string step_;
  int n_ = 0;
  int reached_ = 0;
};

}  // namespace idem::test

#endif  // IDEM_TESTS_TESTING_KILL_POINT_H_
