// The built-in crash-test workloads: ledger (the shared ledger of
// examples/ledger.h: every balance and their total) and inventory (one
// reservation per order, the inbox-pattern example).

#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "examples/ledger.h"
#include "examples/ledger_stream.h"
#include "idem/crash/harness.h"

namespace idem::crash {
namespace {

// Reads an integer state value through `source` (a Txn while handling, the
// Engine while verifying); `absent` if the key does not exist.
template <typename Source>
absl::StatusOr<int64_t> ReadInt(Source& source, const std::string& key,
                                int64_t absent) {
  absl::StatusOr<std::optional<std::string>> v;
  if constexpr (std::is_same_v<Source, Txn>) {
    v = source.Get(key);
  } else {
    v = source.GetState(key);
  }
  if (!v.ok()) return v.status();
  if (!v->has_value()) return absent;
  int64_t n = 0;
  if (!absl::SimpleAtoi(**v, &n)) {
    return absl::DataLossError(absl::StrCat("bad integer at ", key));
  }
  return n;
}

// Parses "a b c" into integers.
bool ParseInts(std::string_view payload, std::vector<int64_t>* out) {
  out->clear();
  for (absl::string_view part :
       absl::StrSplit(absl::string_view(payload.data(), payload.size()), ' ')) {
    int64_t n = 0;
    if (!absl::SimpleAtoi(part, &n)) return false;
    out->push_back(n);
  }
  return true;
}

// ---- ledger: the shared ledger (examples/ledger.h), payments on accounts.
constexpr int kAccounts = 64;

// Marks a message's effect, for EffectPresent: its payload under its ID.
std::string EntryKey(std::string_view id) {
  return absl::StrCat("entry/", std::string(id));
}

class LedgerWorkload : public Workload {
 public:
  std::string name() const override { return "ledger"; }

  std::vector<StreamMessage> Generate(uint64_t seed,
                                      size_t count) const override {
    examples::LedgerStreamOptions options;
    options.seed = seed;
    options.accounts = kAccounts;
    options.id_prefix = "ledger";
    std::vector<StreamMessage> messages;
    messages.reserve(count);
    for (examples::LedgerMessage& m :
         examples::MakeLedgerMessages(options, count)) {
      messages.push_back({std::move(m.id), std::move(m.payload)});
    }
    return messages;
  }

  absl::Status Handle(const Message& message, Txn& txn) const override {
    if (absl::Status s = examples::HandlePayment(message, txn); !s.ok()) {
      return s;
    }
    txn.Put(EntryKey(message.id), std::string(message.payload));
    return absl::OkStatus();
  }

  absl::StatusOr<bool> EffectPresent(
      Engine& engine, const StreamMessage& message) const override {
    absl::StatusOr<std::optional<std::string>> v =
        engine.GetState(EntryKey(message.id));
    if (!v.ok()) return v.status();
    return v->has_value();
  }

  absl::Status Verify(Engine& engine,
                      absl::Span<const StreamMessage> applied) const override {
    examples::ExpectedBalances expected(kAccounts);
    for (const StreamMessage& m : applied) {
      absl::StatusOr<examples::Payment> payment =
          examples::ParsePayment(m.payload);
      if (!payment.ok()) return absl::InternalError(payment.status().message());
      expected.Add(*payment);
    }
    absl::StatusOr<examples::BalanceCheck> check =
        examples::CheckBalances(engine, expected);
    if (!check.ok()) return check.status();
    if (!check->first_mismatch.empty()) {
      return absl::DataLossError(absl::StrCat(
          check->first_mismatch, " (", applied.size(), " payments applied)"));
    }
    if (!check->ok()) {
      return absl::DataLossError(absl::StrCat(
          "the balances sum to ", check->actual_total, ", the ", applied.size(),
          " applied payments to ", check->expected_total));
    }
    return absl::OkStatus();
  }
};

// ---- inventory: payload "<order> <product> <quantity>".
constexpr int kProducts = 16;
constexpr int64_t kInitialStock = 1'000'000'000;

std::string StockKey(int64_t p) { return absl::StrCat("stock/", p); }
std::string ReservationKey(int64_t o) {
  return absl::StrCat("reservation/", o);
}
std::string MarkerKey(std::string_view id) {
  return absl::StrCat("msg/", std::string(id));
}

class InventoryWorkload : public Workload {
 public:
  std::string name() const override { return "inventory"; }

  std::vector<StreamMessage> Generate(uint64_t seed,
                                      size_t count) const override {
    std::mt19937_64 rng(seed ^ 0x9e3779b97f4a7c15ull);
    // About a third of the messages repeat an order under a new message ID
    // (the business-key constraint must absorb them).
    const uint64_t orders = count * 2 / 3 + 1;
    std::vector<StreamMessage> messages(count);
    for (size_t i = 0; i < count; ++i) {
      const uint64_t order = rng() % orders;
      // An order always names the same product and quantity.
      const uint64_t product = order % kProducts;
      const uint64_t quantity = 1 + order % 5;
      messages[i].id = absl::StrCat("inventory-", seed, "-", i);
      messages[i].payload = absl::StrCat(order, " ", product, " ", quantity);
    }
    return messages;
  }

  absl::Status Handle(const Message& message, Txn& txn) const override {
    std::vector<int64_t> f;
    if (!ParseInts(message.payload, &f) || f.size() != 3) {
      return absl::InvalidArgumentError("inventory payload");
    }
    absl::StatusOr<std::optional<std::string>> existing =
        txn.Get(ReservationKey(f[0]));
    if (!existing.ok()) return existing.status();
    if (existing->has_value()) {
      txn.Put(MarkerKey(message.id), "already-reserved");
      txn.SetResult("already-reserved");
      return absl::OkStatus();
    }
    absl::StatusOr<int64_t> stock = ReadInt(txn, StockKey(f[1]), kInitialStock);
    if (!stock.ok()) return stock.status();
    if (*stock < f[2]) return absl::FailedPreconditionError("out of stock");
    txn.Put(StockKey(f[1]), absl::StrCat(*stock - f[2]));
    txn.Put(ReservationKey(f[0]), std::string(message.id));
    txn.Put(MarkerKey(message.id), "reserved");
    txn.SetResult("reserved");
    return absl::OkStatus();
  }

  absl::StatusOr<bool> EffectPresent(
      Engine& engine, const StreamMessage& message) const override {
    absl::StatusOr<std::optional<std::string>> v =
        engine.GetState(MarkerKey(message.id));
    if (!v.ok()) return v.status();
    return v->has_value();
  }

  absl::Status Verify(Engine& engine,
                      absl::Span<const StreamMessage> applied) const override {
    // order -> the applied messages for it.
    std::map<int64_t, std::vector<const StreamMessage*>> by_order;
    std::map<int64_t, int64_t> reserved_per_product;
    std::vector<int64_t> f;
    for (const StreamMessage& m : applied) {
      if (!ParseInts(m.payload, &f) || f.size() != 3) {
        return absl::InternalError("inventory payload");
      }
      by_order[f[0]].push_back(&m);
    }
    for (const auto& [order, messages] : by_order) {
      absl::StatusOr<std::optional<std::string>> holder =
          engine.GetState(ReservationKey(order));
      if (!holder.ok()) return holder.status();
      if (!holder->has_value()) {
        return absl::DataLossError(absl::StrCat(
            "order ", order, " has applied messages but no reservation"));
      }
      int reserved = 0;
      for (const StreamMessage* m : messages) {
        absl::StatusOr<std::optional<std::string>> marker =
            engine.GetState(MarkerKey(m->id));
        if (!marker.ok()) return marker.status();
        const bool is_holder = m->id == **holder;
        const std::string want = is_holder ? "reserved" : "already-reserved";
        if (marker->value_or("") != want) {
          return absl::DataLossError(absl::StrCat(
              "message ", m->id, " for order ", order, " is marked '",
              marker->value_or("<none>"), "', expected '", want, "'"));
        }
        if (is_holder) {
          ++reserved;
          ParseInts(m->payload, &f);
          reserved_per_product[f[1]] += f[2];
        }
      }
      if (reserved != 1) {
        return absl::DataLossError(
            absl::StrCat("order ", order, " is reserved by ", **holder,
                         ", which is not one of its applied messages"));
      }
    }
    for (int64_t p = 0; p < kProducts; ++p) {
      absl::StatusOr<int64_t> stock =
          ReadInt(engine, StockKey(p), kInitialStock);
      if (!stock.ok()) return stock.status();
      if (*stock != kInitialStock - reserved_per_product[p]) {
        return absl::DataLossError(
            absl::StrCat("product ", p, " stock is ", *stock, ", expected ",
                         kInitialStock - reserved_per_product[p]));
      }
    }
    return absl::OkStatus();
  }
};

}  // namespace

std::unique_ptr<Workload> NewLedgerWorkload() {
  return std::make_unique<LedgerWorkload>();
}

std::unique_ptr<Workload> NewInventoryWorkload() {
  return std::make_unique<InventoryWorkload>();
}

absl::StatusOr<std::unique_ptr<Workload>> NewBuiltinWorkload(
    const std::string& name) {
  if (name == "ledger") return NewLedgerWorkload();
  if (name == "inventory") return NewInventoryWorkload();
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown workload '", name, "' (built-in: ledger, inventory)"));
}

}  // namespace idem::crash
