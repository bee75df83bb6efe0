// The simulated-time Env (bench/idem_bench/clock_env.h).

#include "bench/idem_bench/clock_env.h"

#include <memory>

#include "rocksdb/system_clock.h"

namespace idem::bench {
namespace {

class ClockSystemClock : public rocksdb::SystemClockWrapper {
 public:
  ClockSystemClock(const std::shared_ptr<rocksdb::SystemClock>& base,
                   Clock* clock)
      : SystemClockWrapper(base), clock_(clock) {}
  const char* Name() const override { return "idem.bench.ClockSystemClock"; }
  rocksdb::Status GetCurrentTime(int64_t* unix_time) override {
    *unix_time = absl::ToUnixSeconds(clock_->Now());
    return rocksdb::Status::OK();
  }

 private:
  Clock* const clock_;
};

class ClockEnv : public rocksdb::EnvWrapper {
 public:
  ClockEnv(rocksdb::Env* base, Clock* clock) : EnvWrapper(base), clock_(clock) {
    system_clock_ =
        std::make_shared<ClockSystemClock>(base->GetSystemClock(), clock);
  }
  const char* Name() const override { return "idem.bench.ClockEnv"; }
  rocksdb::Status GetCurrentTime(int64_t* unix_time) override {
    *unix_time = absl::ToUnixSeconds(clock_->Now());
    return rocksdb::Status::OK();
  }

 private:
  Clock* const clock_;
};

}  // namespace

std::unique_ptr<rocksdb::Env> NewClockEnv(rocksdb::Env* base, Clock* clock) {
  return std::make_unique<ClockEnv>(base, clock);
}

}  // namespace idem::bench
