// FakeBroker: an idem::brokers::Broker in memory, for tests of the
// delivery loop and of what reads its figures. Not thread-safe (the loop
// calls a Broker from one thread).

#ifndef IDEM_TESTS_TESTING_FAKE_BROKER_H_
#define IDEM_TESTS_TESTING_FAKE_BROKER_H_

#include <algorithm>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "idem/brokers/delivery_loop.h"
#include "idem/outbox.h"

namespace idem::test {

// A broker in memory: Receive hands out the queue's head; an unacked
// delivery is lost until Redeliver (a broker's ack timeout) or Nack puts it
// back.
class FakeBroker : public brokers::Broker {
 public:
  void Add(std::string id, std::string payload,
           std::vector<std::pair<std::string, std::string>> headers = {},
           absl::Time event_time = absl::InfinitePast()) {
    brokers::Delivery d;
    d.id = std::move(id);
    d.payload = std::move(payload);
    d.headers = std::move(headers);
    d.event_time = event_time;
    d.source = "in";
    d.offset = next_offset_++;
    d.receipt = absl::StrCat(d.offset);
    queue_.push_back(std::move(d));
  }
  // As Add, as the broker's final delivery of the message
  // (Delivery::final_delivery).
  void AddFinal(std::string id, std::string payload) {
    Add(std::move(id), std::move(payload));
    queue_.back().final_delivery = true;
  }
  // Puts every unacknowledged delivery back at the head of the queue.
  void Redeliver() {
    for (auto it = in_flight_.rbegin(); it != in_flight_.rend(); ++it) {
      queue_.push_front(it->second);
    }
    in_flight_.clear();
  }

  absl::StatusOr<std::vector<brokers::Delivery>> Receive(
      int max, absl::Duration) override {
    if (!receive_error.ok()) return receive_error;
    std::vector<brokers::Delivery> out;
    while (!queue_.empty() && static_cast<int>(out.size()) < max) {
      in_flight_[queue_.front().receipt] = queue_.front();
      out.push_back(std::move(queue_.front()));
      queue_.pop_front();
    }
    return out;
  }
  absl::Status Ack(absl::Span<const brokers::Delivery> deliveries) override {
    if (!ack_error.ok()) return ack_error;
    for (const brokers::Delivery& d : deliveries) {
      if (on_ack) on_ack(d);
      acked.push_back(d.receipt);
      in_flight_.erase(d.receipt);
    }
    return absl::OkStatus();
  }
  absl::Status Nack(absl::Span<const brokers::Delivery> deliveries) override {
    for (const brokers::Delivery& d : deliveries) nacked.push_back(d.receipt);
    Redeliver();
    return absl::OkStatus();
  }
  absl::Status Publish(const OutboxEntry& entry) override {
    if (publish_budget == 0) return absl::UnavailableError("publish refused");
    if (publish_budget > 0) --publish_budget;
    if (auto it = refuse.find(entry.destination); it != refuse.end()) {
      return it->second;
    }
    size_t bytes = entry.value.size();
    for (const auto& [name, value] : entry.headers) {
      bytes += name.size() + value.size();
    }
    if (max_message_bytes > 0 && bytes > max_message_bytes) {
      return absl::OutOfRangeError("message too large");
    }
    published.push_back(entry);
    return absl::OkStatus();
  }
  // No spaces in a destination.
  absl::Status CheckDestination(std::string_view destination) const override {
    if (destination.find(' ') == std::string_view::npos) {
      return absl::OkStatus();
    }
    return absl::InvalidArgumentError("fake broker: no spaces in a name");
  }

  // Records each batch handed back: its receipts, each with whether it was
  // acknowledged or nacked by then.
  void Recycle(std::vector<brokers::Delivery> batch) override {
    std::vector<std::string> receipts;
    for (const brokers::Delivery& d : batch) {
      const bool answered =
          std::find(acked.begin(), acked.end(), d.receipt) != acked.end() ||
          std::find(nacked.begin(), nacked.end(), d.receipt) != nacked.end();
      receipts.push_back(answered ? d.receipt : d.receipt + " unanswered");
    }
    recycled.push_back(std::move(receipts));
  }

  int64_t Reconnects() const override { return reconnects; }
  int64_t CompetingConsumers() const override { return competing; }

  // The entries published to `destination`.
  std::vector<OutboxEntry> PublishedTo(const std::string& destination) const {
    std::vector<OutboxEntry> out;
    for (const OutboxEntry& e : published) {
      if (e.destination == destination) out.push_back(e);
    }
    return out;
  }

  absl::Status receive_error;
  absl::Status ack_error;
  int publish_budget = -1;  // -1: unlimited
  int64_t reconnects = 0;   // what Reconnects reports
  int64_t competing = 0;    // what CompetingConsumers reports
  // Publish refuses these destinations with the status.
  std::map<std::string, absl::Status> refuse;
  // Publish refuses a value and headers over this many bytes (kOutOfRange);
  // 0: any size.
  size_t max_message_bytes = 0;
  std::function<void(const brokers::Delivery&)> on_ack;
  std::vector<std::string> acked;
  std::vector<std::string> nacked;
  std::vector<OutboxEntry> published;
  std::vector<std::vector<std::string>> recycled;

 private:
  std::deque<brokers::Delivery> queue_;
  std::map<std::string, brokers::Delivery> in_flight_;
  int64_t next_offset_ = 0;
};

}  // namespace idem::test

#endif  // IDEM_TESTS_TESTING_FAKE_BROKER_H_
