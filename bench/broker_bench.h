// What the broker consumer benchmarks (redis_consumer_bench.cc,
// nats_consumer_bench.cc, rabbitmq_consumer_bench.cc) share: the stream of
// ledger payments each iteration consumes, the server they run against, what
// a plain consume-and-ack loop does with a payment, draining an idem
// Consumer, the report (items per second; idem's engine and broker shares)
// and the runs' shape. Not thread-safe.

#ifndef IDEM_BENCH_BROKER_BENCH_H_
#define IDEM_BENCH_BROKER_BENCH_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "benchmark/benchmark.h"
#include "examples/ledger_stream.h"
#include "idem/brokers/delivery_loop.h"
#include "idem/engine.h"
#include "servers/server_process.h"

namespace idem::bench {

// Payments per iteration, over this many accounts.
inline constexpr int kBrokerBenchMessages = 20000;
inline constexpr int kBrokerBenchAccounts = 1000;

// The payments every iteration produces (distinct IDs), made once.
const std::vector<examples::LedgerMessage>& BrokerBenchPayments();

// The port on 127.0.0.1 of the server every run of this process uses: the
// environment variable `port_variable` if set (a server run by the caller),
// else a private server from `start`, started on first use and stopped when
// the process exits. Exits with 1, naming `broker`, if it cannot be started.
using StartServer =
    std::function<absl::StatusOr<std::unique_ptr<servers::ServerProcess>>()>;
int BenchServerPort(const std::string& broker, const char* port_variable,
                    const StartServer& start);

// A name no earlier iteration used: "bench-<what>-<iteration>-<unix ns>".
std::string FreshName(const std::string& what, int64_t iteration);

// What a plain loop does with a payment: parse it and add it to an
// in-memory balance (nothing durable, nothing deduplicated).
class PlainLedger {
 public:
  void Apply(std::string_view payload);

 private:
  std::map<int, int64_t> balances_;
};

// A batch size and prefetch for the runs: state.range(0).
int BenchBatch(const benchmark::State& state);

// LoopOptions::receive_timeout for the idem loops: LoopOptions' default, or
// the milliseconds the environment variable IDEM_BENCH_RECEIVE_TIMEOUT_MS
// gives (exits with 1, naming it, if it is not a number >= 0). A profile
// under valgrind needs a long one: valgrind runs one thread at a time, so a
// prefetch waits out the default while the batch before it is processed and
// brings only a part of a batch; the engine's and the loop's cost per batch
// is then spread over a few deliveries instead of max_batch (the
// deliveries_per_batch counter shows it), which a run at full speed does not
// do.
absl::Duration BenchReceiveTimeout();

// idem's figures over the iterations, reported as counters engine_share and
// <broker>_share (LoopStats::engine_time and broker_time over the wall time
// of the draining) and deliveries_per_batch (LoopStats::received over
// LoopStats::batches).
class IdemShares {
 public:
  void Add(const brokers::LoopStats& stats, absl::Duration wall);
  void Report(benchmark::State& state, const std::string& broker) const;

 private:
  absl::Duration engine_;
  absl::Duration broker_;
  absl::Duration wall_;
  int64_t received_ = 0;
  int64_t batches_ = 0;
};

// Calls `poll` (a consumer's PollBatch with the ledger's handler) until
// kBrokerBenchMessages deliveries were received; returns the wall time, or
// the first error.
absl::StatusOr<absl::Duration> DrainIdem(
    const std::function<absl::StatusOr<brokers::BatchReport>(brokers::Handler)>&
        poll);

// One iteration's timed part for idem, called with the timing paused:
// drains `consumer` (DrainIdem on its PollBatch) with the timing running and
// adds its figures to `shares`. Returns false, the benchmark skipped with the
// error, if the consumer could not be created or draining failed; the
// timing is paused again either way.
template <typename Consumer>
bool TimeIdemDrain(benchmark::State& state,
                   const absl::StatusOr<std::unique_ptr<Consumer>>& consumer,
                   IdemShares& shares) {
  if (!consumer.ok()) {
    state.SkipWithError(consumer.status().ToString().c_str());
    return false;
  }
  state.ResumeTiming();
  absl::StatusOr<absl::Duration> wall =
      DrainIdem([&](brokers::Handler h) { return (*consumer)->PollBatch(h); });
  state.PauseTiming();
  if (!wall.ok()) {
    state.SkipWithError(wall.status().ToString().c_str());
    return false;
  }
  shares.Add((*consumer)->stats(), *wall);
  return true;
}

// A fresh store for one iteration of idem: Engine::Open in `dir` with
// `durability`.
absl::StatusOr<std::unique_ptr<Engine>> OpenBenchStore(const std::string& dir,
                                                       Durability durability);

// Items per second: kBrokerBenchMessages per iteration.
void SetBrokerBenchItems(benchmark::State& state);

// One iteration loop of idem's consumer under `durability`, and of a plain
// consume-and-ack loop acknowledging each message (ack_each) or each batch.
using IdemLoop = void (*)(benchmark::State& state, Durability durability);
using PlainLoop = void (*)(benchmark::State& state, bool ack_each);

// What every broker benchmark runs: batch 100, 500 and 2000, three
// iterations each, wall time in milliseconds; the CPU column is the whole
// process's CPU time (user + sys of every thread: the client library's,
// RocksDB's), which leaves out the server, a process of its own. Per
// message: the CPU column's milliseconds / kBrokerBenchMessages.
void BrokerBenchRuns(benchmark::internal::Benchmark* b);

// What a broker's deliveries carry beside the payment, so that
// BM_EngineOnly's messages cost the engine what the consumer's do. Each
// carries a stream position in a source named as the idem loop's streams
// and queues (FreshName("idem", ...)); `event_time`: also an event time, as
// the adapter sets one from the broker's timestamp of the message (NATS,
// Redis; RabbitMQ only when the publisher set the timestamp property, which
// the benchmark's publisher does not).
struct DeliveryShape {
  bool event_time = false;
};

// The benchmarks' main: registers, under the same names for every broker,
// BM_Idem (kSync), BM_IdemBuffered (kBuffered), BM_PlainAckEach,
// BM_PlainAckBatch and BM_EngineOnly (the same payments straight to
// Engine::ProcessBatch under kSync, no broker, shaped as `shape` says: the
// most an idem consumer can reach, and the engine's own share of its CPU),
// each with batch 100, 500 and 2000, three iterations, wall time in
// milliseconds; then runs what the command line selects. Returns the exit
// code.
int RunBrokerBenchmarks(int argc, char** argv, IdemLoop idem, PlainLoop plain,
                        DeliveryShape shape);

}  // namespace idem::bench

#endif  // IDEM_BENCH_BROKER_BENCH_H_
