// The "orders" crash-test workload, for the state API of docs/state.md:
// messages open and close orders under a few customers (point writes), count
// a customer's open orders with a prefix scan and record the count, or bump
// a per-customer counter with a merge. Every handler also appends its
// message ID to one log key with a merge, which folds in commit order: the
// log is the serial order the engine's commits are equivalent to.
//
// Verify replays the applied messages in the log's order and checks that
// each recorded count is what a serial run in that order would have
// counted (scans are serializable: no phantom got in), that every counter
// equals the sum of its applied bumps (merges lose nothing and apply once),
// that the log holds each applied message exactly once, and that the open
// orders left are the replay's. SelfTest::kSkipRangeValidation turns off the
// validation of scanned ranges to show the check fails.

#include <cstdint>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "engine/absl_view.h"
#include "idem/crash/harness.h"

namespace idem::crash {
namespace {

// Few customers, so that scans and inserts of one customer meet.
constexpr int kOrderCustomers = 4;
constexpr int kOrdersPerCustomer = 6;
constexpr char kOrderLogKey[] = "orders-log";

std::string CustomerPrefix(int64_t customer) {
  return absl::StrCat("open/", customer, "/");
}
std::string OrderKey(int64_t customer, int64_t order) {
  return absl::StrCat(CustomerPrefix(customer), order);
}
std::string CounterKey(int64_t customer) {
  return absl::StrCat("counter/", customer);
}
// The count a "count" message recorded, and the mark of every message.
std::string OrdersMarkKey(std::string_view id) {
  return absl::StrCat("orders-mark/", AbslView(id));
}

// "open C O", "close C O", "count C", "bump C N".
struct OrderEvent {
  std::string kind;
  int64_t customer = 0;
  int64_t arg = 0;
};

absl::StatusOr<OrderEvent> ParseOrderEvent(std::string_view payload) {
  std::vector<std::string> f = absl::StrSplit(AbslView(payload), ' ');
  OrderEvent e;
  if (f.size() < 2 || !absl::SimpleAtoi(f[1], &e.customer) ||
      (f.size() == 3 && !absl::SimpleAtoi(f[2], &e.arg)) || f.size() > 3) {
    return absl::InvalidArgumentError(
        absl::StrCat("not an orders event: ", AbslView(payload)));
  }
  e.kind = f[0];
  return e;
}

class OrdersWorkload : public Workload {
 public:
  std::string name() const override { return "orders"; }

  std::vector<StreamMessage> Generate(uint64_t seed,
                                      size_t count) const override {
    std::mt19937_64 rng(seed ^ 0x6f72646572730000ull);
    std::vector<StreamMessage> messages;
    messages.reserve(count);
    for (size_t i = 0; i < count; ++i) {
      const int64_t customer = static_cast<int64_t>(rng() % kOrderCustomers);
      const int64_t order = static_cast<int64_t>(rng() % kOrdersPerCustomer);
      std::string payload;
      switch (rng() % 4) {
        case 0:
          payload = absl::StrCat("open ", customer, " ", order);
          break;
        case 1:
          payload = absl::StrCat("close ", customer, " ", order);
          break;
        case 2:
          payload = absl::StrCat("count ", customer);
          break;
        default:
          payload = absl::StrCat("bump ", customer, " ", 1 + rng() % 9);
          break;
      }
      messages.push_back({absl::StrCat("orders-", seed, "-", i), payload});
    }
    return messages;
  }

  absl::Status Handle(const Message& message, Txn& txn) const override {
    absl::StatusOr<OrderEvent> e = ParseOrderEvent(message.payload);
    if (!e.ok()) return e.status();
    std::string mark = "done";
    if (e->kind == "open") {
      txn.Put(OrderKey(e->customer, e->arg), std::string(message.id));
    } else if (e->kind == "close") {
      txn.Delete(OrderKey(e->customer, e->arg));
    } else if (e->kind == "count") {
      int64_t open = 0;
      if (absl::Status s =
              txn.ScanPrefix(CustomerPrefix(e->customer),
                             [&](std::string_view, std::string_view) {
                               ++open;
                               return true;
                             });
          !s.ok()) {
        return s;
      }
      // Widens the window in which another thread opens or closes an order
      // of the same customer, as a handler that calls out would.
      absl::SleepFor(absl::Microseconds(50));
      mark = absl::StrCat(open);
    } else if (e->kind == "bump") {
      if (absl::Status s = txn.Merge(CounterKey(e->customer),
                                     MergeOp::kAddInt64, Int64Operand(e->arg));
          !s.ok()) {
        return s;
      }
    } else {
      return absl::InvalidArgumentError("unknown orders event");
    }
    txn.Put(OrdersMarkKey(message.id), mark);
    return txn.Merge(kOrderLogKey, MergeOp::kAppend,
                     absl::StrCat(AbslView(message.id), ";"));
  }

  absl::StatusOr<bool> EffectPresent(
      Engine& engine, const StreamMessage& message) const override {
    absl::StatusOr<std::optional<std::string>> v =
        engine.GetState(OrdersMarkKey(message.id));
    if (!v.ok()) return v.status();
    return v->has_value();
  }

  absl::Status Verify(Engine& engine,
                      absl::Span<const StreamMessage> applied) const override {
    std::map<std::string, const StreamMessage*> by_id;
    for (const StreamMessage& m : applied) by_id[m.id] = &m;
    absl::StatusOr<std::optional<std::string>> log =
        engine.GetState(kOrderLogKey);
    if (!log.ok()) return log.status();
    std::vector<std::string> order =
        absl::StrSplit(log->value_or(""), ';', absl::SkipEmpty());
    if (order.size() != applied.size()) {
      return absl::DataLossError(absl::StrCat("the commit log holds ",
                                              order.size(), " messages; ",
                                              applied.size(), " were applied"));
    }
    // The replay: open orders per customer, counters.
    std::map<int64_t, std::set<int64_t>> open;
    std::map<int64_t, int64_t> counters;
    std::set<std::string> replayed;
    for (const std::string& id : order) {
      auto it = by_id.find(id);
      if (it == by_id.end() || !replayed.insert(id).second) {
        return absl::DataLossError(absl::StrCat(
            "the commit log holds ", id,
            it == by_id.end() ? ", which was not applied" : " twice"));
      }
      absl::StatusOr<OrderEvent> e = ParseOrderEvent(it->second->payload);
      if (!e.ok()) return absl::InternalError(e.status().message());
      if (e->kind == "open") open[e->customer].insert(e->arg);
      if (e->kind == "close") open[e->customer].erase(e->arg);
      if (e->kind == "bump") counters[e->customer] += e->arg;
      if (e->kind != "count") continue;
      absl::StatusOr<std::optional<std::string>> recorded =
          engine.GetState(OrdersMarkKey(id));
      if (!recorded.ok()) return recorded.status();
      const std::string want = absl::StrCat(open[e->customer].size());
      if (recorded->value_or("<none>") != want) {
        return absl::DataLossError(
            absl::StrCat(id, " counted ", recorded->value_or("<none>"),
                         " open orders of customer ", e->customer,
                         "; a serial run in commit order counts ", want));
      }
    }
    for (int64_t c = 0; c < kOrderCustomers; ++c) {
      absl::StatusOr<std::optional<std::string>> v =
          engine.GetState(CounterKey(c));
      if (!v.ok()) return v.status();
      const int64_t got = v->has_value() ? ReadInt64(**v).value_or(-1) : 0;
      if (got != counters[c]) {
        return absl::DataLossError(
            absl::StrCat("customer ", c, "'s counter is ", got,
                         "; its applied bumps sum to ", counters[c]));
      }
      int64_t stored = 0;
      if (absl::Status s =
              engine.ScanState(CustomerPrefix(c), CustomerPrefix(c) + "\xff",
                               [&](std::string_view, std::string_view) {
                                 ++stored;
                                 return true;
                               });
          !s.ok()) {
        return s;
      }
      if (stored != static_cast<int64_t>(open[c].size())) {
        return absl::DataLossError(absl::StrCat(
            "customer ", c, " has ", stored,
            " open orders stored; the replay leaves ", open[c].size()));
      }
    }
    return absl::OkStatus();
  }
};

}  // namespace

std::unique_ptr<Workload> NewOrdersWorkload() {
  return std::make_unique<OrdersWorkload>();
}

}  // namespace idem::crash
