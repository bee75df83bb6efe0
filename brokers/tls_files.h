// TlsFilesProblem: the rules the broker adapters' TLS options (tls,
// tls_ca_file, tls_cert_file, tls_key_file) follow, checked in one place.
// Thread-compatible (a pure function).

#ifndef IDEM_BROKERS_TLS_FILES_H_
#define IDEM_BROKERS_TLS_FILES_H_

#include <string>

namespace idem::brokers {

// "" if the options are consistent, else the rule they break (for the
// adapter's kInvalidArgument naming its options): files only with `tls`,
// a client certificate and its key together, and a CA file when
// `ca_required` (a client library without a default trust store).
inline std::string TlsFilesProblem(bool tls, const std::string& ca_file,
                                   const std::string& cert_file,
                                   const std::string& key_file,
                                   bool ca_required) {
  if (!tls) {
    return ca_file.empty() && cert_file.empty() && key_file.empty()
               ? ""
               : "tls_ca_file, tls_cert_file and tls_key_file need tls";
  }
  if (cert_file.empty() != key_file.empty()) {
    return "tls_cert_file and tls_key_file go together";
  }
  if (ca_required && ca_file.empty()) return "tls needs tls_ca_file";
  return "";
}

}  // namespace idem::brokers

#endif  // IDEM_BROKERS_TLS_FILES_H_
