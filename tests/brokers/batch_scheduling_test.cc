// ScheduleAsBatchThread (brokers/batch_scheduling.h) and BackgroundCall's
// thread: a normally scheduled thread becomes a batch thread, a thread under
// another policy is left as it is, and the thread that runs BackgroundCall's
// calls is a batch thread while its owner is untouched.

#include "brokers/batch_scheduling.h"

#include <pthread.h>
#include <sched.h>

#include <thread>

#include "brokers/background_call.h"
#include "gtest/gtest.h"

namespace idem::brokers {
namespace {

#ifdef SCHED_BATCH

int PolicyOfThisThread() {
  int policy = -1;
  sched_param param{};
  if (pthread_getschedparam(pthread_self(), &policy, &param) != 0) return -1;
  return policy;
}

// Each case on a thread of its own: a policy, once set, stays with it.
template <typename F>
void OnAFreshThread(F f) {
  std::thread thread(f);
  thread.join();
}

TEST(BatchSchedulingTest, ANormalThreadBecomesABatchThread) {
  OnAFreshThread([] {
    ASSERT_EQ(PolicyOfThisThread(), SCHED_OTHER);
    EXPECT_TRUE(ScheduleAsBatchThread());
    EXPECT_EQ(PolicyOfThisThread(), SCHED_BATCH);
    EXPECT_TRUE(ScheduleAsBatchThread());  // already one
    EXPECT_EQ(PolicyOfThisThread(), SCHED_BATCH);
  });
}

// SCHED_IDLE needs no privilege, so the test can set it; a real-time
// policy would be left alone the same way.
TEST(BatchSchedulingTest, AThreadUnderAnotherPolicyIsLeftAsItIs) {
  OnAFreshThread([] {
    sched_param param{};
    ASSERT_EQ(pthread_setschedparam(pthread_self(), SCHED_IDLE, &param), 0);
    EXPECT_FALSE(ScheduleAsBatchThread());
    EXPECT_EQ(PolicyOfThisThread(), SCHED_IDLE);
  });
}

TEST(BatchSchedulingTest, BackgroundCallsRunOnABatchThreadTheOwnerIsUntouched) {
  OnAFreshThread([] {
    BackgroundCall<int> call;
    for (int i = 0; i < 2; ++i) {
      ASSERT_TRUE(call.Start([] { return PolicyOfThisThread(); }));
      EXPECT_EQ(call.Take(), SCHED_BATCH);
    }
    EXPECT_EQ(PolicyOfThisThread(), SCHED_OTHER);
  });
}

#else

TEST(BatchSchedulingTest, WithoutTheBatchPolicyNothingChanges) {
  EXPECT_FALSE(ScheduleAsBatchThread());
}

#endif

}  // namespace
}  // namespace idem::brokers
