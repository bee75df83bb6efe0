// Consume rate of idem::redis::Consumer against plain consume-and-ack loops
// on the same redis-server, stream and batch size. `bench/broker_bench.sh
// redis` runs it; it starts a private server without persistence (servers/)
// unless IDEM_BENCH_REDIS_PORT names one on 127.0.0.1.
// Per iteration a fresh stream gets 20,000 ledger payments
// (bench/broker_bench.h, message-id field; added before the timing), then
// one consumer group reads it to the end in batches of 100, 500 and 2000
// (the benchmark's argument: XREADGROUP COUNT and the consumer's
// max_batch):
//
//   BM_Idem              idem::redis::Consumer::PollBatch with the ledger's
//                        handler on a fresh store (Durability::kSync: one
//                        fdatasync per batch), one XACK per batch once the
//                        batch is durable.
//   BM_IdemBuffered      the same under Durability::kBuffered (the loop's
//                        WaitDurable syncs once per batch).
//   BM_PlainAckEach      parse each payment, add it to an in-memory balance
//                        map, XACK each entry on its own (one round trip per
//                        message, as most applications do).
//   BM_PlainAckBatch     the same with one XACK per batch.
//   BM_EngineOnly        the payments straight to Engine::ProcessBatch, no
//                        server (bench/broker_bench.h).
//
// The plain loops keep nothing durable and deduplicate nothing: they are
// the cost of consuming, not an equivalent. Reported: items_per_second
// (wall time), and for BM_Idem the shares of the time spent in the engine
// (ProcessBatch, WaitDurable) and in Redis calls (XREADGROUP, XACK).
//
//   IDEM_BENCH_REDIS_PORT=6379 build/bench/idem_redis_bench

#include <hiredis/hiredis.h>

#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "bench/broker_bench.h"
#include "idem/engine.h"
#include "idem/redis/consumer.h"
#include "redis/connection.h"
#include "servers/redis_server.h"
#include "util/temp_dir.h"

namespace idem {
namespace {

using bench::BenchBatch;

// The server: IDEM_BENCH_REDIS_PORT, or a private one without persistence
// (the plain loops keep nothing either) started on first use.
int Port() {
  return bench::BenchServerPort("redis", "IDEM_BENCH_REDIS_PORT", [] {
    return servers::StartRedisServer(servers::RedisPersistence::kNone);
  });
}

std::unique_ptr<redis::Connection> Connect() {
  return std::make_unique<redis::Connection>("127.0.0.1", Port(),
                                             absl::Seconds(10));
}

// A fresh stream with every payment and a group "g" at its start.
std::string FillStream(redis::Connection& connection, int64_t iteration,
                       const std::string& name) {
  const std::string stream = bench::FreshName(name, iteration);
  for (const examples::LedgerMessage& m : bench::BrokerBenchPayments()) {
    (void)connection.Command(
        {"XADD", stream, "*", "message-id", m.id, "payload", m.payload});
  }
  (void)connection.Command({"XGROUP", "CREATE", stream, "g", "0"});
  return stream;
}

// Reads kMessages entries with XREADGROUP in batches of range(0), applying
// each to a map, acknowledging each (ack_each) or each batch.
void PlainLoop(benchmark::State& state, bool ack_each) {
  const int batch = BenchBatch(state);
  auto connection = Connect();
  int64_t iteration = 0;
  for (auto _ : state) {
    state.PauseTiming();
    const std::string stream =
        FillStream(*connection, iteration++, ack_each ? "each" : "batch");
    bench::PlainLedger ledger;
    state.ResumeTiming();
    int read = 0;
    while (read < bench::kBrokerBenchMessages) {
      absl::StatusOr<redis::Reply> reply =
          connection->Command({"XREADGROUP", "GROUP", "g", "c", "COUNT",
                               absl::StrCat(batch), "STREAMS", stream, ">"});
      if (!reply.ok() || (*reply)->type != REDIS_REPLY_ARRAY) {
        state.SkipWithError("XREADGROUP failed");
        return;
      }
      const redisReply* entries = (*reply)->element[0]->element[1];
      std::vector<std::string> ack = {"XACK", stream, "g"};
      for (size_t i = 0; i < entries->elements; ++i) {
        const redisReply* entry = entries->element[i];
        const redisReply* fields = entry->element[1];
        ledger.Apply(redis::ReplyString(fields->element[3]));
        const std::string id(redis::ReplyString(entry->element[0]));
        if (ack_each) {
          (void)connection->Command({"XACK", stream, "g", id});
        } else {
          ack.push_back(id);
        }
      }
      if (!ack_each) (void)connection->Command(ack);
      read += static_cast<int>(entries->elements);
    }
    state.PauseTiming();
    (void)connection->Command({"DEL", stream});
    state.ResumeTiming();
  }
  bench::SetBrokerBenchItems(state);
}

void IdemLoop(benchmark::State& state, Durability durability) {
  auto connection = Connect();
  int64_t iteration = 0;
  bench::IdemShares shares;
  for (auto _ : state) {
    state.PauseTiming();
    const std::string stream = FillStream(*connection, iteration++, "idem");
    util::TempDir dir;
    absl::StatusOr<std::unique_ptr<Engine>> engine =
        bench::OpenBenchStore(dir.Sub("db"), durability);
    redis::ConsumerOptions options;
    options.port = Port();
    options.stream = stream;
    options.group = "g";
    options.consumer_name = "c";
    options.delivery.max_batch = BenchBatch(state);
    options.delivery.relay_outbox = false;
    options.delivery.receive_timeout = bench::BenchReceiveTimeout();
    absl::StatusOr<std::unique_ptr<redis::Consumer>> consumer =
        engine.ok() ? redis::Consumer::Create(engine->get(), options)
                    : engine.status();
    if (!bench::TimeIdemDrain(state, consumer, shares)) return;
    consumer->reset();
    engine->reset();
    (void)connection->Command({"DEL", stream});
    state.ResumeTiming();
  }
  bench::SetBrokerBenchItems(state);
  shares.Report(state, "redis");
}

}  // namespace
}  // namespace idem

int main(int argc, char** argv) {
  return idem::bench::RunBrokerBenchmarks(
      argc, argv, idem::IdemLoop, idem::PlainLoop, {.event_time = true});
}
