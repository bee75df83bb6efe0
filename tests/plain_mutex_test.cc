// PlainMutex (engine/plain_mutex.h): the commit lock's mutual exclusion.

#include "engine/plain_mutex.h"

#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace idem {
namespace {

// A read-modify-write split by a yield loses updates unless the lock
// excludes the other threads for the whole of it.
TEST(PlainMutexTest, ExcludesOtherHoldersForTheWholeScope) {
  PlainMutex mu;
  int counter = 0;
  constexpr int kThreads = 4;
  constexpr int kRounds = 2000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kRounds; ++i) {
        PlainMutexLock lock(&mu);
        const int seen = counter;
        std::this_thread::yield();
        counter = seen + 1;
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(counter, kThreads * kRounds);
}

}  // namespace
}  // namespace idem
