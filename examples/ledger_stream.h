// The ledger's message stream (examples/ledger.h): a seeded generator of
// distinct payments, each with its own message ID. How the messages are then
// delivered (redeliveries, reordering, partitions, poison records) is up to
// each user of the stream.
//
// LedgerStream is a plain value type: not thread-safe. The same options give
// the same messages, on every platform (std::mt19937_64 only; no
// std::*_distribution, whose results the standard leaves to the library).

#ifndef IDEM_EXAMPLES_LEDGER_STREAM_H_
#define IDEM_EXAMPLES_LEDGER_STREAM_H_

#include <cstddef>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "examples/ledger.h"

namespace idem::examples {

struct LedgerStreamOptions {
  uint64_t seed = 1;
  // Payments go to accounts [0, accounts), uniformly. Must be >= 1.
  int accounts = 100;
  // Amounts are uniform in [min_amount, max_amount]. REQUIRES: min <= max.
  int64_t min_amount = 1;
  int64_t max_amount = 1000;
  // Message IDs: "<id_prefix>-<seed>-<index>" (index from 0), or random
  // version-4 UUIDs ("3f2c...-4...", 36 characters) drawn from the seed.
  enum class Ids { kSequential, kUuid };
  Ids ids = Ids::kSequential;
  std::string id_prefix = "payment";
};

// One distinct message of the stream.
struct LedgerMessage {
  std::string id;
  Payment payment;
  std::string payload;  // EncodePayment(payment)
};

class LedgerStream {
 public:
  explicit LedgerStream(LedgerStreamOptions options);

  // The next message: a new ID, a random account and amount.
  LedgerMessage Next();

 private:
  const LedgerStreamOptions options_;
  std::mt19937_64 rng_;
  uint64_t index_ = 0;
};

// The first `count` messages of LedgerStream(options).
std::vector<LedgerMessage> MakeLedgerMessages(
    const LedgerStreamOptions& options, size_t count);

}  // namespace idem::examples

#endif  // IDEM_EXAMPLES_LEDGER_STREAM_H_
