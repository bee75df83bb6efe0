// The Redis peer (hiredis): a Lua script that runs SET inbox:<id> 1 NX EX
// <ttl> and, only if the SET succeeded, INCRBY on the account; one round
// trip per message, or the poll's calls pipelined.

#ifndef IDEM_BENCH_PEERS_REDIS_PEER_H_
#define IDEM_BENCH_PEERS_REDIS_PEER_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "bench/peers/peer.h"

namespace idem::peers {

struct RedisAddress {
  std::string host;
  int port = 0;
};

// Parses "host:port"; kInvalidArgument otherwise.
absl::StatusOr<RedisAddress> ParseRedisAddress(const std::string& text);

// A Redis configuration on the server at `address`, which must have the AOF
// on with appendfsync always if `aof`, and no persistence otherwise. Setup
// empties the server (and rewrites the AOF); Finish reports the AOF's growth
// and size (`aof`) and the memory the run took, and empties it again. Every
// client pipelines its poll (a poll of one is one round trip).
std::unique_ptr<Target> NewRedisTarget(RedisAddress address, bool aof);

// OK if a Redis server answers at `address` (and, if `durable`, has the AOF
// on with appendfsync always): kUnavailable if it cannot be reached,
// kFailedPrecondition if `durable` and it is not so configured.
absl::Status RedisReachable(const RedisAddress& address, bool durable);

}  // namespace idem::peers

#endif  // IDEM_BENCH_PEERS_REDIS_PEER_H_
