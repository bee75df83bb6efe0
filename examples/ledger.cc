// The ledger's formats, handler and balance check (examples/ledger.h).

#include "examples/ledger.h"

#include <algorithm>
#include <functional>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "idem/partition_state.h"

namespace idem::examples {
namespace {

constexpr std::string_view kAccountPrefix = "acct-";
constexpr std::string_view kBalancePrefix = "balance/";

absl::string_view AbslView(std::string_view s) {
  return absl::string_view(s.data(), s.size());
}

// The account number of an account name ("acct-00042": 42).
std::optional<int> ParseAccountName(std::string_view name) {
  if (!name.starts_with(kAccountPrefix)) return std::nullopt;
  const std::string_view digits = name.substr(kAccountPrefix.size());
  if (digits.empty() || !std::all_of(digits.begin(), digits.end(), [](char c) {
        return absl::ascii_isdigit(static_cast<unsigned char>(c));
      })) {
    return std::nullopt;
  }
  int account = 0;
  if (!absl::SimpleAtoi(AbslView(digits), &account)) return std::nullopt;
  return account;
}

// The balance stored under `key` in `engine` (committed state).
absl::StatusOr<int64_t> ReadBalance(Engine& engine, const std::string& key) {
  absl::StatusOr<std::optional<std::string>> stored = engine.GetState(key);
  if (!stored.ok()) return stored.status();
  return DecodeBalance(key, *stored);
}

// Compares the balance `read` returns for each account of `expected`.
absl::StatusOr<BalanceCheck> CompareBalances(
    const ExpectedBalances& expected,
    const std::function<absl::StatusOr<int64_t>(int account)>& read) {
  BalanceCheck check;
  check.expected_total = expected.total();
  for (int account = 0; account < expected.accounts(); ++account) {
    absl::StatusOr<int64_t> balance = read(account);
    if (!balance.ok()) return balance.status();
    check.actual_total += *balance;
    if (*balance == expected.balance(account)) continue;
    if (check.mismatched_accounts++ == 0) {
      check.first_mismatch =
          absl::StrCat("account ", AccountName(account), " holds ", *balance,
                       " but its payments give ", expected.balance(account));
    }
  }
  return check;
}

}  // namespace

std::string AccountName(int account) {
  return absl::StrFormat("acct-%05d", account);
}

std::string EncodePayment(const Payment& payment) {
  return absl::StrCat(AccountName(payment.account), ":", payment.amount);
}

absl::StatusOr<Payment> ParsePayment(std::string_view payload) {
  const size_t colon = payload.find(':');
  Payment payment;
  std::optional<int> account = colon == std::string_view::npos
                                   ? std::nullopt
                                   : ParseAccountName(payload.substr(0, colon));
  if (!account.has_value() ||
      !absl::SimpleAtoi(AbslView(payload.substr(colon + 1)), &payment.amount)) {
    return absl::InvalidArgumentError(
        absl::StrCat("not a payment: '", AbslView(payload), "'"));
  }
  payment.account = *account;
  return payment;
}

std::string BalanceKey(int account) {
  return absl::StrCat(AbslView(kBalancePrefix), AccountName(account));
}

std::optional<int> ParseBalanceKey(std::string_view state_key) {
  if (!state_key.starts_with(kBalancePrefix)) return std::nullopt;
  return ParseAccountName(state_key.substr(kBalancePrefix.size()));
}

absl::StatusOr<int64_t> DecodeBalance(std::string_view key,
                                      const std::optional<std::string>& value) {
  int64_t balance = 0;
  if (value.has_value() && !absl::SimpleAtoi(*value, &balance)) {
    return absl::DataLossError(absl::StrCat("the balance under ", AbslView(key),
                                            " is not a number: '", *value,
                                            "'"));
  }
  return balance;
}

absl::Status ApplyPayment(std::string_view payload, Txn& txn) {
  absl::StatusOr<Payment> payment = ParsePayment(payload);
  if (!payment.ok()) return payment.status();
  const std::string key = BalanceKey(payment->account);
  absl::StatusOr<std::optional<std::string>> stored = txn.Get(key);
  if (!stored.ok()) return stored.status();
  absl::StatusOr<int64_t> balance = DecodeBalance(key, *stored);
  if (!balance.ok()) return balance.status();
  const int64_t updated = *balance + payment->amount;
  txn.Put(key, absl::StrCat(updated));
  txn.SetResult(absl::StrCat("balance:", updated));
  return absl::OkStatus();
}

absl::Status HandlePayment(const Message& message, Txn& txn) {
  return ApplyPayment(message.payload, txn);
}

ExpectedBalances::ExpectedBalances(int accounts)
    : balances_(static_cast<size_t>(std::max(accounts, 0)), 0) {}

void ExpectedBalances::Add(const Payment& payment) {
  balances_[payment.account] += payment.amount;
  total_ += payment.amount;
}

absl::StatusOr<BalanceCheck> CheckBalances(Engine& engine,
                                           const ExpectedBalances& expected) {
  return CompareBalances(expected, [&](int account) {
    return ReadBalance(engine, BalanceKey(account));
  });
}

absl::StatusOr<BalanceCheck> CheckPartitionBalances(
    Engine& engine, std::string_view source, int partitions,
    const ExpectedBalances& expected) {
  return CompareBalances(expected, [&](int account) -> absl::StatusOr<int64_t> {
    int64_t sum = 0;
    for (int32_t p = 0; p < partitions; ++p) {
      absl::StatusOr<int64_t> balance = ReadBalance(
          engine, PartitionStatePrefix(source, p) + BalanceKey(account));
      if (!balance.ok()) return balance.status();
      sum += *balance;
    }
    return sum;
  });
}

}  // namespace idem::examples
