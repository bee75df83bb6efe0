// Transport is one TCP connection to a server, plain or TLS (OpenSSL), with
// blocking reads and writes bounded by a timeout. Debian 12's hiredis (0.14)
// has no TLS, so Connection speaks the protocol through hiredis (command
// formatting, the reply reader) and moves the bytes through a Transport.
// Plain connections write with write(2), as hiredis does, so a write to a
// cut socket raises SIGPIPE: callers block it (brokers/no_sigpipe.h). Not
// thread-safe.

#ifndef IDEM_REDIS_TRANSPORT_H_
#define IDEM_REDIS_TRANSPORT_H_

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace idem::redis {

// How a Transport secures its connection.
struct TlsSettings {
  // Off: plain TCP.
  bool enabled = false;
  // PEM CA certificates the server's certificate must chain to; empty: the
  // system's trust store. The certificate must also name the host (its IP
  // address for an address, its DNS name otherwise).
  std::string ca_file;
  // A client certificate and its key (PEM), for a server that asks for one;
  // both or neither.
  std::string cert_file;
  std::string key_file;
};

class Transport {
 public:
  // Connects to host:port within `timeout` and, with TLS, completes the
  // handshake. kUnavailable naming host:port when the server cannot be
  // reached or the handshake fails (a server without TLS, a certificate not
  // trusted or not naming the host); kInvalidArgument naming the file when
  // a CA, certificate or key file cannot be loaded.
  static absl::StatusOr<std::unique_ptr<Transport>> Connect(
      const std::string& host, int port, absl::Duration timeout,
      const TlsSettings& tls);

  ~Transport();
  Transport(const Transport&) = delete;
  Transport& operator=(const Transport&) = delete;

  // Bounds each following read and write.
  void SetTimeout(absl::Duration timeout);

  // Writes all of `bytes`. kUnavailable (the connection is unusable) on an
  // error or timeout.
  absl::Status Write(std::string_view bytes);

  // Reads what is there, at least one byte, at most `size`, waiting for it
  // up to the timeout. kUnavailable on end of stream, an error or timeout.
  absl::StatusOr<size_t> Read(char* buffer, size_t size);

 private:
  struct Tls;
  Transport(int fd, std::string peer);
  absl::Status StartTls(const std::string& host, const TlsSettings& settings);
  absl::Status Failed(std::string_view what) const;

  const int fd_;
  // "host:port", for errors.
  const std::string peer_;
  // Null for a plain connection.
  std::unique_ptr<Tls> tls_;
};

}  // namespace idem::redis

#endif  // IDEM_REDIS_TRANSPORT_H_
