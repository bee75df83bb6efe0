// CpuWork: a handler's stand-in for real CPU work, W microseconds of it:
// XXH3 over the message's payload, again and again, each round seeded with
// the last one's hash, so that nothing can be skipped or hoisted out of the
// loop. Not a sleep: the work occupies a core for its whole length, as
// parsing, validating or transforming a message does.
//
// Calibrate measures how many rounds a microsecond of this thread's CPU time
// holds (CLOCK_THREAD_CPUTIME_ID), so that Run(payload, W) costs about W µs
// on the machine it runs on. Thread-safe after Calibrate (const).

#ifndef IDEM_BENCH_SCALING_CPU_WORK_H_
#define IDEM_BENCH_SCALING_CPU_WORK_H_

#include <cstdint>
#include <string_view>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace idem::scaling {

class CpuWork {
 public:
  // Hashes a payload of `payload_bytes` for at least `calibrate_for` of this
  // thread's CPU time and derives the rounds per microsecond. kInternal if
  // the thread CPU clock cannot be read.
  static absl::StatusOr<CpuWork> Calibrate(size_t payload_bytes,
                                           absl::Duration calibrate_for);

  // Hashes `payload` for about `micros` µs of CPU time (0: not at all) and
  // returns the last hash (the handler stores it, so the work is used).
  uint64_t Run(std::string_view payload, int micros) const;

  // How many hashing rounds one microsecond holds.
  double rounds_per_us() const { return rounds_per_us_; }

 private:
  explicit CpuWork(double rounds_per_us) : rounds_per_us_(rounds_per_us) {}

  double rounds_per_us_;
};

// This thread's CPU time so far (CLOCK_THREAD_CPUTIME_ID), or an error.
absl::StatusOr<absl::Duration> ThreadCpuTime();

}  // namespace idem::scaling

#endif  // IDEM_BENCH_SCALING_CPU_WORK_H_
