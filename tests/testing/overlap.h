// OverlapCounter: how many calls ran at once, at most, for tests that show
// handlers overlap (they sleep, as handlers that wait on a call do, so the
// overlap shows on any number of cores). Thread-safe.

#ifndef IDEM_TESTS_TESTING_OVERLAP_H_
#define IDEM_TESTS_TESTING_OVERLAP_H_

#include <atomic>

namespace idem::test {

class OverlapCounter {
 public:
  // Counts one call for its lifetime.
  class Scope {
   public:
    explicit Scope(OverlapCounter& counter) : counter_(counter) {
      const int now = ++counter_.running_;
      int seen = counter_.max_.load();
      while (now > seen && !counter_.max_.compare_exchange_weak(seen, now)) {
      }
    }
    ~Scope() { --counter_.running_; }
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    OverlapCounter& counter_;
  };

  // The most calls that were in a Scope at the same time.
  int max() const { return max_.load(); }

 private:
  std::atomic<int> running_{0};
  std::atomic<int> max_{0};
};

}  // namespace idem::test

#endif  // IDEM_TESTS_TESTING_OVERLAP_H_
