// The idem peer: Engine::ProcessBatch of each poll, with a handler that reads
// the account's balance with Txn::Get and writes it back with Txn::Put; under
// kSync, kBuffered + WaitDurable, or kBuffered without waiting.

#ifndef IDEM_BENCH_PEERS_IDEM_PEER_H_
#define IDEM_BENCH_PEERS_IDEM_PEER_H_

#include <memory>
#include <string>

#include "bench/peers/peer.h"

namespace idem::peers {

enum class IdemMode {
  kSync,          // Durability::kSync
  kBufferedWait,  // Durability::kBuffered, then WaitDurable after each poll
  kBuffered,      // Durability::kBuffered, no waiting
};

// An idem configuration: a fresh engine under `scratch` per Setup, with the
// peers' 7-day dedupe window; clients share the engine. Finish reports the
// engine's WAL, flush and compaction bytes and the store's size, then
// deletes it.
std::unique_ptr<Target> NewIdemTarget(std::string scratch, IdemMode mode);

}  // namespace idem::peers

#endif  // IDEM_BENCH_PEERS_IDEM_PEER_H_
