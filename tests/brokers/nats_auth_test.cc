// idem::nats::Consumer's NKey and credentials-file options: validated
// before any connection, and an NKey user admitted or refused by a real
// nats-server whose configuration names the user's public key.

#include <nats/nats.h>

#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "idem/engine.h"
#include "idem/nats/consumer.h"
#include "servers/nats_server.h"
#include "tests/brokers/nats_suite.h"

namespace idem::nats {
namespace {

// Two user NKey pairs made for this test (ed25519 keys from
// `openssl genpkey -algorithm ed25519`, encoded as NKeys: base32 of the
// prefix byte, the key and its CRC-16). Test keys only.
constexpr char kAdmittedPublic[] =
    "UAAMYK53CT556L3HUM7EHW5XQLCXAWLLTX2RX5SVNTUDRQUTZULLL6JC";
constexpr char kAdmittedSeed[] =
    "SUADKGZZA45GF2SSBXJJJKX52FD2TTX24HO6KKFKEGV7E72LMV3A4QD3ZM";
constexpr char kOtherSeed[] =
    "SUAM2IXOJQ7RGTOQMINPZDT4Q7MKOGNJJ2PG5K6VSFHH5ZN7OZPSMKCFWA";

void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream(path) << text << "\n";
}

// A nats-server with JetStream whose only user logs in with the admitted
// NKey; ready once it answers (refusing a client without the key).
absl::StatusOr<std::unique_ptr<servers::ServerProcess>> StartNKeyServer() {
  return servers::ServerProcess::Start(
      "nats-server",
      [](int port, const std::string& dir) -> std::vector<std::string> {
        const std::string config = dir + "/nkey.conf";
        WriteFile(config, absl::StrCat("authorization { users = [ { nkey: ",
                                       kAdmittedPublic, " } ] }"));
        return {"nats-server",      "-js", "-a", "127.0.0.1", "-p",
                absl::StrCat(port), "-sd", dir,  "-c",        config};
      },
      [](int port) {
        natsConnection* connection = nullptr;
        const natsStatus s = natsConnection_ConnectTo(
            &connection, servers::NatsUrl(port).c_str());
        if (connection != nullptr) natsConnection_Destroy(connection);
        return s == NATS_CONNECTION_AUTH_FAILED;
      });
}

TEST_F(NatsConsumerTest, AuthenticationOptionsAreValidatedNamingTheField) {
  std::unique_ptr<Engine> engine = OpenEngine("db");
  const std::string seed = dir_.Sub("user.nk");
  WriteFile(seed, kAdmittedSeed);
  auto refused = [&](const ConsumerOptions& options, const std::string& what) {
    const absl::Status status =
        Consumer::Create(engine.get(), options).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
    EXPECT_THAT(status.message(), testing::HasSubstr(what));
  };
  ConsumerOptions options = BaseOptions();
  options.nkey = kAdmittedPublic;
  refused(options, "nkey_seed_file");
  options = BaseOptions();
  options.nkey_seed_file = seed;
  refused(options, "nkey_seed_file");
  options.nkey = kAdmittedSeed;  // the seed where the public key goes
  refused(options, "public key");
  options.nkey = kAdmittedPublic;
  options.user = "idem";
  refused(options, "exclusive");
  options = BaseOptions();
  options.token = "t";
  options.credentials_file = seed;
  refused(options, "exclusive");
  options = BaseOptions();
  options.nkey = kAdmittedPublic;
  options.nkey_seed_file = dir_.Sub("missing.nk");
  refused(options, "missing.nk");
  options = BaseOptions();
  options.credentials_file = dir_.Sub("missing.creds");
  refused(options, "missing.creds");
}

// The admitted NKey connects and consumes; no credentials, or the seed of
// another key, is kUnauthenticated naming the server.
TEST_F(NatsConsumerTest, NKeyUserIsAdmittedAndAnotherKeyIsUnauthenticated) {
  absl::StatusOr<std::unique_ptr<servers::ServerProcess>> secured =
      StartNKeyServer();
  ASSERT_TRUE(secured.ok()) << secured.status();
  const std::string url = servers::NatsUrl((*secured)->port());
  const std::string seed = dir_.Sub("user.nk");
  const std::string other_seed = dir_.Sub("other.nk");
  WriteFile(seed, kAdmittedSeed);
  WriteFile(other_seed, kOtherSeed);
  std::unique_ptr<Engine> engine = OpenEngine("db");
  ConsumerOptions options = BaseOptions();
  options.url = url;
  const absl::Status none = Consumer::Create(engine.get(), options).status();
  EXPECT_EQ(none.code(), absl::StatusCode::kUnauthenticated) << none;
  EXPECT_THAT(none.message(), testing::HasSubstr(url));
  options.nkey = kAdmittedPublic;
  options.nkey_seed_file = other_seed;
  const absl::Status wrong = Consumer::Create(engine.get(), options).status();
  EXPECT_EQ(wrong.code(), absl::StatusCode::kUnauthenticated) << wrong;
  EXPECT_THAT(wrong.message(), testing::HasSubstr(url));
  options.nkey_seed_file = seed;
  absl::StatusOr<std::unique_ptr<Consumer>> right =
      Consumer::Create(engine.get(), options);
  ASSERT_TRUE(right.ok()) << right.status();
  absl::StatusOr<brokers::BatchReport> batch = (*right)->PollBatch(
      [](const brokers::Delivery&, Txn&) { return absl::OkStatus(); });
  EXPECT_TRUE(batch.ok()) << batch.status();
}

}  // namespace
}  // namespace idem::nats
