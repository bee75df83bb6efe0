// The built-in crash-test workloads: ledger (the shared ledger of
// examples/ledger.h: every balance and their total), inventory (one
// reservation per order, the inbox-pattern example) and pipeline (the
// ledger, emitting to a downstream ledger through the outbox).

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
#include "engine/absl_view.h"
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

// Compares the balances in `engine` with `expected`, the effect of `count`
// applied `what` (e.g. "payments"); kDataLoss naming the first difference.
absl::Status CompareBalances(Engine& engine,
                             const examples::ExpectedBalances& expected,
                             size_t count, const char* what) {
  absl::StatusOr<examples::BalanceCheck> check =
      examples::CheckBalances(engine, expected);
  if (!check.ok()) return check.status();
  if (!check->first_mismatch.empty()) {
    return absl::DataLossError(absl::StrCat(check->first_mismatch, " (", count,
                                            " ", what, " applied)"));
  }
  if (!check->ok()) {
    return absl::DataLossError(
        absl::StrCat("the balances sum to ", check->actual_total, ", the ",
                     count, " applied ", what, " to ", check->expected_total));
  }
  return absl::OkStatus();
}

// Marks a message's effect, for EffectPresent: its payload under its ID.
std::string EntryKey(std::string_view id) {
  return absl::StrCat("entry/", std::string(id));
}

class LedgerWorkload : public Workload {
 public:
  // `name` is also the message IDs' prefix.
  explicit LedgerWorkload(std::string name = "ledger")
      : name_(std::move(name)) {}

  std::string name() const override { return name_; }

  // Payments add to balances of the shard they commit in: each shard holds
  // its own accounts.
  bool supports_shards() const override { return true; }

  std::vector<StreamMessage> Generate(uint64_t seed,
                                      size_t count) const override {
    examples::LedgerStreamOptions options;
    options.seed = seed;
    options.accounts = kAccounts;
    options.id_prefix = name_;
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
    return CompareBalances(engine, expected, applied.size(), "payments");
  }

 private:
  const std::string name_;
};

// ---- pipeline: the ledger, whose handler emits a ledger entry per payment
// (to "ledger-entries", keyed by account: the payment and the balance it
// left) and a notice per payment above kLargeAmount (to "large-payments",
// keyed by payment ID); the downstream applies the entries to balances of
// its own and keeps the notices.
constexpr char kLedgerEntries[] = "ledger-entries";
constexpr char kLargePayments[] = "large-payments";
constexpr char kPaymentIdHeader[] = "payment-id";
constexpr int64_t kLargeAmount = 500;

// The payment of a ledger entry "<payment> <balance>".
std::string_view EntryPayment(std::string_view value) {
  return value.substr(0, value.find(' '));
}

std::string NoticeKey(std::string_view payment_id) {
  return absl::StrCat("large/", AbslView(payment_id));
}

class PipelineWorkload : public LedgerWorkload, public Downstream {
 public:
  PipelineWorkload() : LedgerWorkload("pipeline") {}

  const Downstream* downstream() const override { return this; }

  // The relay reads one outbox (Engine::ReadOutbox); a sharded engine has
  // one per shard.
  bool supports_shards() const override { return false; }

  absl::Status Handle(const Message& message, Txn& txn) const override {
    if (absl::Status s = LedgerWorkload::Handle(message, txn); !s.ok()) {
      return s;
    }
    absl::StatusOr<examples::Payment> payment =
        examples::ParsePayment(message.payload);
    if (!payment.ok()) return payment.status();
    absl::StatusOr<std::optional<std::string>> balance =
        txn.Get(examples::BalanceKey(payment->account));
    if (!balance.ok()) return balance.status();
    const Txn::Header headers[] = {{kPaymentIdHeader, message.id}};
    txn.EmitWithHeaders(
        kLedgerEntries, examples::AccountName(payment->account),
        absl::StrCat(AbslView(message.payload), " ", balance->value_or("0")),
        headers);
    if (payment->amount > kLargeAmount) {
      txn.Emit(kLargePayments, message.id, message.payload);
    }
    return absl::OkStatus();
  }

  uint32_t EmitCount(const StreamMessage& message) const override {
    absl::StatusOr<examples::Payment> payment =
        examples::ParsePayment(message.payload);
    return payment.ok() && payment->amount > kLargeAmount ? 2 : 1;
  }

  absl::Status Apply(const OutboxEntry& entry, Txn& txn) const override {
    if (entry.destination == kLedgerEntries) {
      return examples::ApplyPayment(EntryPayment(entry.value), txn);
    }
    if (entry.destination == kLargePayments) {
      txn.Put(NoticeKey(entry.key), entry.value);
      return absl::OkStatus();
    }
    return absl::InvalidArgumentError(
        absl::StrCat("unknown destination ", entry.destination));
  }

  absl::Status VerifyDownstream(
      Engine& downstream,
      absl::Span<const AppliedEntry> applied) const override {
    examples::ExpectedBalances expected(kAccounts);
    size_t entries = 0;
    for (const AppliedEntry& a : applied) {
      if (absl::Status s = CheckEmitted(a); !s.ok()) return s;
      if (a.entry.destination == kLedgerEntries) {
        absl::StatusOr<examples::Payment> payment =
            examples::ParsePayment(EntryPayment(a.entry.value));
        if (!payment.ok() || payment->account >= kAccounts) {
          return absl::DataLossError(
              absl::StrCat(a.entry.message_id, " is not a ledger entry"));
        }
        expected.Add(*payment);
        ++entries;
        continue;
      }
      absl::StatusOr<std::optional<std::string>> notice =
          downstream.GetState(NoticeKey(a.entry.key));
      if (!notice.ok()) return notice.status();
      if (notice->value_or("<none>") != a.entry.value) {
        return absl::DataLossError(absl::StrCat(
            "the notice of ", a.entry.message_id, " holds '",
            notice->value_or("<none>"), "', expected '", a.entry.value, "'"));
      }
    }
    return CompareBalances(downstream, expected, entries, "ledger entries");
  }

 private:
  // Whether the applied entry is what emit `emit_index` of its input is
  // (any entry without a committed input is reported by the harness).
  static absl::Status CheckEmitted(const AppliedEntry& a) {
    if (a.input == nullptr) return absl::OkStatus();
    const OutboxEntry& e = a.entry;
    absl::StatusOr<examples::Payment> payment =
        examples::ParsePayment(a.input->payload);
    if (!payment.ok()) return absl::InternalError(payment.status().message());
    const bool as_emitted =
        a.emit_index == 0
            ? e.destination == kLedgerEntries &&
                  e.key == examples::AccountName(payment->account) &&
                  EntryPayment(e.value) == a.input->payload &&
                  e.headers ==
                      std::vector<std::pair<std::string, std::string>>{
                          {kPaymentIdHeader, a.input->id}}
            : a.emit_index == 1 && payment->amount > kLargeAmount &&
                  e.destination == kLargePayments && e.key == a.input->id &&
                  e.value == a.input->payload && e.headers.empty();
    if (as_emitted) return absl::OkStatus();
    return absl::DataLossError(absl::StrCat(
        "the downstream applied ", e.message_id, " as (", e.destination, ", ",
        e.key, ", ", e.value, "), which is not emit ", a.emit_index, " of ",
        a.input->id, " (", a.input->payload, ")"));
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

std::unique_ptr<Workload> NewPipelineWorkload() {
  return std::make_unique<PipelineWorkload>();
}

absl::StatusOr<std::unique_ptr<Workload>> NewBuiltinWorkload(
    const std::string& name) {
  if (name == "ledger") return NewLedgerWorkload();
  if (name == "inventory") return NewInventoryWorkload();
  if (name == "pipeline") return NewPipelineWorkload();
  if (name == "transfers") return NewTransfersWorkload();
  if (name == "orders") return NewOrdersWorkload();
  if (name == "windows") return NewWindowsWorkload();
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown workload '", name,
      "' (built-in: ledger, inventory, pipeline, transfers, orders, windows)"));
}

}  // namespace idem::crash
