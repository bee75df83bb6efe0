#include "bench/broker_bench.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "examples/ledger.h"
#include "util/temp_dir.h"

namespace idem::bench {

const std::vector<examples::LedgerMessage>& BrokerBenchPayments() {
  static const std::vector<examples::LedgerMessage>* payments = [] {
    examples::LedgerStreamOptions options;
    options.accounts = kBrokerBenchAccounts;
    return new std::vector<examples::LedgerMessage>(
        examples::MakeLedgerMessages(options, kBrokerBenchMessages));
  }();
  return *payments;
}

int BenchServerPort(const std::string& broker, const char* port_variable,
                    const StartServer& start) {
  if (const char* port = std::getenv(port_variable)) return std::atoi(port);
  // Destroyed at exit, which stops the server.
  static const std::unique_ptr<servers::ServerProcess> server = [&] {
    absl::StatusOr<std::unique_ptr<servers::ServerProcess>> started = start();
    if (!started.ok()) {
      std::fprintf(stderr, "%s_bench: cannot start the server: %s\n",
                   broker.c_str(), started.status().ToString().c_str());
      std::exit(1);
    }
    return std::move(*started);
  }();
  return server->port();
}

std::string FreshName(const std::string& what, int64_t iteration) {
  return absl::StrCat("bench-", what, "-", iteration, "-",
                      absl::ToUnixNanos(absl::Now()));
}

void PlainLedger::Apply(std::string_view payload) {
  absl::StatusOr<examples::Payment> payment = examples::ParsePayment(payload);
  if (payment.ok()) balances_[payment->account] += payment->amount;
}

int BenchBatch(const benchmark::State& state) {
  return static_cast<int>(state.range(0));
}

absl::Duration BenchReceiveTimeout() {
  constexpr char kVariable[] = "IDEM_BENCH_RECEIVE_TIMEOUT_MS";
  const char* text = std::getenv(kVariable);
  if (text == nullptr) return brokers::LoopOptions().receive_timeout;
  int64_t millis = 0;
  if (!absl::SimpleAtoi(text, &millis) || millis < 0) {
    std::fprintf(stderr, "%s must be a number of milliseconds >= 0, not '%s'\n",
                 kVariable, text);
    std::exit(1);
  }
  return absl::Milliseconds(millis);
}

void IdemShares::Add(const brokers::LoopStats& stats, absl::Duration wall) {
  engine_ += stats.engine_time;
  broker_ += stats.broker_time;
  wall_ += wall;
  received_ += stats.received;
  batches_ += stats.batches;
}

void IdemShares::Report(benchmark::State& state,
                        const std::string& broker) const {
  state.counters["engine_share"] = absl::FDivDuration(engine_, wall_);
  state.counters[broker + "_share"] = absl::FDivDuration(broker_, wall_);
  state.counters["deliveries_per_batch"] =
      batches_ > 0
          ? static_cast<double>(received_) / static_cast<double>(batches_)
          : 0.0;
}

absl::StatusOr<absl::Duration> DrainIdem(
    const std::function<absl::StatusOr<brokers::BatchReport>(brokers::Handler)>&
        poll) {
  const absl::Time start = absl::Now();
  int64_t received = 0;
  while (received < kBrokerBenchMessages) {
    absl::StatusOr<brokers::BatchReport> report =
        poll([](const brokers::Delivery& d, Txn& txn) {
          return examples::ApplyPayment(d.payload, txn);
        });
    if (!report.ok()) return report.status();
    received += report->received;
  }
  return absl::Now() - start;
}

absl::StatusOr<std::unique_ptr<Engine>> OpenBenchStore(const std::string& dir,
                                                       Durability durability) {
  Options options;
  options.durability = durability;
  return Engine::Open(dir, options);
}

void SetBrokerBenchItems(benchmark::State& state) {
  state.SetItemsProcessed(state.iterations() * kBrokerBenchMessages);
}

namespace {

// idem's engine alone on the same payments, without a broker: a fresh store
// under kSync, then Engine::ProcessBatch over batches of BenchBatch(state)
// with the ledger's handler, each message carrying its payment's ID and
// payload and what a consumer's delivery of the broker carries beside them
// (`shape`): a stream position in a source named as the idem loop's streams
// and queues are (FreshName), and an event time where the adapter sets one.
// What an idem consumer of the broker can reach on this machine at most,
// and what the engine's own work on its deliveries costs.
void EngineOnlyLoop(benchmark::State& state, const DeliveryShape& shape) {
  const std::vector<examples::LedgerMessage>& payments = BrokerBenchPayments();
  const size_t batch = static_cast<size_t>(BenchBatch(state));
  std::vector<Message> messages;
  messages.reserve(batch);
  int64_t iteration = 0;
  for (auto _ : state) {
    state.PauseTiming();
    const std::string source = FreshName("idem", iteration++);
    // As a broker stamps the messages it stores: one after another, just
    // before they are consumed.
    const absl::Time stored = absl::Now() - absl::Seconds(1);
    util::TempDir dir;
    absl::StatusOr<std::unique_ptr<Engine>> engine =
        OpenBenchStore(dir.Sub("db"), Durability::kSync);
    if (!engine.ok()) {
      state.SkipWithError(engine.status().ToString().c_str());
      return;
    }
    state.ResumeTiming();
    for (size_t first = 0; first < payments.size(); first += batch) {
      messages.clear();
      for (size_t i = first; i < std::min(first + batch, payments.size());
           ++i) {
        Message message;
        message.id = payments[i].id;
        message.payload = payments[i].payload;
        message.source = source;
        message.offset = static_cast<int64_t>(i) + 1;
        if (shape.event_time) {
          message.event_time =
              stored + absl::Microseconds(static_cast<int64_t>(i));
        }
        messages.push_back(message);
      }
      absl::StatusOr<std::vector<Result>> results =
          (*engine)->ProcessBatch(messages, examples::HandlePayment);
      if (!results.ok()) {
        state.SkipWithError(results.status().ToString().c_str());
        return;
      }
    }
    state.PauseTiming();
    engine->reset();  // closing the store is not timed
    state.ResumeTiming();
  }
  SetBrokerBenchItems(state);
}

}  // namespace

void BrokerBenchRuns(benchmark::internal::Benchmark* b) {
  b->Arg(100)
      ->Arg(500)
      ->Arg(2000)
      ->Iterations(3)
      ->UseRealTime()
      ->MeasureProcessCPUTime()
      ->Unit(benchmark::kMillisecond);
}

int RunBrokerBenchmarks(int argc, char** argv, IdemLoop idem, PlainLoop plain,
                        DeliveryShape shape) {
  benchmark::RegisterBenchmark("BM_Idem", [idem](benchmark::State& state) {
    idem(state, Durability::kSync);
  })->Apply(BrokerBenchRuns);
  benchmark::RegisterBenchmark("BM_IdemBuffered", [idem](
                                                      benchmark::State& state) {
    idem(state, Durability::kBuffered);
  })->Apply(BrokerBenchRuns);
  benchmark::RegisterBenchmark("BM_PlainAckEach", [plain](
                                                      benchmark::State& state) {
    plain(state, true);
  })->Apply(BrokerBenchRuns);
  benchmark::RegisterBenchmark(
      "BM_PlainAckBatch",
      [plain](benchmark::State& state) { plain(state, false); })
      ->Apply(BrokerBenchRuns);
  benchmark::RegisterBenchmark("BM_EngineOnly", [shape](
                                                    benchmark::State& state) {
    EngineOnlyLoop(state, shape);
  })->Apply(BrokerBenchRuns);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

}  // namespace idem::bench
