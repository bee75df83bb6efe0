// Consume rate of idem::rabbitmq::Consumer against plain consume-and-ack
// loops on the same RabbitMQ node, queue, batch size and prefetch.
// `bench/broker_bench.sh rabbitmq` runs it; it starts a private node (servers/)
// unless IDEM_BENCH_RABBITMQ_PORT names one on 127.0.0.1 (guest/guest). Per
// iteration a fresh durable queue gets 20,000 persistent ledger payments
// (bench/broker_bench.h; published before the timing), then one consumer
// reads it to the end in batches of 100, 500 and 2000 (the benchmark's
// argument: the consumer's max_batch; the prefetch, basic.qos, is the
// larger of it and 500, for every loop):
//
//   BM_Idem           idem::rabbitmq::Consumer::PollBatch with the
//                     ledger's handler on a fresh store (Durability::kSync:
//                     one fdatasync per batch), one basic.ack (multiple)
//                     per batch once it is durable.
//   BM_IdemBuffered   the same under Durability::kBuffered (the loop's
//                     WaitDurable syncs once per batch).
//   BM_PlainAckEach   parse each payment, add it to an in-memory balance
//                     map, basic.ack each message on its own.
//   BM_PlainAckBatch  the same with one basic.ack (multiple) per batch.
//   BM_EngineOnly     the payments straight to Engine::ProcessBatch, no
//                     server (bench/broker_bench.h).
//
// A batch is what arrives within 100 ms of its first message, up to the
// batch size (as the consumer's Receive). The plain loops keep nothing
// durable and deduplicate nothing: they are the cost of consuming, not an
// equivalent. Reported: items_per_second (wall time), and for idem the
// shares of the time spent in the engine and in AMQP calls (engine_share,
// rabbitmq_share).

#include <amqp.h>
#include <sys/time.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <string>

#include "absl/strings/numbers.h"
#include "bench/broker_bench.h"
#include "idem/engine.h"
#include "idem/rabbitmq/consumer.h"
#include "rabbitmq/amqp_connection.h"
#include "servers/rabbitmq_server.h"
#include "util/temp_dir.h"

namespace idem {
namespace {

using bench::BenchBatch;

// The node's port: IDEM_BENCH_RABBITMQ_PORT, or a private node started on
// first use.
int Port() {
  return bench::BenchServerPort("rabbitmq", "IDEM_BENCH_RABBITMQ_PORT",
                                [] { return servers::StartRabbitMqServer(); });
}

int Prefetch(int batch) { return std::max(batch, 500); }

amqp_bytes_t Bytes(const std::string& s) {
  return amqp_bytes_t{s.size(), const_cast<char*>(s.data())};
}

rabbitmq::ConsumerOptions Connection(const std::string& queue, int batch) {
  rabbitmq::ConsumerOptions options;
  options.port = Port();
  options.queue = queue;
  options.declare_queues = true;  // the benchmark's own queues
  options.prefetch = Prefetch(batch);
  options.delivery.max_batch = batch;
  options.delivery.relay_outbox = false;
  options.delivery.receive_timeout = bench::BenchReceiveTimeout();
  return options;
}

// A fresh durable queue holding every payment (persistent, message_id set,
// published without confirms, then waited for). Empty on failure.
std::string FillQueue(const std::string& queue) {
  const rabbitmq::ConsumerOptions options = Connection(queue, 1);
  rabbitmq::AmqpConnection connection(options);
  if (!connection.Open().ok() || !connection.DeclareQueue(queue).ok()) {
    return "";
  }
  for (const examples::LedgerMessage& m : bench::BrokerBenchPayments()) {
    amqp_basic_properties_t properties{};
    properties._flags =
        AMQP_BASIC_DELIVERY_MODE_FLAG | AMQP_BASIC_MESSAGE_ID_FLAG;
    properties.delivery_mode = 2;
    properties.message_id = Bytes(m.id);
    if (amqp_basic_publish(connection.state(),
                           rabbitmq::AmqpConnection::kChannel, amqp_empty_bytes,
                           Bytes(queue), 0, 0, &properties,
                           Bytes(m.payload)) != AMQP_STATUS_OK) {
      return "";
    }
  }
  servers::RabbitMqClient client("127.0.0.1", Port());
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  while (absl::Now() < deadline) {
    absl::StatusOr<int64_t> ready = client.Ready(queue);
    if (ready.ok() && *ready >= bench::kBrokerBenchMessages) return queue;
    absl::SleepFor(absl::Milliseconds(20));
  }
  return "";
}

void DeleteQueue(const std::string& queue) {
  const rabbitmq::ConsumerOptions options = Connection(queue, 1);
  rabbitmq::AmqpConnection connection(options);
  if (!connection.Open().ok()) return;
  amqp_queue_delete(connection.state(), rabbitmq::AmqpConnection::kChannel,
                    Bytes(queue), 0, 0);
}

// Subscribes `connection` (open) to `queue` with the prefetch of `batch`.
absl::Status Subscribe(rabbitmq::AmqpConnection& connection,
                       const std::string& queue, int batch) {
  amqp_basic_qos(connection.state(), rabbitmq::AmqpConnection::kChannel, 0,
                 static_cast<uint16_t>(Prefetch(batch)), 0);
  if (absl::Status s = connection.RpcStatus("basic.qos"); !s.ok()) return s;
  amqp_basic_consume(connection.state(), rabbitmq::AmqpConnection::kChannel,
                     Bytes(queue), amqp_empty_bytes, 0, 0, 0, amqp_empty_table);
  return connection.RpcStatus("basic.consume");
}

// Takes up to `batch` messages (what arrives within 100 ms of the first),
// applies each to `ledger` and acks each (ack_each) or the batch (multiple).
// Returns how many it took; kUnavailable if consuming failed.
absl::StatusOr<int> PlainBatch(amqp_connection_state_t amqp, int batch,
                               bool ack_each, bench::PlainLedger& ledger) {
  timeval wait{0, 100000};
  uint64_t last = 0;
  int taken = 0;
  for (; taken < batch; ++taken) {
    amqp_maybe_release_buffers(amqp);
    amqp_envelope_t envelope;
    amqp_rpc_reply_t reply = amqp_consume_message(amqp, &envelope, &wait, 0);
    if (reply.reply_type == AMQP_RESPONSE_LIBRARY_EXCEPTION &&
        reply.library_error == AMQP_STATUS_TIMEOUT) {
      break;
    }
    if (reply.reply_type != AMQP_RESPONSE_NORMAL) {
      return absl::UnavailableError("amqp: consuming failed");
    }
    ledger.Apply(
        std::string_view(static_cast<const char*>(envelope.message.body.bytes),
                         envelope.message.body.len));
    last = envelope.delivery_tag;
    if (ack_each) {
      amqp_basic_ack(amqp, rabbitmq::AmqpConnection::kChannel, last, 0);
    }
    amqp_destroy_envelope(&envelope);
    wait = timeval{0, 0};
  }
  if (!ack_each && last > 0) {
    amqp_basic_ack(amqp, rabbitmq::AmqpConnection::kChannel, last, 1);
  }
  return taken;
}

// Consumes every payment with the prefetch of range(0), in batches of
// range(0), applying each to a map, acking each message (ack_each) or each
// batch (multiple).
void PlainLoop(benchmark::State& state, bool ack_each) {
  const int batch = BenchBatch(state);
  int64_t iteration = 0;
  for (auto _ : state) {
    state.PauseTiming();
    const std::string queue =
        FillQueue(bench::FreshName(ack_each ? "each" : "batch", iteration++));
    const rabbitmq::ConsumerOptions options = Connection(queue, batch);
    rabbitmq::AmqpConnection connection(options);
    if (queue.empty() || !connection.Open().ok() ||
        !Subscribe(connection, queue, batch).ok()) {
      state.SkipWithError("setup failed");
      return;
    }
    bench::PlainLedger ledger;
    state.ResumeTiming();
    int read = 0;
    while (read < bench::kBrokerBenchMessages) {
      absl::StatusOr<int> taken =
          PlainBatch(connection.state(), batch, ack_each, ledger);
      if (!taken.ok()) {
        state.SkipWithError(taken.status().ToString().c_str());
        return;
      }
      read += *taken;
    }
    state.PauseTiming();
    connection.Close();
    DeleteQueue(queue);
    state.ResumeTiming();
  }
  bench::SetBrokerBenchItems(state);
}

void IdemLoop(benchmark::State& state, Durability durability) {
  int64_t iteration = 0;
  bench::IdemShares shares;
  for (auto _ : state) {
    state.PauseTiming();
    const std::string queue = FillQueue(bench::FreshName("idem", iteration++));
    util::TempDir dir;
    absl::StatusOr<std::unique_ptr<Engine>> engine =
        bench::OpenBenchStore(dir.Sub("db"), durability);
    absl::StatusOr<std::unique_ptr<rabbitmq::Consumer>> consumer =
        engine.ok() ? rabbitmq::Consumer::Create(
                          engine->get(), Connection(queue, BenchBatch(state)))
                    : engine.status();
    if (queue.empty()) {
      state.SkipWithError("setup failed");
      return;
    }
    if (!bench::TimeIdemDrain(state, consumer, shares)) return;
    consumer->reset();
    engine->reset();
    DeleteQueue(queue);
    state.ResumeTiming();
  }
  bench::SetBrokerBenchItems(state);
  shares.Report(state, "rabbitmq");
}

}  // namespace
}  // namespace idem

int main(int argc, char** argv) {
  return idem::bench::RunBrokerBenchmarks(
      argc, argv, idem::IdemLoop, idem::PlainLoop, {.event_time = false});
}
