// Reading crash-harness reports in tests (idem/crash/harness.h). Functions
// only; thread-safe.

#ifndef IDEM_TESTS_TESTING_CRASH_REPORT_H_
#define IDEM_TESTS_TESTING_CRASH_REPORT_H_

#include <string>

#include "absl/strings/str_cat.h"
#include "idem/crash/harness.h"

namespace idem::test {

// "<name>: <first counterexample>\n" for each invariant that failed; empty
// if every one held.
inline std::string FailedInvariants(const crash::CrashTestReport& report) {
  std::string out;
  for (const crash::InvariantResult& r : report.invariants) {
    if (!r.passed) {
      absl::StrAppend(&out, r.name, ": ", r.first_counterexample, "\n");
    }
  }
  return out;
}

}  // namespace idem::test

#endif  // IDEM_TESTS_TESTING_CRASH_REPORT_H_
