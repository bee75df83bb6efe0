// ExpectPeerName: has OpenSSL check, while it verifies the server's
// certificate chain, that the certificate names the host the client dialed:
// its IP address for an address, its DNS name otherwise. For the adapters
// that reach OpenSSL (redis/transport.h, rabbitmq-c's SSL context);
// header-only, so only they link OpenSSL. Thread-compatible.

#ifndef IDEM_BROKERS_TLS_PEER_NAME_H_
#define IDEM_BROKERS_TLS_PEER_NAME_H_

#include <arpa/inet.h>
#include <netinet/in.h>
#include <openssl/x509_vfy.h>

#include <string>

namespace idem::brokers {

// Whether `host` is an IPv4 or IPv6 address rather than a DNS name.
inline bool IsIpAddress(const std::string& host) {
  in6_addr address;
  return inet_pton(AF_INET, host.c_str(), &address) == 1 ||
         inet_pton(AF_INET6, host.c_str(), &address) == 1;
}

// Sets `host` on `param` (an SSL's or an SSL_CTX's); false if OpenSSL
// refused it.
inline bool ExpectPeerName(X509_VERIFY_PARAM* param, const std::string& host) {
  if (IsIpAddress(host)) {
    return X509_VERIFY_PARAM_set1_ip_asc(param, host.c_str()) == 1;
  }
  return X509_VERIFY_PARAM_set1_host(param, host.c_str(), host.size()) == 1;
}

}  // namespace idem::brokers

#endif  // IDEM_BROKERS_TLS_PEER_NAME_H_
