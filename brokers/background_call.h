// BackgroundCall<T>: one call at a time run on a thread of the owner's,
// started on first use and kept for the next call, so that running ahead
// (an adapter fetching its next batch while the loop processes one) does
// not start and end a thread per call as std::async does.
//
// The owner starts a call (Start), goes on, and takes its result (Take),
// which waits for the call to end if it still runs. At most one call is
// started and not yet taken. The destructor waits for a call under way,
// drops one not yet begun and a result not taken.
//
// A call that throws ends with its exception, which Take rethrows on the
// owner's thread (as std::future::get does); the thread serves the next
// call. Start, pending and Take are for one owner thread (the loop's); the
// calls run on the background thread, one after another.
//
// The background thread runs as a batch thread where it can
// (ScheduleAsBatchThread, brokers/batch_scheduling.h): what it does runs
// ahead of its owner, so waking it need not preempt the thread running.

#ifndef IDEM_BROKERS_BACKGROUND_CALL_H_
#define IDEM_BROKERS_BACKGROUND_CALL_H_

#include <exception>
#include <optional>
#include <system_error>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/synchronization/mutex.h"
#include "brokers/batch_scheduling.h"

namespace idem::brokers {

template <typename T>
class BackgroundCall {
 public:
  using Call = absl::AnyInvocable<T() &&>;

  BackgroundCall() = default;
  BackgroundCall(const BackgroundCall&) = delete;
  BackgroundCall& operator=(const BackgroundCall&) = delete;
  ~BackgroundCall() {
    {
      absl::MutexLock lock(&mu_);
      stop_ = true;
    }
    if (thread_.joinable()) thread_.join();
  }

  // Runs `call` on the background thread, started now if it is not yet.
  // Returns false, and runs nothing, if no thread could be started (the
  // caller then makes the call itself). REQUIRES: !pending().
  bool Start(Call call) {
    if (!thread_.joinable()) {
      try {
        thread_ = std::thread([this] { Loop(); });
      } catch (const std::system_error&) {
        return false;
      }
    }
    absl::MutexLock lock(&mu_);
    call_ = std::move(call);
    pending_ = true;
    return true;
  }

  // A call was started and its result is not taken yet.
  bool pending() const { return pending_; }

  // The started call's result, once it has ended; rethrows what the call
  // threw. REQUIRES: pending().
  T Take() {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(&ended_));
    ended_ = false;
    pending_ = false;
    if (error_ != nullptr) {
      std::exception_ptr error = std::move(error_);
      error_ = nullptr;
      std::rethrow_exception(error);
    }
    T result = *std::move(result_);
    result_.reset();
    return result;
  }

 private:
  bool HasWork() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return stop_ || call_ != nullptr;
  }

  void Loop() {
    ScheduleAsBatchThread();
    while (true) {
      Call call;
      {
        absl::MutexLock lock(&mu_);
        mu_.Await(absl::Condition(this, &BackgroundCall::HasWork));
        if (stop_) return;  // a call not begun is dropped
        call = std::move(call_);
        call_ = nullptr;
      }
      std::optional<T> result;
      std::exception_ptr error;
      try {
        result.emplace(std::move(call)());
      } catch (...) {
        error = std::current_exception();
      }
      absl::MutexLock lock(&mu_);
      result_ = std::move(result);
      error_ = std::move(error);
      ended_ = true;
    }
  }

  absl::Mutex mu_;
  Call call_ ABSL_GUARDED_BY(mu_);
  std::optional<T> result_ ABSL_GUARDED_BY(mu_);
  std::exception_ptr error_ ABSL_GUARDED_BY(mu_);
  // The started call has ended (result_ or error_ holds how).
  bool ended_ ABSL_GUARDED_BY(mu_) = false;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  // The owner thread's alone.
  bool pending_ = false;
  std::thread thread_;
};

}  // namespace idem::brokers

#endif  // IDEM_BROKERS_BACKGROUND_CALL_H_
