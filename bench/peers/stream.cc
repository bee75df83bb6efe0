// The seeded message stream and its expected outcome
// (bench/peers/stream.h).

#include "bench/peers/stream.h"

#include <algorithm>
#include <random>
#include <utility>

#include "absl/strings/str_format.h"
#include "examples/ledger_stream.h"

namespace idem::peers {
namespace {

// Redeliveries pick one of the last kRedeliveryWindow new messages.
constexpr size_t kRedeliveryWindow = 2000;
// Bytes of a balance, as counted in the logical user bytes.
constexpr uint64_t kBalanceBytes = 8;

}  // namespace

std::vector<StreamMessage> MakeStream(size_t n, double duplicate_rate,
                                      uint64_t seed, int accounts) {
  examples::LedgerStreamOptions options;
  options.seed = seed;
  options.accounts = accounts;
  options.ids = examples::LedgerStreamOptions::Ids::kUuid;
  examples::LedgerStream payments(options);
  // Which deliveries are redeliveries, and of what: a generator of its own.
  std::mt19937_64 rng(seed ^ 0x9e3779b97f4a7c15ull);
  std::uniform_real_distribution<double> coin(0.0, 1.0);
  std::vector<StreamMessage> out;
  out.reserve(n);
  std::vector<uint32_t> firsts;
  for (size_t i = 0; i < n; ++i) {
    if (!firsts.empty() && coin(rng) < duplicate_rate) {
      const size_t window = std::min(firsts.size(), kRedeliveryWindow);
      const uint32_t origin = firsts[firsts.size() - 1 - rng() % window];
      StreamMessage m = out[origin];  // a redelivery carries the same payload
      m.first = false;
      out.push_back(std::move(m));
      continue;
    }
    examples::LedgerMessage payment = payments.Next();
    StreamMessage m;
    m.id = std::move(payment.id);
    m.payment = payment.payment;
    m.account = examples::AccountName(payment.payment.account);
    m.payload = std::move(payment.payload);
    m.first = true;
    m.origin = static_cast<uint32_t>(i);
    firsts.push_back(m.origin);
    out.push_back(std::move(m));
  }
  return out;
}

size_t CountRedeliveries(const std::vector<StreamMessage>& stream) {
  size_t redeliveries = 0;
  for (const StreamMessage& m : stream) redeliveries += m.first ? 0 : 1;
  return redeliveries;
}

std::vector<std::vector<uint32_t>> Partition(
    const std::vector<StreamMessage>& stream, size_t count, int clients) {
  std::vector<std::vector<uint32_t>> parts(static_cast<size_t>(clients));
  for (size_t i = 0; i < count; ++i) {
    parts[stream[i].origin % static_cast<uint32_t>(clients)].push_back(
        static_cast<uint32_t>(i));
  }
  return parts;
}

void ExpectedOutcome::Add(const StreamMessage& m) {
  if (!m.first) return;
  ++news;
  balances.Add(m.payment);
  user_bytes += m.id.size() + m.account.size() + kBalanceBytes;
}

std::string CheckOutcome(const ExpectedOutcome& expected, uint64_t news,
                         std::optional<uint64_t> stored_ids,
                         std::optional<int64_t> balance_sum,
                         bool check_balance_sum) {
  std::vector<std::string> problems;
  if (news != expected.news) {
    problems.push_back(
        absl::StrFormat("%d new, expected %d", news, expected.news));
  }
  if (stored_ids.has_value() && *stored_ids != expected.news) {
    problems.push_back(absl::StrFormat("%d IDs stored, expected %d",
                                       *stored_ids, expected.news));
  }
  if (check_balance_sum && balance_sum.has_value() &&
      *balance_sum != expected.balances.total()) {
    problems.push_back(absl::StrFormat("balance sum %d, expected %d",
                                       *balance_sum,
                                       expected.balances.total()));
  }
  if (problems.empty()) return "ok";
  std::string joined;
  for (const std::string& p : problems) {
    joined += (joined.empty() ? "" : ", ") + p;
  }
  return "FAIL: " + joined;
}

}  // namespace idem::peers
