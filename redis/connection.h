// Connection is one connection to a Redis server, plain or TLS, that
// reconnects by itself: a command on a lost connection fails with
// kUnavailable and the next command connects again. hiredis formats the
// commands and reads the replies; the bytes go through a Transport
// (redis/transport.h), as Debian 12's hiredis has no TLS. Writes use
// write(2) (or OpenSSL's, which uses it), so a command on a connection the
// peer or the network cut raises SIGPIPE, whose default action ends the
// process: each command blocks it on the calling thread and swallows the
// one it raised (brokers/no_sigpipe.h); the command then fails with
// kUnavailable like any lost connection. Replies own their hiredis
// objects. Not thread-safe.

#ifndef IDEM_REDIS_CONNECTION_H_
#define IDEM_REDIS_CONNECTION_H_

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "redis/transport.h"

struct redisReader;
struct redisReply;

namespace idem::redis {

struct ReplyDeleter {
  void operator()(redisReply* reply) const;
};
using Reply = std::unique_ptr<redisReply, ReplyDeleter>;

class Connection {
 public:
  // Does not connect yet; the first command does. `timeout`: for connecting
  // and for each command's reply. With a `password`, each connection is
  // authenticated first (AUTH [user] password; an empty user: the default
  // user). With tls.enabled, over TLS (see TlsSettings).
  Connection(std::string host, int port, absl::Duration timeout,
             std::string user = "", std::string password = "",
             TlsSettings tls = {});
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // Runs `argv` and returns its reply, waiting up to the timeout plus
  // `extra_wait` (a blocking command's own wait). kUnavailable for a lost or
  // refused connection, or a TLS handshake that failed, naming the server
  // (dropped; the next call reconnects); kInvalidArgument naming the file
  // for a TLS file that cannot be loaded; kUnavailable for the
  // server's errors that pass (LOADING, BUSY, TRYAGAIN, MASTERDOWN,
  // CLUSTERDOWN); kResourceExhausted for OOM (a write over the server's
  // maxmemory); kUnauthenticated naming the server for NOAUTH and WRONGPASS
  // (no password, or one the server refuses),
  // kPermissionDenied for NOPERM; kOutOfRange for an argument over the
  // server's proto-max-bulk-len (checked before sending, as the server
  // would close the connection); kFailedPrecondition naming the command for
  // any other error reply (e.g. WRONGTYPE, NOGROUP: the group was removed).
  absl::StatusOr<Reply> Command(
      const std::vector<std::string>& argv,
      absl::Duration extra_wait = absl::ZeroDuration());

  // Drops the connection; the next command connects again.
  void Close();

  // The server's proto-max-bulk-len (CONFIG GET once per connection; its
  // default, 512 MB, when CONFIG is not allowed): the longest argument a
  // command may have.
  absl::StatusOr<int64_t> MaxArgumentBytes();

  // Connections made so far (the first one included).
  int64_t connects() const { return connects_; }

  // Test-only (RedisHooks): commands run with SIGPIPE as the process has it,
  // as before the fix, so a cut socket kills the process.
  void set_let_sigpipe_through(bool let) { let_sigpipe_through_ = let; }

 private:
  absl::Status Connect();
  // Runs `argv` as it is; Command adds the argument size check.
  absl::StatusOr<Reply> Send(const std::vector<std::string>& argv,
                             absl::Duration extra_wait);
  // Writes `command` (formatted) and reads until the reader has its whole
  // reply.
  absl::StatusOr<Reply> ReadReplyAfter(std::string_view command);
  // Closes the connection and returns `error` (kUnavailable).
  absl::Status Drop(absl::Status error);

  // AUTH on a new connection, when password_ is set.
  absl::Status Authenticate();

  const std::string host_;
  const int port_;
  const absl::Duration timeout_;
  const std::string user_;
  const std::string password_;
  const TlsSettings tls_;
  // Both null, or both set (connected).
  std::unique_ptr<Transport> transport_;
  redisReader* reader_ = nullptr;
  int64_t connects_ = 0;
  bool let_sigpipe_through_ = false;
  // MaxArgumentBytes of this connection; 0 until read.
  int64_t max_argument_bytes_ = 0;
};

// Reply accessors: the string of a string or status reply ("" otherwise).
std::string_view ReplyString(const redisReply* reply);

}  // namespace idem::redis

#endif  // IDEM_REDIS_CONNECTION_H_
