// Consume rate of idem::redis::Consumer against plain consume-and-ack loops
// on the same redis-server, stream and batch size (bench/redis_bench.sh
// starts a private server and runs this; IDEM_BENCH_REDIS_PORT names it).
// Per iteration a fresh stream gets 20,000 ledger payments (examples/,
// message-id field; added before the timing), then one consumer group
// reads it to the end in batches of 100 and of 500 (the benchmark's
// argument: XREADGROUP COUNT and the consumer's max_batch):
//
//   BM_Idem              idem::redis::Consumer::PollBatch with the ledger's
//                        handler on a fresh store (Durability::kSync: one
//                        fdatasync per batch), one XACK per batch once the
//                        batch is durable.
//   BM_PlainAckEach      parse each payment, add it to an in-memory balance
//                        map, XACK each entry on its own (one round trip per
//                        message, as most applications do).
//   BM_PlainAckBatch     the same with one XACK per batch.
//
// The plain loops keep nothing durable and deduplicate nothing: they are
// the cost of consuming, not an equivalent. Reported: items_per_second
// (wall time), and for BM_Idem the shares of the time spent in the engine
// (ProcessBatch, WaitDurable) and in Redis calls (XREADGROUP, XACK).
//
//   IDEM_BENCH_REDIS_PORT=6379 build/bench/idem_redis_bench

#include <hiredis/hiredis.h>

#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "benchmark/benchmark.h"
#include "examples/ledger.h"
#include "examples/ledger_stream.h"
#include "idem/engine.h"
#include "idem/redis/consumer.h"
#include "redis/connection.h"
#include "util/temp_dir.h"

namespace idem {
namespace {

constexpr int kMessages = 20000;
constexpr int kAccounts = 1000;

int Port() {
  const char* port = std::getenv("IDEM_BENCH_REDIS_PORT");
  return port == nullptr ? 6379 : std::atoi(port);
}

std::unique_ptr<redis::Connection> Connect() {
  return std::make_unique<redis::Connection>("127.0.0.1", Port(),
                                             absl::Seconds(10));
}

// A fresh stream with kMessages payments and a group "g" at its start.
std::string FillStream(redis::Connection& connection, int64_t iteration,
                       const std::string& name) {
  const std::string stream = absl::StrCat("bench-", name, "-", iteration, "-",
                                          absl::ToUnixNanos(absl::Now()));
  examples::LedgerStreamOptions options;
  options.accounts = kAccounts;
  examples::LedgerStream ledger(options);
  for (int i = 0; i < kMessages; ++i) {
    examples::LedgerMessage m = ledger.Next();
    (void)connection.Command(
        {"XADD", stream, "*", "message-id", m.id, "payload", m.payload});
  }
  (void)connection.Command({"XGROUP", "CREATE", stream, "g", "0"});
  return stream;
}

// Reads kMessages entries with XREADGROUP in batches of range(0), applying
// each to a map, acknowledging each (ack_each) or each batch.
void PlainLoop(benchmark::State& state, bool ack_each) {
  const int batch = static_cast<int>(state.range(0));
  auto connection = Connect();
  int64_t iteration = 0;
  for (auto _ : state) {
    state.PauseTiming();
    const std::string stream =
        FillStream(*connection, iteration++, ack_each ? "each" : "batch");
    std::map<int, int64_t> balances;
    state.ResumeTiming();
    int read = 0;
    while (read < kMessages) {
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
        absl::StatusOr<examples::Payment> payment =
            examples::ParsePayment(redis::ReplyString(fields->element[3]));
        if (payment.ok()) balances[payment->account] += payment->amount;
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
  state.SetItemsProcessed(state.iterations() * kMessages);
}

void BM_PlainAckEach(benchmark::State& state) { PlainLoop(state, true); }
void BM_PlainAckBatch(benchmark::State& state) { PlainLoop(state, false); }

void BM_Idem(benchmark::State& state) {
  const int batch = static_cast<int>(state.range(0));
  auto connection = Connect();
  int64_t iteration = 0;
  absl::Duration engine_time, broker_time, total;
  for (auto _ : state) {
    state.PauseTiming();
    const std::string stream = FillStream(*connection, iteration++, "idem");
    util::TempDir dir;
    auto engine = Engine::Open(dir.Sub("db"), Options());
    redis::ConsumerOptions options;
    options.port = Port();
    options.stream = stream;
    options.group = "g";
    options.consumer_name = "c";
    options.delivery.max_batch = batch;
    options.delivery.relay_outbox = false;
    auto consumer = redis::Consumer::Create(engine->get(), options);
    if (!engine.ok() || !consumer.ok()) {
      state.SkipWithError("setup failed");
      return;
    }
    state.ResumeTiming();
    const absl::Time start = absl::Now();
    int64_t received = 0;
    while (received < kMessages) {
      absl::StatusOr<brokers::BatchReport> report =
          (*consumer)->PollBatch([](const brokers::Delivery& d, Txn& txn) {
            return examples::ApplyPayment(d.payload, txn);
          });
      if (!report.ok()) {
        state.SkipWithError(report.status().ToString().c_str());
        return;
      }
      received += report->received;
    }
    total += absl::Now() - start;
    engine_time += (*consumer)->stats().engine_time;
    broker_time += (*consumer)->stats().broker_time;
    state.PauseTiming();
    consumer->reset();
    engine->reset();
    (void)connection->Command({"DEL", stream});
    state.ResumeTiming();
  }
  state.SetItemsProcessed(state.iterations() * kMessages);
  state.counters["engine_share"] = absl::FDivDuration(engine_time, total);
  state.counters["redis_share"] = absl::FDivDuration(broker_time, total);
}

BENCHMARK(BM_Idem)->Arg(100)->Arg(500)->Iterations(3)->UseRealTime()->Unit(
    benchmark::kMillisecond);
BENCHMARK(BM_PlainAckEach)
    ->Arg(100)
    ->Arg(500)
    ->Iterations(3)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_PlainAckBatch)
    ->Arg(100)
    ->Arg(500)
    ->Iterations(3)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace idem

BENCHMARK_MAIN();
