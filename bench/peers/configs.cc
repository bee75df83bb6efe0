// The table's configurations (bench/peers/configs.h).

#include "bench/peers/configs.h"

#include <memory>
#include <utility>

#include "bench/peers/idem_peer.h"
#include "bench/peers/postgres_peer.h"
#include "bench/peers/rocksdb_peer.h"

namespace idem::peers {

std::vector<PeerConfig> MakeConfigs(const std::string& scratch,
                                    const std::string& pg,
                                    const RedisAddress& redis_durable,
                                    const RedisAddress& redis_memory, int batch,
                                    int clients) {
  std::vector<PeerConfig> configs;
  auto add = [&](PeerConfig c) { configs.push_back(std::move(c)); };

  // idem first: every other row is compared with it.
  auto idem = [&](IdemMode mode) {
    return [scratch, mode] { return NewIdemTarget(scratch, mode); };
  };
  add({"idem", "idem kSync", "fsync", 1, 1, true, true, true,
       idem(IdemMode::kSync)});
  add({"idem", "idem kSync", "fsync", batch, 1, false, true, true,
       idem(IdemMode::kSync)});
  add({"idem", "idem kBuffered + WaitDurable", "fsync", 1, 1, true, true, false,
       idem(IdemMode::kBufferedWait)});
  add({"idem", "idem kBuffered + WaitDurable", "fsync", batch, 1, false, true,
       false, idem(IdemMode::kBufferedWait)});
  if (clients > 1) {
    add({"idem", "idem kSync", "fsync", 1, clients, false, true, true,
         idem(IdemMode::kSync)});
    add({"idem", "idem kBuffered + WaitDurable", "fsync", 1, clients, false,
         true, false, idem(IdemMode::kBufferedWait)});
  }
  add({"idem", "idem kBuffered (no wait)", "page cache", 1, 1, false, true,
       true, idem(IdemMode::kBuffered)});
  add({"idem", "idem kBuffered (no wait)", "page cache", batch, 1, false, true,
       true, idem(IdemMode::kBuffered)});
  if (clients > 1) {
    // CPU-bound: what more threads add when nothing waits for the disk.
    add({"idem", "idem kBuffered (no wait)", "page cache", 1, clients, false,
         true, true, idem(IdemMode::kBuffered)});
    add({"idem", "idem kBuffered (no wait)", "page cache", batch, clients,
         false, true, true, idem(IdemMode::kBuffered)});
  }

  auto postgres = [&](bool sync, bool pipelined) {
    return [pg, sync, pipelined] {
      return NewPostgresTarget(pg, sync, pipelined);
    };
  };
  add({"postgres", "postgres synchronous_commit=on", "fsync", 1, 1, true, true,
       false, postgres(true, false)});
  add({"postgres", "postgres synchronous_commit=on, pipelined txn", "fsync",
       batch, 1, false, true, false, postgres(true, true)});
  if (clients > 1) {
    add({"postgres", "postgres synchronous_commit=on", "fsync", 1, clients,
         false, true, false, postgres(true, false)});
  }
  add({"postgres", "postgres synchronous_commit=off", "async commit", 1, 1,
       false, true, false, postgres(false, false)});
  add({"postgres", "postgres synchronous_commit=off, pipelined txn",
       "async commit", batch, 1, false, true, false, postgres(false, true)});

  auto redis = [&](bool aof) {
    const RedisAddress address = aof ? redis_durable : redis_memory;
    return [address, aof] { return NewRedisTarget(address, aof); };
  };
  add({"redis", "redis appendfsync=always", "fsync", 1, 1, true, true, false,
       redis(true)});
  add({"redis", "redis appendfsync=always, pipelined", "fsync", batch, 1, false,
       true, false, redis(true)});
  add({"redis", "redis no persistence", "memory", 1, 1, false, true, false,
       redis(false)});
  add({"redis", "redis no persistence, pipelined", "memory", batch, 1, false,
       true, false, redis(false)});

  auto rocks = [&](RocksMode mode, bool sync) {
    return
        [scratch, mode, sync] { return NewRocksTarget(scratch, mode, sync); };
  };
  add({"rocksdb", "rocksdb Get+Put, sync", "fsync", 1, 1, true, true, false,
       rocks(RocksMode::kGetPut, true)});
  add({"rocksdb", "rocksdb Get+Put, WriteBatch, sync", "fsync", batch, 1, false,
       true, false, rocks(RocksMode::kGetPut, true)});
  add({"rocksdb", "rocksdb Get+Put, no sync", "page cache", 1, 1, false, true,
       false, rocks(RocksMode::kGetPut, false)});
  add({"rocksdb", "rocksdb Get+Put, WriteBatch, no sync", "page cache", batch,
       1, false, true, false, rocks(RocksMode::kGetPut, false)});
  add({"rocksdb", "rocksdb DBWithTTL Get+Put, WriteBatch, sync", "fsync", batch,
       1, false, true, false, rocks(RocksMode::kTtl, true)});
  add({"rocksdb", "rocksdb DBWithTTL Get+Put, WriteBatch, no sync",
       "page cache", batch, 1, false, true, false,
       rocks(RocksMode::kTtl, false)});

  add({"ceiling", "ceiling: rocksdb Put only (no lookup), sync", "fsync", batch,
       1, false, false, false, rocks(RocksMode::kPutOnly, true)});
  add({"ceiling", "ceiling: rocksdb Put only (no lookup), no sync",
       "page cache", batch, 1, false, false, false,
       rocks(RocksMode::kPutOnly, false)});
  return configs;
}

}  // namespace idem::peers
