// The seeded message stream idem-peers-bench sends through every peer: the
// ledger's payments (examples/ledger_stream.h, with UUID IDs), a fraction of
// the deliveries redeliveries of a recent message; its split over concurrent
// clients; and what a correct run over it must leave behind, checked against
// what a peer reports.

#ifndef IDEM_BENCH_PEERS_STREAM_H_
#define IDEM_BENCH_PEERS_STREAM_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "examples/ledger.h"

namespace idem::peers {

// One delivery.
struct StreamMessage {
  std::string id;             // UUID text, 36 bytes
  examples::Payment payment;  // amount 1..1000
  std::string account;        // examples::AccountName: "acct-00042"
  std::string payload;        // "acct-00042:123" (examples::EncodePayment)
  bool first = false;         // the first delivery of this ID
  uint32_t origin = 0;        // index of the first delivery of this ID
};

// `n` deliveries from `seed`: with probability `duplicate_rate` a
// redelivery (same ID and payload) of one of the last 2,000 new messages,
// otherwise the ledger's next payment, on one of `accounts` accounts.
std::vector<StreamMessage> MakeStream(size_t n, double duplicate_rate,
                                      uint64_t seed, int accounts);

// The number of redeliveries in `stream`.
size_t CountRedeliveries(const std::vector<StreamMessage>& stream);

// Splits the first `count` messages over `clients` like a keyed topic over
// partitions: every delivery of an ID goes to the same client, in order.
// Returns, per client, the indexes of its messages in `stream`.
std::vector<std::vector<uint32_t>> Partition(
    const std::vector<StreamMessage>& stream, size_t count, int clients);

// What processing some deliveries of the stream must leave behind.
struct ExpectedOutcome {
  explicit ExpectedOutcome(int accounts) : balances(accounts) {}

  uint64_t news = 0;                    // deliveries that must do the work
  examples::ExpectedBalances balances;  // what their payments add up to
  uint64_t user_bytes = 0;  // their logical bytes: ID + account + balance

  // Counts one processed delivery.
  void Add(const StreamMessage& m);
};

// "ok" if a run's figures match `expected`, else "FAIL: " and what differs.
// Figures a peer cannot report (nullopt) are not checked, nor the balance
// sum (against the expected balances' total) unless `check_balance_sum`.
std::string CheckOutcome(const ExpectedOutcome& expected, uint64_t news,
                         std::optional<uint64_t> stored_ids,
                         std::optional<int64_t> balance_sum,
                         bool check_balance_sum);

}  // namespace idem::peers

#endif  // IDEM_BENCH_PEERS_STREAM_H_
