#include "bench/scaling/cpu_work.h"

#include <time.h>
#define XXH_INLINE_ALL
#include <xxhash.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace idem::scaling {
namespace {

uint64_t HashRounds(std::string_view payload, uint64_t rounds) {
  uint64_t seed = 0;
  for (uint64_t i = 0; i < rounds; ++i) {
    seed = XXH3_64bits_withSeed(payload.data(), payload.size(), seed);
  }
  return seed;
}

}  // namespace

absl::StatusOr<absl::Duration> ThreadCpuTime() {
  timespec now{};
  if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now) != 0) {
    return absl::InternalError(absl::StrCat(
        "clock_gettime(CLOCK_THREAD_CPUTIME_ID): ", std::strerror(errno)));
  }
  return absl::DurationFromTimespec(now);
}

absl::StatusOr<CpuWork> CpuWork::Calibrate(size_t payload_bytes,
                                           absl::Duration calibrate_for) {
  const std::string payload(payload_bytes, 'p');
  absl::StatusOr<absl::Duration> start = ThreadCpuTime();
  if (!start.ok()) return start.status();
  uint64_t rounds = 0;
  uint64_t sink = 0;
  absl::Duration spent;
  // Doubling batches until the CPU time is long enough to divide by.
  for (uint64_t step = 1024;; step *= 2) {
    sink ^= HashRounds(payload, step);
    rounds += step;
    absl::StatusOr<absl::Duration> now = ThreadCpuTime();
    if (!now.ok()) return now.status();
    spent = *now - *start;
    if (spent >= calibrate_for) break;
  }
  // `sink` keeps the calls from being optimized away.
  const double per_us = static_cast<double>(rounds + (sink & 1)) /
                        absl::ToDoubleMicroseconds(spent);
  return CpuWork(per_us);
}

uint64_t CpuWork::Run(std::string_view payload, int micros) const {
  if (micros <= 0) return 0;
  const auto rounds =
      static_cast<uint64_t>(std::llround(rounds_per_us_ * micros));
  return HashRounds(payload, rounds);
}

}  // namespace idem::scaling
