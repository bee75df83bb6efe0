// BackgroundCall (brokers/background_call.h): a started call runs while
// its owner goes on, Take gives its result or rethrows its exception,
// successive calls share one thread, and the destructor waits for a call
// under way.

#include "brokers/background_call.h"

#include <atomic>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace idem::brokers {
namespace {

TEST(BackgroundCallTest, TakeGivesTheStartedCallsResult) {
  BackgroundCall<std::string> call;
  EXPECT_FALSE(call.pending());
  ASSERT_TRUE(call.Start([] { return std::string("fetched"); }));
  EXPECT_TRUE(call.pending());
  EXPECT_EQ(call.Take(), "fetched");
  EXPECT_FALSE(call.pending());
}

// The call waits for a notification its owner gives only after Start has
// returned: it ends only if it runs beside the owner.
TEST(BackgroundCallTest, TheCallRunsWhileItsOwnerGoesOn) {
  BackgroundCall<int> call;
  absl::Notification owner_went_on;
  ASSERT_TRUE(call.Start([&] {
    owner_went_on.WaitForNotification();
    return 7;
  }));
  owner_went_on.Notify();
  EXPECT_EQ(call.Take(), 7);
}

// What std::async would not do: each call on a thread of its own.
TEST(BackgroundCallTest, SuccessiveCallsRunOnOneThreadOtherThanTheOwners) {
  BackgroundCall<std::thread::id> call;
  std::vector<std::thread::id> threads;
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(call.Start([] { return std::this_thread::get_id(); }));
    threads.push_back(call.Take());
  }
  for (const std::thread::id& id : threads) {
    EXPECT_EQ(id, threads.front());
    EXPECT_NE(id, std::this_thread::get_id());
  }
}

// A result can be move-only, and the call can own what it fills.
TEST(BackgroundCallTest, CarriesMoveOnlyCallsAndResults) {
  BackgroundCall<std::unique_ptr<int>> call;
  auto owned = std::make_unique<int>(41);
  ASSERT_TRUE(call.Start([owned = std::move(owned)]() mutable {
    ++*owned;
    return std::move(owned);
  }));
  std::unique_ptr<int> result = call.Take();
  ASSERT_NE(result, nullptr);
  EXPECT_EQ(*result, 42);
}

// As std::future::get: what the call threw is thrown by Take, and the
// thread takes the next call.
TEST(BackgroundCallTest, TakeRethrowsWhatTheCallThrewAndTheNextCallRuns) {
  BackgroundCall<int> call;
  ASSERT_TRUE(call.Start([]() -> int { throw std::runtime_error("no room"); }));
  EXPECT_THROW(
      {
        try {
          call.Take();
        } catch (const std::runtime_error& e) {
          EXPECT_STREQ(e.what(), "no room");
          throw;
        }
      },
      std::runtime_error);
  EXPECT_FALSE(call.pending());
  ASSERT_TRUE(call.Start([] { return 3; }));
  EXPECT_EQ(call.Take(), 3);
}

TEST(BackgroundCallTest, DestructionWaitsForACallUnderWay) {
  std::atomic<bool> ended{false};
  absl::Notification began;
  {
    BackgroundCall<int> call;
    ASSERT_TRUE(call.Start([&] {
      began.Notify();
      absl::SleepFor(absl::Milliseconds(50));
      ended.store(true);
      return 0;
    }));
    began.WaitForNotification();
  }  // not taken
  EXPECT_TRUE(ended.load());
}

TEST(BackgroundCallTest, DestructionWithoutACallEndsTheThread) {
  BackgroundCall<int> call;
  ASSERT_TRUE(call.Start([] { return 1; }));
  EXPECT_EQ(call.Take(), 1);
  // The destructor returns: the thread saw it stop while idle.
}

}  // namespace
}  // namespace idem::brokers
