// Helpers for the concurrency tests: threads released together, and integer
// counters kept in state keys (read through a Txn or committed). Header-only;
// the functions are thread-safe as far as the engine and Txn they use are.

#ifndef IDEM_TESTS_TESTING_PARALLEL_H_
#define IDEM_TESTS_TESTING_PARALLEL_H_

#include <cstdint>
#include <functional>
#include <latch>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "idem/engine.h"
#include "idem/txn.h"

namespace idem::test {

// Runs `body(i)` for i in [0, n) on n threads released together by a start
// barrier, and joins them.
inline void RunTogether(int n, const std::function<void(int)>& body) {
  std::latch start(n);
  std::vector<std::thread> threads;
  threads.reserve(n);
  for (int i = 0; i < n; ++i) {
    threads.emplace_back([&, i] {
      start.arrive_and_wait();
      body(i);
    });
  }
  for (std::thread& t : threads) t.join();
}

// The integer in `value` (absent: 0); kInternal if it is not one.
inline absl::StatusOr<int64_t> ParseCounter(
    const std::optional<std::string>& value) {
  int64_t n = 0;
  if (value.has_value() && !absl::SimpleAtoi(*value, &n)) {
    return absl::InternalError("bad counter value '" + *value + "'");
  }
  return n;
}

// Reads an integer state key (absent = 0) through a Txn.
inline absl::StatusOr<int64_t> ReadCounter(Txn& txn, const std::string& key) {
  absl::StatusOr<std::optional<std::string>> v = txn.Get(key);
  if (!v.ok()) return v.status();
  return ParseCounter(*v);
}

// The committed value of an integer state key (absent = 0).
inline absl::StatusOr<int64_t> CommittedCounter(Engine& engine,
                                                const std::string& key) {
  absl::StatusOr<std::optional<std::string>> v = engine.GetState(key);
  if (!v.ok()) return v.status();
  return ParseCounter(*v);
}

}  // namespace idem::test

#endif  // IDEM_TESTS_TESTING_PARALLEL_H_
