#include "nats/in_progress.h"

#include <cstring>
#include <string>
#include <utility>

#include "absl/time/clock.h"

namespace idem::nats {
namespace {

constexpr std::string_view kInProgress = "+WPI";

}  // namespace

InProgress::InProgress(natsConnection* connection, absl::Duration interval)
    : connection_(connection), interval_(interval) {
  thread_ = std::thread([this] { Loop(); });
}

InProgress::~InProgress() { Stop(); }

void InProgress::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

void InProgress::Hold(Slot slot, std::string replies) {
  absl::MutexLock lock(&mu_);
  held_[slot] = Held{std::move(replies), absl::Now()};
}

void InProgress::PromotePrefetched() {
  absl::MutexLock lock(&mu_);
  held_[kCurrent] = std::move(held_[kPrefetched]);
  held_[kPrefetched] = Held();
}

void InProgress::Release(Slot slot) {
  absl::MutexLock lock(&mu_);
  held_[slot] = Held();
}

int64_t InProgress::sent() const {
  absl::MutexLock lock(&mu_);
  return sent_;
}

void InProgress::Loop() {
  // Wakes four times per interval, so no message goes much past `interval`
  // without its +WPI.
  const absl::Duration tick = interval_ / 4;
  absl::MutexLock lock(&mu_);
  while (!stop_) {
    mu_.AwaitWithTimeout(absl::Condition(&stop_), tick);
    if (!stop_) PingDue();
  }
}

void InProgress::PingDue() {
  const absl::Time now = absl::Now();
  for (Held& held : held_) {
    if (held.replies.empty() || now - held.since < interval_) continue;
    for (size_t at = 0; at < held.replies.size();) {
      const char* reply = held.replies.c_str() + at;
      at += std::strlen(reply) + 1;
      // A lost connection loses the +WPI: the message comes back after the
      // ack wait, and the engine finds it a duplicate if it was processed.
      if (natsConnection_Publish(connection_, reply, kInProgress.data(),
                                 static_cast<int>(kInProgress.size())) ==
          NATS_OK) {
        ++sent_;
      }
    }
    held.since = now;
  }
}

}  // namespace idem::nats
