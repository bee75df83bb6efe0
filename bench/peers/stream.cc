// The seeded message stream and its expected outcome
// (bench/peers/stream.h).

#include "bench/peers/stream.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <random>

#include "absl/strings/str_format.h"

namespace idem::peers {
namespace {

// Redeliveries pick one of the last kRedeliveryWindow new messages.
constexpr size_t kRedeliveryWindow = 2000;
// Bytes of a balance, as counted in the logical user bytes.
constexpr uint64_t kBalanceBytes = 8;

std::string RandomUuid(std::mt19937_64& rng) {
  const uint64_t hi = (rng() & ~uint64_t{0xF000}) | 0x4000;  // version 4
  const uint64_t lo = (rng() & ~(uint64_t{3} << 62)) | (uint64_t{2} << 62);
  char buf[40];
  std::snprintf(buf, sizeof(buf),
                "%08" PRIx64 "-%04" PRIx64 "-%04" PRIx64 "-%04" PRIx64
                "-%012" PRIx64,
                hi >> 32, (hi >> 16) & 0xFFFF, hi & 0xFFFF, lo >> 48,
                lo & uint64_t{0xFFFFFFFFFFFF});
  return buf;
}

}  // namespace

std::vector<StreamMessage> MakeStream(size_t n, double duplicate_rate,
                                      uint64_t seed, int accounts) {
  std::mt19937_64 rng(seed);
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
    StreamMessage m;
    m.id = RandomUuid(rng);
    m.account =
        AccountName(static_cast<int>(rng() % static_cast<uint64_t>(accounts)));
    m.amount = 1 + static_cast<int64_t>(rng() % 1000);
    m.payload = m.account + ":" + std::to_string(m.amount);
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

std::string AccountName(int i) {
  char account[16];
  std::snprintf(account, sizeof(account), "acct-%05d", i);
  return account;
}

void ExpectedOutcome::Add(const StreamMessage& m) {
  if (!m.first) return;
  ++news;
  balance_sum += m.amount;
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
      *balance_sum != expected.balance_sum) {
    problems.push_back(absl::StrFormat("balance sum %d, expected %d",
                                       *balance_sum, expected.balance_sum));
  }
  if (problems.empty()) return "ok";
  std::string joined;
  for (const std::string& p : problems) {
    joined += (joined.empty() ? "" : ", ") + p;
  }
  return "FAIL: " + joined;
}

}  // namespace idem::peers
