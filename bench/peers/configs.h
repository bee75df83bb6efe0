// The configurations idem-peers-bench runs, in table order: idem first (the
// rows every other row is compared with), then PostgreSQL, Redis, RocksDB
// used directly and the RocksDB put-only ceiling.

#ifndef IDEM_BENCH_PEERS_CONFIGS_H_
#define IDEM_BENCH_PEERS_CONFIGS_H_

#include <string>
#include <vector>

#include "bench/peers/measure.h"
#include "bench/peers/redis_peer.h"

namespace idem::peers {

// Every configuration, for every peer: embedded stores under `scratch`,
// PostgreSQL at `pg` (a libpq connection string), Redis at `redis_durable`
// (appendfsync always) and `redis_memory` (no persistence); batched configs
// take polls of `batch`, and the multi-client rows (left out unless
// `clients` > 1) use `clients` clients.
std::vector<PeerConfig> MakeConfigs(const std::string& scratch,
                                    const std::string& pg,
                                    const RedisAddress& redis_durable,
                                    const RedisAddress& redis_memory, int batch,
                                    int clients);

}  // namespace idem::peers

#endif  // IDEM_BENCH_PEERS_CONFIGS_H_
