// What every peer of idem-peers-bench implements: a Target is one peer
// configuration (a fresh store per Setup), a Client one consumer connection
// or thread of it. Also what the peers share: the dedupe window and the
// 8-byte balance encoding that RocksDB and idem store.

#ifndef IDEM_BENCH_PEERS_PEER_H_
#define IDEM_BENCH_PEERS_PEER_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "bench/peers/stream.h"

namespace idem::peers {

// How long every peer keeps a processed ID: Redis EX, the DBWithTTL inbox
// TTL and idem's dedupe window (7 days).
inline constexpr int kDedupeTtlSeconds = 7 * 24 * 3600;

// A balance as RocksDB and idem store it: 8 bytes, native byte order.
std::string EncodeBalance(int64_t balance);
// The balance in `bytes`, or 0 if it is not 8 bytes long.
int64_t DecodeBalance(std::string_view bytes);

// One consumer connection/thread. Not thread-safe: one thread each.
class Client {
 public:
  virtual ~Client() = default;
  // Processes `batch` as one poll and returns how many messages did the work
  // (were new). On return the work is committed with the target's durability.
  virtual absl::StatusOr<uint64_t> Run(
      absl::Span<const StreamMessage* const> batch) = 0;
};

// What a target reports after a run.
struct FinalState {
  std::optional<int64_t> balance_sum;     // sum of all balances as stored
  std::optional<uint64_t> stored_ids;     // dedupe records as stored
  std::optional<uint64_t> written_bytes;  // bytes written for the run
  std::optional<uint64_t> disk_bytes;     // bytes on disk at the end
  std::string note;
};

// One peer configuration: a fresh store per Setup.
class Target {
 public:
  virtual ~Target() = default;
  virtual absl::Status Setup() = 0;
  virtual absl::StatusOr<std::unique_ptr<Client>> NewClient() = 0;
  // Called once all clients are gone. Tears the store down.
  virtual absl::StatusOr<FinalState> Finish(int accounts) = 0;
};

}  // namespace idem::peers

#endif  // IDEM_BENCH_PEERS_PEER_H_
