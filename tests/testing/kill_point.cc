#include "tests/testing/kill_point.h"

#include <signal.h>

#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace idem::test {

absl::StatusOr<KillPoint> KillPoint::Parse(const std::string& value) {
  std::vector<std::string> parts = absl::StrSplit(value, ':');
  KillPoint point;
  point.step_ = parts[0];
  point.n_ = 1;
  const bool bad_n = parts.size() == 2 &&
                     (!absl::SimpleAtoi(parts[1], &point.n_) || point.n_ < 1);
  if (point.step_.empty() || parts.size() > 2 || bad_n) {
    return absl::InvalidArgumentError(
        absl::StrCat("--die_at: want <step>[:<n>], got '", value, "'"));
  }
  return point;
}

void KillPoint::Reach(std::string_view step) {
  if (step_.empty() || step != step_) return;
  if (++reached_ == n_) raise(SIGKILL);
}

}  // namespace idem::test
