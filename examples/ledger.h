// The ledger: the one example workload that idem-demo, idem-kafka-demo, the
// crash harness's "ledger" workload and the peers benchmark share. A message
// is a payment: an amount (positive or negative) added to one account's
// balance. This file holds what a payment is on the wire, the handler that
// applies it to an engine's state, and the balances a set of payments must
// leave behind, with the check that compares them with a store.
//
// Wire and state formats:
//   payload      "<account name>:<amount>", e.g. "acct-00042:-17"
//   state key    "balance/<account name>", e.g. "balance/acct-00042"
//   state value  the balance in decimal ASCII, e.g. "1234"; absent means 0
//   result       "balance:<new balance>" (what a duplicate gets back)
//
// Free functions are thread-safe. ExpectedBalances is a plain value type:
// not thread-safe.

#ifndef IDEM_EXAMPLES_LEDGER_H_
#define IDEM_EXAMPLES_LEDGER_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "idem/engine.h"
#include "idem/message.h"
#include "idem/txn.h"

namespace idem::examples {

// One payment: `amount` added to the balance of account number `account`.
struct Payment {
  int account = 0;     // >= 0
  int64_t amount = 0;  // may be negative (a debit)
};

// The name of account `account`: "acct-" and at least five digits
// ("acct-00042").
std::string AccountName(int account);

// The payment as a message payload: "acct-00042:123".
std::string EncodePayment(const Payment& payment);

// The payment `payload` encodes; kInvalidArgument naming the payload if it is
// not one (as EncodePayment writes it).
absl::StatusOr<Payment> ParsePayment(std::string_view payload);

// The state key of an account's balance: "balance/acct-00042".
std::string BalanceKey(int account);

// The account whose balance `state_key` holds, if it is a BalanceKey.
std::optional<int> ParseBalanceKey(std::string_view state_key);

// The balance a stored state value holds: 0 when absent, kDataLoss naming
// `key` when it is not a decimal number.
absl::StatusOr<int64_t> DecodeBalance(std::string_view key,
                                      const std::optional<std::string>& value);

// The handler: parses `payload` and adds its amount to the account's balance
// in `txn` (reading it through `txn`, so earlier messages of the same batch
// count), and sets the message's result to "balance:<new balance>". Works on
// any Txn, e.g. a PartitionTxn (idem/partition_state.h). kInvalidArgument for
// a payload that is not a payment (nothing written); the Txn's read errors.
absl::Status ApplyPayment(std::string_view payload, Txn& txn);

// ApplyPayment(message.payload, txn), as an idem::Handler.
absl::Status HandlePayment(const Message& message, Txn& txn);

// What a set of payments, each applied once, leaves on accounts
// [0, accounts): the expected balance of each and their total.
class ExpectedBalances {
 public:
  explicit ExpectedBalances(int accounts);

  // Counts `payment` once. REQUIRES: 0 <= payment.account < accounts().
  void Add(const Payment& payment);

  int accounts() const { return static_cast<int>(balances_.size()); }
  int64_t balance(int account) const { return balances_[account]; }
  int64_t total() const { return total_; }

 private:
  std::vector<int64_t> balances_;
  int64_t total_ = 0;
};

// How the balances stored in an engine compare with the expected ones.
struct BalanceCheck {
  int64_t expected_total = 0;
  int64_t actual_total = 0;  // the sum of the stored balances
  int mismatched_accounts = 0;
  // "account acct-00003 holds 12 but its payments give 15"; empty if none.
  std::string first_mismatch;

  bool ok() const {
    return mismatched_accounts == 0 && actual_total == expected_total;
  }
};

// Reads the balance of every account of `expected` from `engine` (committed
// state, Engine::GetState) and compares. A difference is not an error: it
// shows in the result. Errors: the engine's, or kDataLoss for a stored
// balance that is not a number.
absl::StatusOr<BalanceCheck> CheckBalances(Engine& engine,
                                           const ExpectedBalances& expected);

// As CheckBalances, for a store whose balances were written through
// PartitionTxn(txn, source, p) (idem/partition_state.h), i.e. under
// PartitionStatePrefix(source, p) + BalanceKey(account): an account's
// balance is the sum of what partitions [0, partitions) hold for it (with
// payments keyed by account, one partition holds it all).
// REQUIRES: partitions >= 1.
absl::StatusOr<BalanceCheck> CheckPartitionBalances(
    Engine& engine, std::string_view source, int partitions,
    const ExpectedBalances& expected);

}  // namespace idem::examples

#endif  // IDEM_EXAMPLES_LEDGER_H_
