// The RocksDB peer, used directly: Get of the ID, then Put of the ID and the
// new balance in one WriteBatch per poll, on a plain rocksdb::DB or on
// rocksdb::DBWithTTL; and the put-only ceiling, which writes the same bytes
// with no lookup. The stores use idem's own tuning.

#ifndef IDEM_BENCH_PEERS_ROCKSDB_PEER_H_
#define IDEM_BENCH_PEERS_ROCKSDB_PEER_H_

#include <memory>
#include <string>

#include "bench/peers/peer.h"

namespace idem::peers {

enum class RocksMode {
  kGetPut,   // rocksdb::DB: Get of the ID, then Put of the ID and balance
  kTtl,      // the same on rocksdb::DBWithTTL, the IDs with a 7-day TTL
  kPutOnly,  // the ceiling: the Puts of the new messages, no Get
};

// A RocksDB configuration: a fresh store under `scratch` per Setup, written
// with WriteOptions::sync if `sync`. Finish reports the WAL, flush and
// compaction bytes and the store's size, then deletes it. kPutOnly stores
// each new message's amount, not a balance, so it reports no balance sum.
std::unique_ptr<Target> NewRocksTarget(std::string scratch, RocksMode mode,
                                       bool sync);

}  // namespace idem::peers

#endif  // IDEM_BENCH_PEERS_ROCKSDB_PEER_H_
