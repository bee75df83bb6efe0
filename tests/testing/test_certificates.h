// MakeSelfSigned: a self-signed certificate and its key, made with the
// openssl command line, for the suites that start a broker with TLS. The
// certificate names 127.0.0.1 (subjectAltName), where the suites' servers
// listen, and serves as its own CA. Thread-compatible.

#ifndef IDEM_TESTS_TESTING_TEST_CERTIFICATES_H_
#define IDEM_TESTS_TESTING_TEST_CERTIFICATES_H_

#include <cstdlib>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"

namespace idem::test {

struct CertificateFiles {
  std::string cert;  // PEM certificate, also the CA that trusts it
  std::string key;   // PEM private key
};

// Writes `<prefix>.pem` and `<prefix>-key.pem`. kInternal naming the command
// if openssl fails.
inline absl::StatusOr<CertificateFiles> MakeSelfSigned(
    const std::string& prefix) {
  CertificateFiles files{prefix + ".pem", prefix + "-key.pem"};
  const std::string make = absl::StrCat(
      "openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj "
      "/CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1 -keyout ",
      files.key, " -out ", files.cert, " >/dev/null 2>&1");
  if (std::system(make.c_str()) != 0) {
    return absl::InternalError(absl::StrCat("failed: ", make));
  }
  return files;
}

}  // namespace idem::test

#endif  // IDEM_TESTS_TESTING_TEST_CERTIFICATES_H_
