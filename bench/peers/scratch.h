// Where idem-peers-bench's embedded peers (RocksDB, idem) keep their stores:
// a fresh path per config under the run's scratch directory. The scratch
// directory itself is a util::TempDir or --dir (peers_bench.cc); directory
// sizes and removal are util/directory.h's.

#ifndef IDEM_BENCH_PEERS_SCRATCH_H_
#define IDEM_BENCH_PEERS_SCRATCH_H_

#include <string>

namespace idem::peers {

// A fresh subdirectory path of `scratch` for one config, named after `name`
// and numbered; anything left at that path is removed. Not thread-safe.
std::string FreshPath(const std::string& scratch, const std::string& name);

}  // namespace idem::peers

#endif  // IDEM_BENCH_PEERS_SCRATCH_H_
