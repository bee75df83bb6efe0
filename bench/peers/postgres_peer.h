// The PostgreSQL peer (libpq): an inbox table and a state table, one
// prepared statement per message that inserts the ID with ON CONFLICT DO
// NOTHING and adds to the balance only if the row was inserted; each message
// its own transaction, or one pipelined transaction per poll.

#ifndef IDEM_BENCH_PEERS_POSTGRES_PEER_H_
#define IDEM_BENCH_PEERS_POSTGRES_PEER_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "bench/peers/peer.h"

namespace idem::peers {

// A PostgreSQL configuration on the server at `conninfo` (a libpq connection
// string). Setup recreates the two tables and checkpoints; each client is a
// connection with synchronous_commit on or off; with `pipelined`, a poll is
// sent as BEGIN, its statements and COMMIT in one libpq pipeline. Finish
// reports the WAL generated and the tables' size, and drops the tables.
std::unique_ptr<Target> NewPostgresTarget(std::string conninfo,
                                          bool synchronous_commit,
                                          bool pipelined);

// OK if a PostgreSQL server accepts a connection at `conninfo`; otherwise
// kUnavailable with libpq's reason.
absl::Status PostgresReachable(const std::string& conninfo);

}  // namespace idem::peers

#endif  // IDEM_BENCH_PEERS_POSTGRES_PEER_H_
