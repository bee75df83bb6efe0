// idem::rabbitmq::Consumer against a real RabbitMQ node that the suite
// starts once (servers/rabbitmq_server.h; ctest runs the binary as one
// test, as a node takes seconds to start): exact ledger totals through
// requeued redeliveries and producer duplicates, consumer processes killed
// with SIGKILL, a node restart, dead letters and the relay.

#include <signal.h>

#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "examples/ledger.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "idem/engine.h"
#include "idem/rabbitmq/consumer.h"
#include "rabbitmq/consumer_hooks.h"
#include "servers/rabbitmq_server.h"
#include "tests/brokers/server_suite.h"
#include "tests/brokers/socket_cut.h"
#include "tests/testing/recording_logger.h"
#include "tests/testing/test_certificates.h"
#include "util/temp_dir.h"

namespace idem::rabbitmq {
namespace {

using examples::ExpectedBalances;
using examples::LedgerMessage;
using test::ApplyLedger;
using test::Ledger;

// One node for the whole binary: every fixture below shares it. It also
// listens with TLS (tls_.port), with a certificate made here.
class RabbitMqEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    certificates_ = std::make_unique<util::TempDir>();
    absl::StatusOr<test::CertificateFiles> files =
        test::MakeSelfSigned(certificates_->Sub("node"));
    if (!files.ok()) {
      error_ = files.status().ToString();
      return;
    }
    tls_.cert_file = files->cert;
    tls_.key_file = files->key;
    absl::StatusOr<std::unique_ptr<servers::ServerProcess>> server =
        servers::StartRabbitMqServer(&tls_);
    if (server.ok()) {
      server_ = *std::move(server);
    } else {
      error_ = server.status().ToString();
    }
  }
  void TearDown() override { server_.reset(); }

  static std::unique_ptr<servers::ServerProcess> server_;
  static std::string error_;
  static std::unique_ptr<util::TempDir> certificates_;
  static servers::RabbitMqTlsListener tls_;
};
std::unique_ptr<servers::ServerProcess> RabbitMqEnvironment::server_;
std::string RabbitMqEnvironment::error_;
std::unique_ptr<util::TempDir> RabbitMqEnvironment::certificates_;
servers::RabbitMqTlsListener RabbitMqEnvironment::tls_;
const auto* const kEnvironment =
    ::testing::AddGlobalTestEnvironment(new RabbitMqEnvironment);

class RabbitMqConsumerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (RabbitMqEnvironment::server_ == nullptr) {
      if (test::UnderCi()) {
        FAIL() << "the node did not start: " << RabbitMqEnvironment::error_;
      }
      GTEST_SKIP() << "the node did not start (under CI=true this fails): "
                   << RabbitMqEnvironment::error_;
    }
    port_ = RabbitMqEnvironment::server_->port();
    client_ = std::make_unique<servers::RabbitMqClient>("127.0.0.1", port_);
    queue_ = ::testing::UnitTest::GetInstance()->current_test_info()->name();
  }

  std::unique_ptr<Engine> OpenEngine(const std::string& name) {
    absl::StatusOr<std::unique_ptr<Engine>> engine =
        Engine::Open(dir_.Sub(name), Options());
    EXPECT_TRUE(engine.ok()) << engine.status();
    return engine.ok() ? *std::move(engine) : nullptr;
  }

  ConsumerOptions BaseOptions() const {
    ConsumerOptions options;
    options.port = port_;
    options.queue = queue_;
    options.declare_queues = true;
    options.prefetch = 100;
    options.delivery.max_batch = 50;
    options.delivery.receive_timeout = absl::Milliseconds(20);
    options.delivery.retry_backoff = absl::Milliseconds(1);
    options.delivery.dead_letter_destination = queue_ + ".dead";
    return options;
  }

  // Publishes `messages` with their message_id; every `duplicate_every`-th
  // (0: none) twice, as a producer retry.
  ExpectedBalances Produce(const std::vector<LedgerMessage>& messages,
                           int accounts, int duplicate_every) {
    ExpectedBalances expected(accounts);
    for (size_t i = 0; i < messages.size(); ++i) {
      expected.Add(messages[i].payment);
      const int copies =
          duplicate_every > 0 && i % duplicate_every == 0 ? 2 : 1;
      for (int c = 0; c < copies; ++c) {
        absl::Status s =
            client_->Publish(queue_, messages[i].payload, messages[i].id);
        EXPECT_TRUE(s.ok()) << s;
      }
    }
    return expected;
  }

  static uint64_t Processed(Engine& engine) {
    absl::StatusOr<Stats> stats = engine.GetStats();
    return stats.ok() ? stats->processed : 0;
  }

  bool Empty(const std::string& queue) {
    absl::StatusOr<int64_t> ready = client_->Ready(queue);
    return ready.ok() && *ready == 0;
  }

  // Declares (`declare`) or deletes `queue` on a connection of its own.
  void AdminQueue(const std::string& queue, bool declare,
                  const ConsumerOptions::QueueArguments& arguments = {}) {
    ConsumerOptions options;
    options.port = port_;
    options.declare_queues = true;
    options.queue_arguments = arguments;
    AmqpConnection connection(options);
    ASSERT_TRUE(connection.Open().ok());
    if (declare) {
      absl::Status s = connection.DeclareQueue(queue, /*with_arguments=*/true);
      ASSERT_TRUE(s.ok()) << s;
      return;
    }
    amqp_queue_delete(connection.state(), AmqpConnection::kChannel,
                      amqp_cstring_bytes(queue.c_str()), 0, 0);
    absl::Status s = connection.RpcStatus("queue.delete");
    ASSERT_TRUE(s.ok()) << s;
  }

  int port_ = 0;
  std::unique_ptr<servers::RabbitMqClient> client_;
  std::string queue_;
  util::TempDir dir_;
};

TEST_F(RabbitMqConsumerTest, RejectsBadOptionsNamingTheField) {
  std::unique_ptr<Engine> engine = OpenEngine("db");
  ConsumerOptions options = BaseOptions();
  options.queue.clear();
  absl::StatusOr<std::unique_ptr<Consumer>> consumer =
      Consumer::Create(engine.get(), options);
  EXPECT_EQ(consumer.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(consumer.status().message(), testing::HasSubstr("queue"));
  options = BaseOptions();
  options.prefetch = 10;  // below max_batch
  EXPECT_THAT(Consumer::Create(engine.get(), options).status().message(),
              testing::HasSubstr("prefetch"));
  options = BaseOptions();
  options.tls = true;  // without the CA to trust
  EXPECT_THAT(Consumer::Create(engine.get(), options).status().message(),
              testing::HasSubstr("tls_ca_file"));
}

TEST_F(RabbitMqConsumerTest, UnreachableServerIsUnavailable) {
  std::unique_ptr<Engine> engine = OpenEngine("db");
  ConsumerOptions options = BaseOptions();
  absl::StatusOr<int> port = servers::FreeLoopbackPort();
  ASSERT_TRUE(port.ok());
  options.port = *port;
  EXPECT_EQ(Consumer::Create(engine.get(), options).status().code(),
            absl::StatusCode::kUnavailable);
}

// A message's timestamp property (the publisher's, whole seconds) is the
// delivery's event time, and so its queue's stream time.
TEST_F(RabbitMqConsumerTest, TheTimestampPropertyIsTheEventTime) {
  std::unique_ptr<Engine> engine = OpenEngine("db");
  auto consumer = Consumer::Create(engine.get(), BaseOptions());
  ASSERT_TRUE(consumer.ok()) << consumer.status();
  const absl::Time stamped = absl::FromUnixSeconds(1'700'000'000);
  ASSERT_TRUE(client_->Publish(queue_, "1", "t1", {}, stamped).ok());
  std::vector<absl::Time> seen;
  for (int i = 0; i < 100 && seen.empty(); ++i) {
    absl::StatusOr<brokers::BatchReport> report =
        (*consumer)->PollBatch([&](const brokers::Delivery& delivery, Txn&) {
          seen.push_back(delivery.event_time);
          return absl::OkStatus();
        });
    ASSERT_TRUE(report.ok()) << report.status();
  }
  EXPECT_EQ(seen, std::vector<absl::Time>{stamped});
  absl::StatusOr<absl::Time> stream_time = engine->StreamTime(queue_, 0);
  ASSERT_TRUE(stream_time.ok()) << stream_time.status();
  EXPECT_EQ(*stream_time, stamped);
}

// What the server refuses comes back with the code a caller can act on,
// naming the real cause: a queue name over AMQP's 255 bytes (or in the
// server's "amq." namespace) is kInvalidArgument before any request; a
// wrong password kUnauthenticated; a missing vhost kNotFound.
TEST_F(RabbitMqConsumerTest, RefusalsAreTheirOwnCodesNamingTheCause) {
  std::unique_ptr<Engine> engine = OpenEngine("db");
  ConsumerOptions options = BaseOptions();
  options.queue = std::string(256, 'q');
  absl::Status status = Consumer::Create(engine.get(), options).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_THAT(status.message(), testing::HasSubstr("255"));
  options.queue = "amq.mine";
  status = Consumer::Create(engine.get(), options).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_THAT(status.message(), testing::HasSubstr("amq."));
  options = BaseOptions();
  options.delivery.dead_letter_destination = "amq.dead";
  status = Consumer::Create(engine.get(), options).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_THAT(status.message(), testing::HasSubstr("dead_letter_destination"));
  options = BaseOptions();
  options.password = "wrong";
  status = Consumer::Create(engine.get(), options).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kUnauthenticated) << status;
  EXPECT_THAT(status.message(), testing::HasSubstr("Login was refused"));
  EXPECT_THAT(status.message(),
              testing::HasSubstr(absl::StrCat("127.0.0.1:", port_)));
  options = BaseOptions();
  options.vhost = "missing";
  status = Consumer::Create(engine.get(), options).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound) << status;
  EXPECT_THAT(status.message(), testing::HasSubstr("missing"));
}

// Consumer "a" processes part of the queue and closes its connection
// before acknowledging; RabbitMQ requeues what it held, and "b" gets those
// messages again (redelivered), finds them duplicates, as it does the
// producer's. A message without a message_id is dead-lettered (reason
// "id"), not deduplicated by a guess.
TEST_F(RabbitMqConsumerTest, LedgerIsExactThroughRequeuesAndDuplicates) {
  constexpr int kAccounts = 20;
  const std::vector<LedgerMessage> messages = Ledger(7, 600, kAccounts);
  std::unique_ptr<Engine> engine = OpenEngine("db");
  ConsumerOptions options = BaseOptions();
  brokers::LoopHooks dies_before_acks;
  dies_before_acks.skip_acks = true;
  auto a = CreateConsumerWithHooks(engine.get(), options, dies_before_acks);
  ASSERT_TRUE(a.ok()) << a.status();
  const ExpectedBalances expected = Produce(messages, kAccounts, 10);
  ASSERT_TRUE(client_->Publish(queue_, "acct-00001:5", "").ok());  // no ID
  int64_t processed_by_a = 0;
  for (int i = 0; i < 4; ++i) {
    absl::StatusOr<brokers::BatchReport> r = (*a)->PollBatch(ApplyLedger);
    ASSERT_TRUE(r.ok()) << r.status();
    processed_by_a += r->processed;
  }
  ASSERT_GT(processed_by_a, 0);
  ASSERT_TRUE((*a)->Close().ok());  // the server requeues a's messages

  auto b = Consumer::Create(engine.get(), options);
  ASSERT_TRUE(b.ok()) << b.status();
  test::Drain(**b, ApplyLedger, [&] { return Empty(queue_); });
  const ConsumerStats stats = (*b)->stats();
  EXPECT_GE(stats.redelivered, processed_by_a);
  EXPECT_GE(stats.duplicates, processed_by_a);
  EXPECT_EQ(stats.dead_lettered, 1);
  test::ExpectBalances(*engine, expected, true);
}

// SIGKILLs consumer processes mid-stream; RabbitMQ requeues what each held
// when its connection drops. Nothing is lost and nothing doubles. The
// broken variant acknowledges on receipt, and loses the payments a kill
// interrupts.
class RabbitMqKillTest : public RabbitMqConsumerTest,
                         public ::testing::WithParamInterface<bool> {};

TEST_P(RabbitMqKillTest, KilledConsumersLoseAndDoubleNothing) {
  const bool broken = GetParam();
  const int cycles = broken ? 3 : 10;
  constexpr int kAccounts = 50;
  const ExpectedBalances expected =
      Produce(Ledger(11, 2000, kAccounts), kAccounts, 20);
  std::vector<std::string> argv = {
      IDEM_BROKER_CHILD, "rabbitmq", absl::StrCat(port_), queue_, "-", "-",
      dir_.Sub("db")};
  if (broken) argv.push_back("--ack_on_receive");
  test::KillCycles(argv, cycles, dir_.Sub("child.log"));
  if (HasFatalFailure()) return;
  std::unique_ptr<Engine> engine = OpenEngine("db");
  auto last = Consumer::Create(engine.get(), BaseOptions());
  ASSERT_TRUE(last.ok()) << last.status();
  test::Drain(**last, ApplyLedger, [&] { return Empty(queue_); });
  EXPECT_GT((*last)->stats().received, 0) << "the kills all came too late";
  test::ExpectBalances(*engine, expected, !broken,
                       "acks on receipt should lose payments");
}

INSTANTIATE_TEST_SUITE_P(RealAndBroken, RabbitMqKillTest,
                         ::testing::Values(false, true), [](const auto& info) {
                           return info.param ? "AckOnReceive" : "Real";
                         });

// The consumer's connections are cut under it (shutdown on its sockets, as
// a proxy reset or an idle timeout) in the middle of three batches; the
// batch's basic.ack is then written to a cut socket. The process survives
// with SIGPIPE at its default action (which would end it) because
// rabbitmq-c sends every frame with MSG_NOSIGNAL (librabbitmq/unix/socket.h
// and amqp_tcp_socket.c): the write fails with EPIPE instead, the consumer
// reports kUnavailable and reconnects, RabbitMQ requeues what the cut
// connection held, and the totals are exact.
TEST_F(RabbitMqConsumerTest, CutSocketNeitherKillsTheProcessNorLosesExactness) {
  ASSERT_EQ(test::SigpipeDisposition(), SIG_DFL)
      << "the test proves nothing if the process ignores SIGPIPE";
  constexpr int kAccounts = 10;
  std::unique_ptr<Engine> engine = OpenEngine("db");
  ConsumerOptions options = BaseOptions();
  auto consumer = Consumer::Create(engine.get(), options);
  ASSERT_TRUE(consumer.ok()) << consumer.status();
  const ExpectedBalances expected =
      Produce(Ledger(19, 300, kAccounts), kAccounts, 0);
  int handled = 0;
  int cuts = 0;
  auto cut_now_and_then = [&](const Delivery& d, Txn& txn) {
    if (++handled % 70 == 0 && cuts < 3) {
      cuts += test::CutConnectionsTo(port_) > 0 ? 1 : 0;
    }
    return ApplyLedger(d, txn);
  };
  test::Drain(**consumer, cut_now_and_then, [&] {
    client_ = std::make_unique<servers::RabbitMqClient>("127.0.0.1", port_);
    return Empty(queue_) && Processed(*engine) >= 300;
  });
  EXPECT_EQ(cuts, 3);
  EXPECT_EQ(test::SigpipeDisposition(), SIG_DFL);
  const ConsumerStats stats = (*consumer)->stats();
  EXPECT_GE(stats.broker_errors, 3);
  EXPECT_EQ(stats.connects, 1 + 3);
  EXPECT_EQ(stats.processed, 300);
  test::ExpectBalances(*engine, expected, true);
}

// The node's TLS listener, with the certificate the suite made: a consumer
// trusting it connects and consumes. A CA that did not sign it, a plain
// client at the TLS port, a TLS client at the plain port, a host the
// certificate does not name: kUnavailable naming the server; a CA file that is
// not there kInvalidArgument naming it; a wrong password over TLS
// kUnauthenticated.
TEST_F(RabbitMqConsumerTest, TlsListenerIsReachedWithItsCaAndRefusedOtherwise) {
  const int tls_port = RabbitMqEnvironment::tls_.port;
  const std::string server = absl::StrCat("127.0.0.1:", tls_port);
  std::unique_ptr<Engine> engine = OpenEngine("db");
  ConsumerOptions options = BaseOptions();
  options.port = tls_port;
  options.tls = true;
  options.tls_ca_file = RabbitMqEnvironment::tls_.cert_file;
  absl::StatusOr<test::CertificateFiles> other =
      test::MakeSelfSigned(dir_.Sub("other"));
  ASSERT_TRUE(other.ok()) << other.status();

  auto refused = [&](ConsumerOptions o, absl::StatusCode code,
                     const std::string& named) {
    absl::Status s = Consumer::Create(engine.get(), o).status();
    EXPECT_EQ(s.code(), code) << s;
    EXPECT_THAT(s.message(), testing::HasSubstr(named)) << s;
  };
  ConsumerOptions untrusted = options;
  untrusted.tls_ca_file = other->cert;
  refused(untrusted, absl::StatusCode::kUnavailable, server);
  ConsumerOptions plain = options;
  plain.tls = false;
  plain.tls_ca_file.clear();
  refused(plain, absl::StatusCode::kUnavailable, server);
  ConsumerOptions at_plain_port = options;
  at_plain_port.port = port_;
  refused(at_plain_port, absl::StatusCode::kUnavailable,
          absl::StrCat("127.0.0.1:", port_));
  ConsumerOptions missing = options;
  missing.tls_ca_file = dir_.Sub("missing.pem");
  refused(missing, absl::StatusCode::kInvalidArgument, "missing.pem");
  ConsumerOptions wrong = options;
  wrong.password = "wrong";
  refused(wrong, absl::StatusCode::kUnauthenticated, server);
  // The certificate names 127.0.0.1, not localhost.
  ConsumerOptions misnamed = options;
  misnamed.host = "localhost";
  refused(misnamed, absl::StatusCode::kUnavailable, "verification failed");

  Produce(Ledger(71, 40, 4), 4, 0);
  auto consumer = Consumer::Create(engine.get(), options);
  ASSERT_TRUE(consumer.ok()) << consumer.status();
  test::Drain(**consumer, ApplyLedger, [&] { return Empty(queue_); });
  EXPECT_EQ((*consumer)->stats().processed, 40);
}

// The reproduction on RabbitMQ: the first message's output carries
// headers that do not fit one AMQP frame, three more emit good outputs, one
// fails for good with a 2 MB error text, and two emit to queues AMQP
// refuses (over 255 bytes, "amq."). Every output is published or
// dead-lettered (the refused one without the copied headers, saying so;
// the error text bounded) and the outbox is empty.
TEST_F(RabbitMqConsumerTest, RefusedOutputsAreDeadLetteredAndTheRestFlow) {
  const std::string out = queue_ + ".out";
  std::unique_ptr<Engine> engine = OpenEngine("db");
  auto consumer = Consumer::Create(engine.get(), BaseOptions());
  ASSERT_TRUE(consumer.ok()) << consumer.status();
  for (const char* id : {"a", "b", "c", "d", "e", "g", "h"}) {
    ASSERT_TRUE(client_->Publish(queue_, "1", id).ok());
  }
  // Over the frame_max of 131,072 bytes the adapter asks for.
  const std::string big_header(200 << 10, 'h');
  const std::string big_error(2 << 20, 'x');
  const Txn::Header too_big[] = {{"big", big_header}};
  test::Drain(
      **consumer,
      [&](const Delivery& d, Txn& txn) -> absl::Status {
        if (d.id == "e") return absl::InvalidArgumentError(big_error);
        if (d.id == "a") {
          txn.EmitWithHeaders(out, d.id, d.payload, too_big);
        } else {
          txn.Emit(d.id == "g"   ? std::string(256, 'q')
                   : d.id == "h" ? std::string("amq.out")
                                 : out,
                   d.id, d.payload);
        }
        return absl::OkStatus();
      },
      [&] { return Empty(queue_); });
  const ConsumerStats stats = (*consumer)->stats();
  EXPECT_EQ(stats.processed, 4);
  EXPECT_EQ(stats.dead_lettered, 3);  // e, g and h
  EXPECT_EQ(stats.outbox_dead_lettered, 1);
  EXPECT_THAT(*engine->ReadOutbox(10), testing::IsEmpty());
  absl::StatusOr<std::vector<servers::RabbitMqClient::Message>> outputs =
      client_->TakeAll(out);
  ASSERT_TRUE(outputs.ok()) << outputs.status();
  EXPECT_EQ(outputs->size(), 3u);
  absl::StatusOr<std::vector<servers::RabbitMqClient::Message>> dead =
      client_->TakeAll(queue_ + ".dead");
  ASSERT_TRUE(dead.ok()) << dead.status();
  ASSERT_EQ(dead->size(), 4u);
  std::map<std::string, servers::RabbitMqClient::Message> by_key;
  for (const auto& m : *dead) by_key[m.Header("idem-key")] = m;
  EXPECT_EQ(by_key["a"].Header("idem.reason"), "refused");
  EXPECT_THAT(by_key["a"].Header("idem.truncated"),
              testing::HasSubstr("headers"));
  EXPECT_EQ(by_key["a"].Header("big"), "");
  EXPECT_THAT(by_key["a"].Header("idem.error"), testing::HasSubstr("frame"));
  EXPECT_EQ(by_key["e"].Header("idem.truncated"), "error");
  EXPECT_LE(by_key["e"].Header("idem.error").size(),
            brokers::kMaxDeadLetterErrorBytes);
  EXPECT_THAT(by_key["g"].Header("idem.error"), testing::HasSubstr("255"));
  EXPECT_THAT(by_key["h"].Header("idem.error"), testing::HasSubstr("amq."));
  for (const auto& m : *dead) EXPECT_FALSE(m.message_id.empty());
}

// The node is restarted while a consumer runs (after some payments, before
// all; the rest is published after it): the consumer reconnects and the
// totals are exact.
TEST_F(RabbitMqConsumerTest, ServerRestartMidStreamLosesAndDoublesNothing) {
  constexpr int kAccounts = 20;
  const std::vector<LedgerMessage> messages = Ledger(13, 1200, kAccounts);
  std::unique_ptr<Engine> engine = OpenEngine("db");
  ConsumerOptions options = BaseOptions();
  options.reconnect_backoff = absl::Milliseconds(100);
  auto consumer = Consumer::Create(engine.get(), options);
  ASSERT_TRUE(consumer.ok()) << consumer.status();
  ExpectedBalances expected =
      Produce({messages.begin(), messages.begin() + 600}, kAccounts, 10);
  absl::Status run = test::RunThroughRestart(
      **consumer, *engine, 600, absl::Milliseconds(1),
      [&] {
        ASSERT_TRUE(RabbitMqEnvironment::server_->Restart().ok())
            << RabbitMqEnvironment::server_->Log();
        client_ = std::make_unique<servers::RabbitMqClient>("127.0.0.1", port_);
        const ExpectedBalances more =
            Produce({messages.begin() + 600, messages.end()}, kAccounts, 10);
        for (int a = 0; a < kAccounts; ++a) expected.Add({a, more.balance(a)});
      },
      [&] { return Processed(*engine) >= 1200 && Empty(queue_); });
  ASSERT_TRUE(run.ok()) << run;
  EXPECT_GE((*consumer)->stats().connects, 2);
  EXPECT_GE((*consumer)->stats().reconnects, 1);
  test::ExpectBalances(*engine, expected, true);
}

// A poison message is dead-lettered to the dead-letter queue with its
// reason and source; every other payment is forwarded through the outbox
// and the relay (publisher confirms, message_id = the entry's message ID);
// the downstream consumer applies each once although every forwarded
// message reaches it twice.
TEST_F(RabbitMqConsumerTest, DeadLettersAndRelayThroughADownstreamConsumer) {
  constexpr int kAccounts = 10;
  const std::string out = queue_ + ".out";
  std::unique_ptr<Engine> upstream = OpenEngine("up");
  auto stage1 = Consumer::Create(upstream.get(), BaseOptions());
  ASSERT_TRUE(stage1.ok()) << stage1.status();
  const ExpectedBalances expected =
      Produce(Ledger(17, 200, kAccounts), kAccounts, 0);
  ASSERT_TRUE(
      client_->Publish(queue_, "not a payment", "poison", {{"note", "kept"}})
          .ok());
  test::Drain(
      **stage1,
      [&](const Delivery& d, Txn& txn) {
        return test::ApplyAndForward(out, d, txn);
      },
      [&] { return Empty(queue_); });
  const ConsumerStats stats1 = (*stage1)->stats();
  EXPECT_EQ(stats1.dead_lettered, 1);
  EXPECT_EQ(stats1.processed, 200);
  EXPECT_EQ(stats1.outbox_published, 201);

  absl::StatusOr<std::vector<servers::RabbitMqClient::Message>> dead =
      client_->TakeAll(queue_ + ".dead");
  ASSERT_TRUE(dead.ok()) << dead.status();
  ASSERT_EQ(dead->size(), 1u);
  EXPECT_EQ((*dead)[0].body, "not a payment");
  EXPECT_EQ((*dead)[0].Header("idem.reason"), "non_retriable");
  EXPECT_EQ((*dead)[0].Header("idem.source.id"), "poison");
  EXPECT_EQ((*dead)[0].Header("note"), "kept");
  EXPECT_NE((*dead)[0].message_id, "poison");
  EXPECT_THAT(*upstream->ReadOutbox(10), testing::IsEmpty());

  // Every forwarded message twice, as after a relay retry.
  absl::StatusOr<std::vector<servers::RabbitMqClient::Message>> forwarded =
      client_->TakeAll(out);
  ASSERT_TRUE(forwarded.ok()) << forwarded.status();
  ASSERT_EQ(forwarded->size(), 200u);
  for (int copy = 0; copy < 2; ++copy) {
    for (const servers::RabbitMqClient::Message& m : *forwarded) {
      ASSERT_TRUE(client_->Publish(out, m.body, m.message_id).ok());
    }
  }
  std::unique_ptr<Engine> downstream = OpenEngine("down");
  ConsumerOptions down_options = BaseOptions();
  down_options.queue = out;
  auto stage2 = Consumer::Create(downstream.get(), down_options);
  ASSERT_TRUE(stage2.ok()) << stage2.status();
  test::Drain(**stage2, ApplyLedger, [&] { return Empty(out); });
  EXPECT_EQ((*stage2)->stats().processed, 200);
  EXPECT_EQ((*stage2)->stats().duplicates, 200);
  test::ExpectBalances(*downstream, expected, true);
}

// Passive declaration (the default): a queue that does not exist is
// kNotFound naming it; one an operator declared with arguments of their
// own (quorum, single active consumer, TTL) is bound as it is. Declaring
// (declare_queues) with other arguments is refused (kFailedPrecondition),
// with the same arguments accepted.
TEST_F(RabbitMqConsumerTest, QueuesAreDeclaredPassiveUnlessAskedToDeclare) {
  std::unique_ptr<Engine> engine = OpenEngine("db");
  ConsumerOptions options = BaseOptions();
  options.declare_queues = false;
  absl::Status missing = Consumer::Create(engine.get(), options).status();
  EXPECT_EQ(missing.code(), absl::StatusCode::kNotFound) << missing;
  EXPECT_THAT(missing.message(), testing::HasSubstr(queue_));

  ConsumerOptions::QueueArguments operators;
  operators.queue_type = "quorum";
  operators.single_active_consumer = true;
  operators.message_ttl_ms = 3'600'000;
  AdminQueue(queue_, /*declare=*/true, operators);
  EXPECT_TRUE(Consumer::Create(engine.get(), options).ok());
  options.declare_queues = true;
  absl::Status clash = Consumer::Create(engine.get(), options).status();
  EXPECT_EQ(clash.code(), absl::StatusCode::kFailedPrecondition) << clash;
  EXPECT_THAT(clash.message(), testing::HasSubstr("inequivalent arg"));
  options.queue_arguments = operators;
  auto matching = Consumer::Create(engine.get(), options);
  ASSERT_TRUE(matching.ok()) << matching.status();
  const ExpectedBalances expected = Produce(Ledger(41, 30, 3), 3, 0);
  test::Drain(**matching, ApplyLedger, [&] { return Empty(queue_); });
  test::ExpectBalances(*engine, expected, true);
}

// Under passive declaration the relay declares no queue: an output that
// no queue takes comes back (mandatory, basic.return) and is dead-lettered
// with the server's reason, never dropped; outputs to queues that exist
// are published.
TEST_F(RabbitMqConsumerTest, UnroutableOutputIsDeadLetteredNotLost) {
  const std::string out = queue_ + ".out";
  const std::string nowhere = queue_ + ".nowhere";
  for (const std::string& q : {queue_, out, queue_ + ".dead"}) {
    AdminQueue(q, /*declare=*/true);
  }
  std::unique_ptr<Engine> engine = OpenEngine("db");
  ConsumerOptions options = BaseOptions();
  options.declare_queues = false;
  auto consumer = Consumer::Create(engine.get(), options);
  ASSERT_TRUE(consumer.ok()) << consumer.status();
  for (const char* id : {"a", "b"}) {
    ASSERT_TRUE(client_->Publish(queue_, "1", id).ok());
  }
  test::Drain(
      **consumer,
      [&](const Delivery& d, Txn& txn) {
        txn.Emit(d.id == "a" ? nowhere : out, d.id, d.payload);
        return absl::OkStatus();
      },
      [&] { return Empty(queue_); });
  const ConsumerStats stats = (*consumer)->stats();
  EXPECT_EQ(stats.outbox_published, 1);
  EXPECT_EQ(stats.outbox_dead_lettered, 1);
  EXPECT_THAT(*engine->ReadOutbox(10), testing::IsEmpty());
  EXPECT_EQ(client_->TakeAll(out)->size(), 1u);
  absl::StatusOr<std::vector<servers::RabbitMqClient::Message>> dead =
      client_->TakeAll(queue_ + ".dead");
  ASSERT_TRUE(dead.ok()) << dead.status();
  ASSERT_EQ(dead->size(), 1u);
  EXPECT_EQ((*dead)[0].Header("idem.reason"), "refused");
  EXPECT_EQ((*dead)[0].Header("idem.destination"), nowhere);
  EXPECT_THAT((*dead)[0].Header("idem.error"), testing::HasSubstr("NO_ROUTE"));
}

// The queue is deleted under a running consumer and declared again (a
// failover moves a queue the same way): the server's cancel notification
// ends the connection, the next poll subscribes again, and the messages
// published to the new queue are processed. The twin that did not ask for
// cancel notifications keeps waiting on its dead subscription.
class RabbitMqCancelTest : public RabbitMqConsumerTest,
                           public ::testing::WithParamInterface<bool> {};

TEST_P(RabbitMqCancelTest, CancelledConsumerSubscribesAgain) {
  const bool notified = GetParam();
  std::unique_ptr<Engine> engine = OpenEngine("db");
  RabbitMqHooks hooks;
  hooks.no_cancel_notify = !notified;
  auto consumer =
      CreateConsumerWithHooks(engine.get(), BaseOptions(), {}, hooks);
  ASSERT_TRUE(consumer.ok()) << consumer.status();
  const std::vector<LedgerMessage> messages = Ledger(43, 40, 4);
  const std::vector<LedgerMessage> first(messages.begin(),
                                         messages.begin() + 20);
  const std::vector<LedgerMessage> second(messages.begin() + 20,
                                          messages.end());
  Produce(first, 4, 0);
  test::Drain(**consumer, ApplyLedger, [&] { return Empty(queue_); });
  ASSERT_EQ((*consumer)->stats().processed, 20);
  AdminQueue(queue_, /*declare=*/false);
  // A client that has not declared it yet declares the queue again.
  client_ = std::make_unique<servers::RabbitMqClient>("127.0.0.1", port_);
  Produce(second, 4, 0);
  const absl::Time deadline = absl::Now() + absl::Seconds(5);
  while (absl::Now() < deadline && (*consumer)->stats().processed < 40) {
    absl::StatusOr<brokers::BatchReport> report =
        (*consumer)->PollBatch(ApplyLedger);
    ASSERT_TRUE(report.ok() || absl::IsUnavailable(report.status()))
        << report.status();
  }
  const ConsumerStats stats = (*consumer)->stats();
  EXPECT_EQ(stats.cancelled, notified ? 1 : 0);
  EXPECT_EQ(stats.processed, notified ? 40 : 20);
}

INSTANTIATE_TEST_SUITE_P(RealAndBroken, RabbitMqCancelTest,
                         ::testing::Values(true, false), [](const auto& info) {
                           return info.param ? "Notified" : "NotAsked";
                         });

// The node is paused (SIGSTOP) for three heartbeats: with heartbeats of
// 1 s, the consumer takes its silent connection for dead within a few
// seconds (kUnavailable) and, once the node runs again, reconnects and
// processes what was published. The twin without heartbeats polls empty
// batches through the whole pause, never noticing.
class RabbitMqHeartbeatTest : public RabbitMqConsumerTest,
                              public ::testing::WithParamInterface<bool> {};

TEST_P(RabbitMqHeartbeatTest, PausedNodeIsTakenForDeadAndRejoined) {
  const bool heartbeats = GetParam();
  std::unique_ptr<Engine> engine = OpenEngine("db");
  ConsumerOptions options = BaseOptions();
  options.heartbeat = heartbeats ? absl::Seconds(1) : absl::ZeroDuration();
  options.reconnect_backoff = absl::Milliseconds(50);
  auto consumer = Consumer::Create(engine.get(), options);
  ASSERT_TRUE(consumer.ok()) << consumer.status();
  const ExpectedBalances expected = Produce(Ledger(47, 30, 3), 3, 0);
  const pid_t node = servers::RabbitMqNodePid(*RabbitMqEnvironment::server_);
  ASSERT_GT(node, 0);
  ASSERT_EQ(kill(node, SIGSTOP), 0);
  const absl::Duration pause = 3 * absl::Seconds(1);
  const absl::Time resume = absl::Now() + pause;
  absl::Duration detected = absl::InfiniteDuration();
  const absl::Time paused = absl::Now();
  while (absl::Now() < resume) {
    absl::StatusOr<brokers::BatchReport> report =
        (*consumer)->PollBatch(ApplyLedger);
    if (absl::IsUnavailable(report.status())) {
      detected = std::min(detected, absl::Now() - paused);
    }
  }
  ASSERT_EQ(kill(node, SIGCONT), 0);
  if (heartbeats) {
    EXPECT_LE(detected, pause) << "the paused node went unnoticed";
  } else {
    EXPECT_EQ(detected, absl::InfiniteDuration());
  }
  test::Drain(**consumer, ApplyLedger, [&] { return Empty(queue_); });
  test::ExpectBalances(*engine, expected, true);
}

INSTANTIATE_TEST_SUITE_P(RealAndBroken, RabbitMqHeartbeatTest,
                         ::testing::Values(true, false), [](const auto& info) {
                           return info.param ? "Heartbeats" : "None";
                         });

// Two instances, each with a store of its own, on one queue declared with
// x-single-active-consumer: only the first one subscribed gets messages;
// once it is gone, the other takes the queue over. The twin on a plain
// queue shows the server sharing the messages out between both; there the
// second instance finds the first on the queue (the passive declaration's
// consumer count) and warns of a competing consumer, once; on the
// single-active queue (queue_arguments.single_active_consumer tells the
// consumer so) nobody warns.
class RabbitMqSingleActiveTest : public RabbitMqConsumerTest,
                                 public ::testing::WithParamInterface<bool> {};

TEST_P(RabbitMqSingleActiveTest, OnlyOneInstanceReceivesAtATime) {
  const bool single_active = GetParam();
  ConsumerOptions::QueueArguments arguments;
  arguments.single_active_consumer = single_active;
  AdminQueue(queue_, /*declare=*/true, arguments);
  std::unique_ptr<Engine> engine_a = OpenEngine("a");
  std::unique_ptr<Engine> engine_b = OpenEngine("b");
  ConsumerOptions options = BaseOptions();
  options.declare_queues = false;
  options.queue_arguments.single_active_consumer = single_active;
  test::RecordingLogger logger;
  options.delivery.logger = &logger;
  options.prefetch = options.delivery.max_batch;
  auto a = Consumer::Create(engine_a.get(), options);
  ASSERT_TRUE(a.ok()) << a.status();
  auto b = Consumer::Create(engine_b.get(), options);
  ASSERT_TRUE(b.ok()) << b.status();
  Produce(Ledger(61, 80, 4), 4, 0);
  for (int round = 0; round < 4; ++round) {
    ASSERT_TRUE((*b)->PollBatch(ApplyLedger).ok());
    ASSERT_TRUE((*a)->PollBatch(ApplyLedger).ok());
  }
  EXPECT_EQ((*a)->stats().competing_consumers, 0);
  if (single_active) {
    EXPECT_EQ((*b)->stats().received, 0);
    EXPECT_EQ((*a)->stats().processed, 80);
    EXPECT_EQ((*b)->stats().competing_consumers, 0);
    EXPECT_TRUE(logger.lines().empty());
  } else {
    EXPECT_GT((*b)->stats().received, 0);
    EXPECT_EQ((*b)->stats().competing_consumers, 1);
    ASSERT_EQ(logger.lines().size(), 1u);
    EXPECT_EQ(logger.lines()[0].first, LogSeverity::kWarning);
    EXPECT_THAT(logger.lines()[0].second,
                testing::HasSubstr(absl::StrCat("queue ", queue_)));
  }
  ASSERT_TRUE((*a)->Close().ok());
  Produce(Ledger(67, 10, 4), 4, 0);
  test::Drain(**b, ApplyLedger, [&] { return Empty(queue_); });
  EXPECT_GE((*b)->stats().processed, 10) << "b did not take the queue over";
}

INSTANTIATE_TEST_SUITE_P(RealAndBroken, RabbitMqSingleActiveTest,
                         ::testing::Values(true, false), [](const auto& info) {
                           return info.param ? "SingleActive" : "Plain";
                         });

}  // namespace
}  // namespace idem::rabbitmq
