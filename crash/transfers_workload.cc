// The "transfers" crash-test workload: each message moves an amount between
// two of a few shared accounts, so that handlers on different worker
// threads read and write the same keys at the same time. The engine's
// serializable state (a handler whose read changed under it runs again)
// must keep every balance equal to the committed transfers and the total at
// zero; SelfTest::kLostUpdates turns that off to show the check fails.
//
// On a sharded engine (CrashTestOptions::shards > 1) state is
// partition-local, so a transfer must stay within its partition's shard:
// the account keys name accounts of the shard the transfer commits in, each
// shard has its own four, and a transfer moves an amount between two of
// them. Each shard's balances must equal its committed transfers and total
// zero. Partitions that share a shard (partition modulo shards) share its
// accounts, so threads that deliver them still contend.

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "engine/absl_view.h"
#include "examples/ledger.h"
#include "idem/crash/harness.h"

namespace idem::crash {
namespace {

// Few accounts, so that concurrent transfers touch the same ones.
constexpr int kTransferAccounts = 4;

// "acct-00001:-37 acct-00002:37": the debit, then the credit.
std::string EncodeTransfer(int from, int to, int64_t amount) {
  return absl::StrCat(examples::EncodePayment({from, -amount}), " ",
                      examples::EncodePayment({to, amount}));
}

absl::StatusOr<std::vector<examples::Payment>> ParseTransfer(
    std::string_view payload) {
  std::vector<examples::Payment> legs;
  for (absl::string_view part : absl::StrSplit(AbslView(payload), ' ')) {
    absl::StatusOr<examples::Payment> leg =
        examples::ParsePayment(std::string_view(part.data(), part.size()));
    if (!leg.ok()) return leg.status();
    legs.push_back(*leg);
  }
  if (legs.size() != 2 || legs[0].amount != -legs[1].amount) {
    return absl::InvalidArgumentError(
        absl::StrCat("not a transfer: ", AbslView(payload)));
  }
  return legs;
}

// Marks a transfer's effect, for EffectPresent.
std::string TransferKey(std::string_view id) {
  return absl::StrCat("transfer/", std::string(id));
}

class TransfersWorkload : public Workload {
 public:
  std::string name() const override { return "transfers"; }

  bool supports_shards() const override { return true; }

  std::vector<StreamMessage> Generate(uint64_t seed,
                                      size_t count) const override {
    std::mt19937_64 rng(seed);
    std::vector<StreamMessage> messages;
    messages.reserve(count);
    for (size_t i = 0; i < count; ++i) {
      const int from = static_cast<int>(rng() % kTransferAccounts);
      const int to =
          (from + 1 + static_cast<int>(rng() % (kTransferAccounts - 1))) %
          kTransferAccounts;
      const int64_t amount = 1 + static_cast<int64_t>(rng() % 100);
      messages.push_back({absl::StrCat("transfers-", seed, "-", i),
                          EncodeTransfer(from, to, amount)});
    }
    return messages;
  }

  absl::Status Handle(const Message& message, Txn& txn) const override {
    absl::StatusOr<std::vector<examples::Payment>> legs =
        ParseTransfer(message.payload);
    if (!legs.ok()) return legs.status();
    // The debit reads and writes the source account; a short wait widens
    // the window in which another thread's transfer reads it too, as a
    // handler that calls out would.
    if (absl::Status s =
            examples::ApplyPayment(examples::EncodePayment((*legs)[0]), txn);
        !s.ok()) {
      return s;
    }
    absl::SleepFor(absl::Microseconds(20));
    if (absl::Status s =
            examples::ApplyPayment(examples::EncodePayment((*legs)[1]), txn);
        !s.ok()) {
      return s;
    }
    txn.Put(TransferKey(message.id), std::string(message.payload));
    return absl::OkStatus();
  }

  absl::StatusOr<bool> EffectPresent(
      Engine& engine, const StreamMessage& message) const override {
    absl::StatusOr<std::optional<std::string>> v =
        engine.GetState(TransferKey(message.id));
    if (!v.ok()) return v.status();
    return v->has_value();
  }

  absl::Status Verify(Engine& engine,
                      absl::Span<const StreamMessage> applied) const override {
    examples::ExpectedBalances expected(kTransferAccounts);
    for (const StreamMessage& m : applied) {
      absl::StatusOr<std::vector<examples::Payment>> legs =
          ParseTransfer(m.payload);
      if (!legs.ok()) return absl::InternalError(legs.status().message());
      for (const examples::Payment& leg : *legs) expected.Add(leg);
    }
    absl::StatusOr<examples::BalanceCheck> check =
        examples::CheckBalances(engine, expected);
    if (!check.ok()) return check.status();
    if (!check->first_mismatch.empty()) {
      return absl::DataLossError(absl::StrCat(
          check->first_mismatch, " (", applied.size(), " transfers applied)"));
    }
    if (!check->ok()) {
      return absl::DataLossError(
          absl::StrCat("the balances sum to ", check->actual_total,
                       ", not 0: transfers must conserve the total (",
                       applied.size(), " transfers applied)"));
    }
    return absl::OkStatus();
  }
};

}  // namespace

std::unique_ptr<Workload> NewTransfersWorkload() {
  return std::make_unique<TransfersWorkload>();
}

}  // namespace idem::crash
