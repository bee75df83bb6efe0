// Findings collects what went wrong in a multi-step check, so the check can
// report every failure (the first 20 verbatim, plus a count) instead of
// stopping at the first. Shared checks return Result(), which a real-engine
// test expects to succeed and a broken-variant test expects to fail. Safe
// for concurrent use from multiple threads. FirstFailure repeats a racing
// check until it fails, as a broken-variant test does.

#ifndef IDEM_TESTS_TESTING_FINDINGS_H_
#define IDEM_TESTS_TESTING_FINDINGS_H_

#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"

namespace idem::test {

class Findings {
 public:
  void Fail(const std::string& what) {
    std::lock_guard<std::mutex> lock(mu_);
    if (failures_.size() < 20) failures_.push_back(what);
    ++count_;
  }
  void Expect(bool condition, const std::string& what) {
    if (!condition) Fail(what);
  }
  // Records a failure for a non-OK status; returns whether it was OK.
  bool Ok(const absl::Status& status, const std::string& what) {
    if (status.ok()) return true;
    Fail(what + ": " + status.ToString());
    return false;
  }
  ::testing::AssertionResult Result() {
    std::lock_guard<std::mutex> lock(mu_);
    if (count_ == 0) return ::testing::AssertionSuccess();
    ::testing::AssertionResult result = ::testing::AssertionFailure();
    result << count_ << " failure(s):";
    for (const std::string& f : failures_) result << "\n  - " << f;
    return result;
  }

 private:
  std::mutex mu_;
  std::vector<std::string> failures_;
  int count_ = 0;
};

// Runs `check(round)` for round 0, 1, ... until it fails, at most `rounds`
// times; returns the failure, or success if it never failed.
inline ::testing::AssertionResult FirstFailure(
    int rounds,
    const std::function<::testing::AssertionResult(int round)>& check) {
  for (int round = 0; round < rounds; ++round) {
    ::testing::AssertionResult result = check(round);
    if (!result) return result;
  }
  return ::testing::AssertionSuccess();
}

}  // namespace idem::test

#endif  // IDEM_TESTS_TESTING_FINDINGS_H_
