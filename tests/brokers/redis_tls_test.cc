// The Redis Streams consumer over TLS (ConsumerOptions::tls), against
// redis-servers that take TLS only, with certificates the test makes: what
// connects, what is refused and with which code, and a stream consumed
// exactly over TLS. The suite's plain server stands for a server without
// TLS.

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "examples/ledger.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "idem/engine.h"
#include "idem/redis/consumer.h"
#include "redis/connection.h"
#include "servers/redis_server.h"
#include "tests/brokers/redis_suite.h"
#include "tests/brokers/server_suite.h"
#include "tests/testing/test_certificates.h"

namespace idem::redis {
namespace {

using test::CertificateFiles;
using ::testing::HasSubstr;

class RedisTlsTest : public RedisConsumerTest {
 protected:
  void SetUp() override {
    RedisConsumerTest::SetUp();
    if (IsSkipped() || HasFailure()) return;
    absl::StatusOr<CertificateFiles> server =
        test::MakeSelfSigned(dir_.Sub("server"));
    absl::StatusOr<CertificateFiles> other =
        test::MakeSelfSigned(dir_.Sub("other"));
    ASSERT_TRUE(server.ok()) << server.status();
    ASSERT_TRUE(other.ok()) << other.status();
    server_files_ = *server;
    other_files_ = *other;
  }

  // A TLS-only server with server_files_ and password "secret"; with
  // `client_ca`, clients must present a certificate it signed.
  std::unique_ptr<servers::ServerProcess> StartTlsServer(
      const CertificateFiles* client = nullptr) {
    servers::RedisTlsServer tls;
    tls.cert_file = server_files_.cert;
    tls.key_file = server_files_.key;
    tls.password = "secret";
    tls.client = TlsSettings{.enabled = true, .ca_file = server_files_.cert};
    if (client != nullptr) {
      tls.client_ca_file = client->cert;
      tls.client.cert_file = client->cert;
      tls.client.key_file = client->key;
    }
    absl::StatusOr<std::unique_ptr<servers::ServerProcess>> started =
        servers::StartRedisTlsServer(tls);
    EXPECT_TRUE(started.ok()) << started.status();
    return started.ok() ? *std::move(started) : nullptr;
  }

  ConsumerOptions TlsOptions(int port, const std::string& stream) const {
    ConsumerOptions options = BaseOptions(stream, "c");
    options.port = port;
    options.password = "secret";
    options.tls = true;
    options.tls_ca_file = server_files_.cert;
    return options;
  }

  CertificateFiles server_files_;
  CertificateFiles other_files_;
};

TEST_F(RedisTlsTest, TlsFilesWithoutTlsOrACertWithoutItsKeyAreRejected) {
  std::unique_ptr<Engine> engine = OpenEngine("db");
  ConsumerOptions options = BaseOptions(prefix_ + "s", "c");
  options.tls_ca_file = server_files_.cert;
  absl::Status no_tls = Consumer::Create(engine.get(), options).status();
  EXPECT_EQ(no_tls.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(no_tls.message(), HasSubstr("need tls"));
  options.tls = true;
  options.tls_cert_file = other_files_.cert;
  absl::Status no_key = Consumer::Create(engine.get(), options).status();
  EXPECT_EQ(no_key.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(no_key.message(), HasSubstr("tls_key_file"));
}

// Trusting the server's certificate, with its password: the consumer
// connects and consumes a ledger exactly (its outputs and dead letters
// relayed over TLS too). A plain client, a CA that did not sign the
// certificate, a host the certificate does not name, a TLS client at a
// server without TLS: kUnavailable naming the server; a wrong password over TLS
// kUnauthenticated; a CA file that is not there kInvalidArgument naming it.
TEST_F(RedisTlsTest, TlsServerIsReachedWithItsCaAndRefusedOtherwise) {
  std::unique_ptr<servers::ServerProcess> secured = StartTlsServer();
  ASSERT_NE(secured, nullptr);
  const int port = secured->port();
  const std::string server = absl::StrCat("127.0.0.1:", port);
  std::unique_ptr<Engine> engine = OpenEngine("db");
  const std::string stream = prefix_ + "payments";
  ConsumerOptions options = TlsOptions(port, stream);

  ConsumerOptions plain = options;
  plain.tls = false;
  plain.tls_ca_file.clear();
  absl::Status refused = Consumer::Create(engine.get(), plain).status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kUnavailable) << refused;
  EXPECT_THAT(refused.message(), HasSubstr(server));

  ConsumerOptions untrusted = options;
  untrusted.tls_ca_file = other_files_.cert;
  absl::Status not_trusted = Consumer::Create(engine.get(), untrusted).status();
  EXPECT_EQ(not_trusted.code(), absl::StatusCode::kUnavailable) << not_trusted;
  EXPECT_THAT(not_trusted.message(), HasSubstr(server));
  EXPECT_THAT(not_trusted.message(), HasSubstr("certificate"));

  ConsumerOptions misnamed = options;  // the certificate names 127.0.0.1
  misnamed.host = "localhost";
  absl::Status mismatch = Consumer::Create(engine.get(), misnamed).status();
  EXPECT_EQ(mismatch.code(), absl::StatusCode::kUnavailable) << mismatch;
  EXPECT_THAT(mismatch.message(), HasSubstr("mismatch"));

  ConsumerOptions missing = options;
  missing.tls_ca_file = dir_.Sub("missing.pem");
  absl::Status unreadable = Consumer::Create(engine.get(), missing).status();
  EXPECT_EQ(unreadable.code(), absl::StatusCode::kInvalidArgument)
      << unreadable;
  EXPECT_THAT(unreadable.message(), HasSubstr("missing.pem"));

  ConsumerOptions wrong = options;
  wrong.password = "wrong";
  absl::Status unauthenticated = Consumer::Create(engine.get(), wrong).status();
  EXPECT_EQ(unauthenticated.code(), absl::StatusCode::kUnauthenticated)
      << unauthenticated;
  EXPECT_THAT(unauthenticated.message(), HasSubstr(server));

  ConsumerOptions at_plain_server = options;
  at_plain_server.port = server_->port();
  // A plain server reads the handshake as a command and waits for more:
  // the handshake times out.
  at_plain_server.io_timeout = absl::Milliseconds(500);
  absl::Status no_tls_there =
      Consumer::Create(engine.get(), at_plain_server).status();
  EXPECT_EQ(no_tls_there.code(), absl::StatusCode::kUnavailable)
      << no_tls_there;
  EXPECT_THAT(no_tls_there.message(),
              HasSubstr(absl::StrCat("127.0.0.1:", server_->port())));

  // Over TLS: exact totals, outputs relayed.
  Connection producer(
      "127.0.0.1", port, absl::Seconds(5), "", "secret",
      TlsSettings{.enabled = true, .ca_file = server_files_.cert});
  constexpr int kAccounts = 5;
  const ExpectedBalances expected =
      Produce(producer, stream, test::Ledger(11, 200, kAccounts), kAccounts,
              /*duplicate_every=*/7);
  auto consumer = Consumer::Create(engine.get(), options);
  ASSERT_TRUE(consumer.ok()) << consumer.status();
  test::Drain(**consumer, test::ApplyLedger, [&] {
    return PendingAndLag(producer, stream, "g") ==
           std::pair<int64_t, int64_t>(0, 0);
  });
  test::ExpectBalances(*engine, expected, true);
  EXPECT_EQ((*consumer)->stats().processed, 200);
}

// A server that asks for client certificates: without one the connection
// is refused (kUnavailable naming the server); with the certificate its CA
// file names, it is taken.
TEST_F(RedisTlsTest, ClientCertificateIsPresentedWhenTheServerAsksForOne) {
  std::unique_ptr<servers::ServerProcess> secured =
      StartTlsServer(&other_files_);
  ASSERT_NE(secured, nullptr);
  const int port = secured->port();
  std::unique_ptr<Engine> engine = OpenEngine("db");
  ConsumerOptions options = TlsOptions(port, prefix_ + "payments");
  absl::Status without = Consumer::Create(engine.get(), options).status();
  EXPECT_EQ(without.code(), absl::StatusCode::kUnavailable) << without;
  EXPECT_THAT(without.message(), HasSubstr(absl::StrCat("127.0.0.1:", port)));
  options.tls_cert_file = other_files_.cert;
  options.tls_key_file = other_files_.key;
  auto with = Consumer::Create(engine.get(), options);
  EXPECT_TRUE(with.ok()) << with.status();
}

}  // namespace
}  // namespace idem::redis
