// The seeded message stream idem_peers_bench sends through every peer (UUID
// IDs, a fraction of them redeliveries of a recent message, one account and
// amount each), its split over concurrent clients, and what a correct run
// over it must leave behind, checked against what a peer reports.

#ifndef IDEM_BENCH_PEERS_STREAM_H_
#define IDEM_BENCH_PEERS_STREAM_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace idem::peers {

// One delivery.
struct StreamMessage {
  std::string id;       // UUID text, 36 bytes
  std::string account;  // "acct-00042"
  int64_t amount = 0;   // 1..1000
  std::string payload;  // "acct-00042:123", what a consumer would parse
  bool first = false;   // the first delivery of this ID
  uint32_t origin = 0;  // index of the first delivery of this ID
};

// `n` deliveries from `seed`: with probability `duplicate_rate` a
// redelivery (same ID and payload) of one of the last 2,000 new messages,
// otherwise a new message on one of `accounts` accounts.
std::vector<StreamMessage> MakeStream(size_t n, double duplicate_rate,
                                      uint64_t seed, int accounts);

// The number of redeliveries in `stream`.
size_t CountRedeliveries(const std::vector<StreamMessage>& stream);

// Splits the first `count` messages over `clients` like a keyed topic over
// partitions: every delivery of an ID goes to the same client, in order.
// Returns, per client, the indexes of its messages in `stream`.
std::vector<std::vector<uint32_t>> Partition(
    const std::vector<StreamMessage>& stream, size_t count, int clients);

// The name of account `i` ("acct-00042"), as the stream spells it.
std::string AccountName(int i);

// What processing some deliveries of the stream must leave behind.
struct ExpectedOutcome {
  uint64_t news = 0;        // deliveries that must do the work
  int64_t balance_sum = 0;  // the sum of their amounts
  uint64_t user_bytes = 0;  // their logical bytes: ID + account + balance

  // Counts one processed delivery.
  void Add(const StreamMessage& m);
};

// "ok" if a run's figures match `expected`, else "FAIL: " and what differs.
// Figures a peer cannot report (nullopt) are not checked, nor the balance
// sum unless `check_balance_sum`.
std::string CheckOutcome(const ExpectedOutcome& expected, uint64_t news,
                         std::optional<uint64_t> stored_ids,
                         std::optional<int64_t> balance_sum,
                         bool check_balance_sum);

}  // namespace idem::peers

#endif  // IDEM_BENCH_PEERS_STREAM_H_
