#include "redis/transport.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "brokers/tls_peer_name.h"

namespace idem::redis {
namespace {

// The oldest error OpenSSL queued on this thread (then clears the queue),
// or `otherwise`.
std::string OpenSslError(const char* otherwise) {
  const unsigned long code = ERR_get_error();
  ERR_clear_error();
  if (code == 0) return otherwise;
  char text[256];
  ERR_error_string_n(code, text, sizeof(text));
  return text;
}

// Waits until the non-blocking connect on `fd` ends; "" once connected,
// else why not.
std::string AwaitConnect(int fd, absl::Duration timeout) {
  pollfd polled{fd, POLLOUT, 0};
  const int ms = static_cast<int>(absl::ToInt64Milliseconds(timeout));
  int ready;
  do {
    ready = poll(&polled, 1, ms);
  } while (ready < 0 && errno == EINTR);
  if (ready == 0) return "connect timed out";
  if (ready < 0) return std::strerror(errno);
  int error = 0;
  socklen_t length = sizeof(error);
  if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length) != 0) {
    return std::strerror(errno);
  }
  return error == 0 ? "" : std::strerror(error);
}

// A connected, blocking TCP socket to host:port, or why there is none.
absl::StatusOr<int> ConnectSocket(const std::string& host, int port,
                                  absl::Duration timeout,
                                  const std::string& peer) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const int resolved =
      getaddrinfo(host.c_str(), absl::StrCat(port).c_str(), &hints, &found);
  if (resolved != 0) {
    return absl::UnavailableError(absl::StrCat("redis connecting to ", peer,
                                               ": ", gai_strerror(resolved)));
  }
  std::string error = "no address";
  for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
    const int fd =
        socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
               a->ai_protocol);
    if (fd < 0) {
      error = std::strerror(errno);
      continue;
    }
    if (connect(fd, a->ai_addr, a->ai_addrlen) != 0 && errno != EINPROGRESS) {
      error = std::strerror(errno);
    } else {
      error = AwaitConnect(fd, timeout);
    }
    if (error.empty()) {
      fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
      const int on = 1;
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof(on));
      freeaddrinfo(found);
      return fd;
    }
    close(fd);
  }
  freeaddrinfo(found);
  return absl::UnavailableError(
      absl::StrCat("redis connecting to ", peer, ": ", error));
}

}  // namespace

struct Transport::Tls {
  ~Tls() {
    // No close_notify: the peer may be gone, and a write could raise
    // SIGPIPE outside a command.
    if (ssl != nullptr) SSL_free(ssl);
    if (context != nullptr) SSL_CTX_free(context);
  }
  SSL_CTX* context = nullptr;
  SSL* ssl = nullptr;
};

absl::StatusOr<std::unique_ptr<Transport>> Transport::Connect(
    const std::string& host, int port, absl::Duration timeout,
    const TlsSettings& tls) {
  const std::string peer = absl::StrCat(host, ":", port);
  absl::StatusOr<int> fd = ConnectSocket(host, port, timeout, peer);
  if (!fd.ok()) return fd.status();
  std::unique_ptr<Transport> transport(new Transport(*fd, peer));
  transport->SetTimeout(timeout);
  if (tls.enabled) {
    if (absl::Status s = transport->StartTls(host, tls); !s.ok()) return s;
  }
  return transport;
}

Transport::Transport(int fd, std::string peer)
    : fd_(fd), peer_(std::move(peer)) {}

Transport::~Transport() {
  tls_.reset();
  close(fd_);
}

absl::Status Transport::StartTls(const std::string& host,
                                 const TlsSettings& settings) {
  ERR_clear_error();
  tls_ = std::make_unique<Tls>();
  tls_->context = SSL_CTX_new(TLS_client_method());
  if (tls_->context == nullptr) {
    return Failed(OpenSslError("TLS: cannot make a context"));
  }
  SSL_CTX* context = tls_->context;
  SSL_CTX_set_verify(context, SSL_VERIFY_PEER, nullptr);
  auto unusable = [](std::string_view what, const std::string& file) {
    return absl::InvalidArgumentError(
        absl::StrCat("redis TLS: cannot load the ",
                     absl::string_view(what.data(), what.size()), " ", file,
                     ": ", OpenSslError("unreadable")));
  };
  if (settings.ca_file.empty()) {
    SSL_CTX_set_default_verify_paths(context);
  } else if (SSL_CTX_load_verify_locations(context, settings.ca_file.c_str(),
                                           nullptr) != 1) {
    return unusable("CA file", settings.ca_file);
  }
  if (!settings.cert_file.empty() &&
      SSL_CTX_use_certificate_chain_file(context, settings.cert_file.c_str()) !=
          1) {
    return unusable("certificate file", settings.cert_file);
  }
  if (!settings.key_file.empty() &&
      SSL_CTX_use_PrivateKey_file(context, settings.key_file.c_str(),
                                  SSL_FILETYPE_PEM) != 1) {
    return unusable("key file", settings.key_file);
  }
  tls_->ssl = SSL_new(context);
  if (tls_->ssl == nullptr || SSL_set_fd(tls_->ssl, fd_) != 1) {
    return Failed(OpenSslError("TLS: cannot make a connection"));
  }
  if (!brokers::ExpectPeerName(SSL_get0_param(tls_->ssl), host)) {
    return Failed("TLS: cannot set up the check of the server's name");
  }
  // Server name indication, for a name (never an address).
  if (!brokers::IsIpAddress(host)) {
    SSL_set_tlsext_host_name(tls_->ssl, host.c_str());
  }
  errno = 0;
  const int connected = SSL_connect(tls_->ssl);
  if (connected != 1) {
    const int os_error = errno;
    const int error = SSL_get_error(tls_->ssl, connected);
    const long verified = SSL_get_verify_result(tls_->ssl);
    std::string why;
    if (verified != X509_V_OK) {
      why = X509_verify_cert_error_string(verified);
    } else if (error == SSL_ERROR_SYSCALL) {
      why = os_error == EAGAIN || os_error == EWOULDBLOCK
                ? "no answer in time (does the port take TLS?)"
            : os_error == 0 ? "the server closed the connection"
                            : std::strerror(os_error);
    } else {
      why = OpenSslError("refused");
    }
    ERR_clear_error();
    return Failed(absl::StrCat("TLS handshake failed: ", why));
  }
  return absl::OkStatus();
}

void Transport::SetTimeout(absl::Duration timeout) {
  const timeval limit = absl::ToTimeval(timeout);
  setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof(limit));
  setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &limit, sizeof(limit));
}

absl::Status Transport::Failed(std::string_view what) const {
  return absl::UnavailableError(absl::StrCat(
      "redis ", peer_, ": ", absl::string_view(what.data(), what.size())));
}

absl::Status Transport::Write(std::string_view bytes) {
  while (!bytes.empty()) {
    ssize_t written;
    if (tls_ != nullptr) {
      ERR_clear_error();
      const int n =
          SSL_write(tls_->ssl, bytes.data(), static_cast<int>(bytes.size()));
      if (n <= 0) {
        const int error = SSL_get_error(tls_->ssl, n);
        return Failed(error == SSL_ERROR_WANT_WRITE ||
                              error == SSL_ERROR_WANT_READ
                          ? std::string("write timed out")
                          : OpenSslError("write failed"));
      }
      written = n;
    } else {
      written = write(fd_, bytes.data(), bytes.size());
      if (written < 0 && errno == EINTR) continue;
      if (written < 0) {
        return Failed(errno == EAGAIN ? "write timed out"
                                      : std::strerror(errno));
      }
    }
    bytes.remove_prefix(static_cast<size_t>(written));
  }
  return absl::OkStatus();
}

absl::StatusOr<size_t> Transport::Read(char* buffer, size_t size) {
  while (true) {
    if (tls_ != nullptr) {
      ERR_clear_error();
      const int n = SSL_read(tls_->ssl, buffer, static_cast<int>(size));
      if (n > 0) return static_cast<size_t>(n);
      const int error = SSL_get_error(tls_->ssl, n);
      if (error == SSL_ERROR_ZERO_RETURN) {
        return Failed("the server closed the connection");
      }
      return Failed(error == SSL_ERROR_WANT_READ ||
                            error == SSL_ERROR_WANT_WRITE
                        ? std::string("no reply in time")
                        : OpenSslError("the connection was lost"));
    }
    const ssize_t n = read(fd_, buffer, size);
    if (n > 0) return static_cast<size_t>(n);
    if (n < 0 && errno == EINTR) continue;
    if (n == 0) return Failed("the server closed the connection");
    return Failed(errno == EAGAIN ? "no reply in time" : std::strerror(errno));
  }
}

}  // namespace idem::redis
