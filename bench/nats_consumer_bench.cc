// Consume rate of idem::nats::Consumer against plain consume-and-ack loops
// on the same nats-server (JetStream, file storage), stream and batch size.
// `bench/broker_bench.sh nats` runs it; it starts a private server
// (servers/) unless IDEM_BENCH_NATS_PORT names one on 127.0.0.1. Per iteration
// a fresh stream gets 20,000 ledger payments (bench/broker_bench.h; published
// before the timing), then one durable pull consumer reads it to the end in
// fetches of 100, 500 and 2000 (the benchmark's argument: the fetch size and
// the consumer's max_batch):
//
//   BM_Idem           idem::nats::Consumer::PollBatch with the ledger's
//                     handler on a fresh store (Durability::kSync: one
//                     fdatasync per batch); the next fetch runs while a
//                     batch is processed (ConsumerOptions::prefetch); once
//                     the batch is durable, one +ACK per message, sent
//                     together, confirmed by a flush at the next batch.
//   BM_IdemBuffered   the same under Durability::kBuffered (the loop's
//                     WaitDurable syncs once per batch).
//   BM_IdemNoPrefetch BM_Idem with ConsumerOptions::prefetch off: each
//                     fetch starts once the batch before it is acked.
//   BM_PlainAckEach   parse each payment, add it to an in-memory balance
//                     map, natsMsg_Ack each message (explicit ack policy).
//   BM_PlainAckBatch  the same on a consumer with AckPolicy All, acking the
//                     last message of each fetch.
//   BM_EngineOnly     the payments straight to Engine::ProcessBatch, no
//                     server (bench/broker_bench.h).
//
// The plain loops keep nothing durable and deduplicate nothing: they are
// the cost of consuming, not an equivalent. Reported: items_per_second
// (wall time), and for idem the shares of the time spent in the engine and
// in NATS calls (engine_share, nats_share).

#include <nats/nats.h>

#include <cstdlib>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "bench/broker_bench.h"
#include "idem/engine.h"
#include "idem/nats/consumer.h"
#include "servers/nats_server.h"
#include "util/temp_dir.h"

namespace idem {
namespace {

using bench::BenchBatch;

// The server: IDEM_BENCH_NATS_PORT, or a private one started on first use.
std::string Url() {
  return servers::NatsUrl(
      bench::BenchServerPort("nats", "IDEM_BENCH_NATS_PORT",
                             [] { return servers::StartNatsServer(); }));
}

// A connection with its JetStream context.
class JetStream {
 public:
  JetStream() {
    ok_ = natsConnection_ConnectTo(&connection_, Url().c_str()) == NATS_OK &&
          natsConnection_JetStream(&js_, connection_, nullptr) == NATS_OK;
  }
  ~JetStream() {
    if (js_ != nullptr) jsCtx_Destroy(js_);
    if (connection_ != nullptr) natsConnection_Destroy(connection_);
  }
  bool ok() const { return ok_; }
  jsCtx* js() const { return js_; }

  // A fresh stream capturing "<stream>.in" holding every payment (published
  // asynchronously, each with its message-id header), and a durable "d"
  // with `ack_policy`. Returns the stream's name, empty on failure.
  std::string FillStream(const std::string& name, jsAckPolicy ack_policy) {
    const std::string subject = name + ".in";
    jsStreamConfig stream;
    jsStreamConfig_Init(&stream);
    stream.Name = name.c_str();
    const char* subjects[] = {subject.c_str()};
    stream.Subjects = subjects;
    stream.SubjectsLen = 1;
    stream.Storage = js_FileStorage;
    jsErrCode error = static_cast<jsErrCode>(0);
    if (js_AddStream(nullptr, js_, &stream, nullptr, &error) != NATS_OK) {
      return "";
    }
    for (const examples::LedgerMessage& m : bench::BrokerBenchPayments()) {
      natsMsg* msg = nullptr;
      natsMsg_Create(&msg, subject.c_str(), nullptr, m.payload.data(),
                     static_cast<int>(m.payload.size()));
      natsMsgHeader_Set(msg, "message-id", m.id.c_str());
      if (js_PublishMsgAsync(js_, &msg, nullptr) != NATS_OK) {
        natsMsg_Destroy(msg);
        return "";
      }
    }
    jsPubOptions wait;
    jsPubOptions_Init(&wait);
    wait.MaxWait = 60000;
    if (js_PublishAsyncComplete(js_, &wait) != NATS_OK) return "";
    jsConsumerConfig consumer;
    jsConsumerConfig_Init(&consumer);
    consumer.Durable = "d";
    consumer.AckPolicy = ack_policy;
    consumer.FilterSubject = subject.c_str();
    // A fetch of up to 2000 is not held back by the ack-pending limit.
    consumer.MaxAckPending = bench::kBrokerBenchMessages;
    if (js_AddConsumer(nullptr, js_, name.c_str(), &consumer, nullptr,
                       &error) != NATS_OK) {
      return "";
    }
    return name;
  }

  void DeleteStream(const std::string& name) {
    js_DeleteStream(js_, name.c_str(), nullptr, nullptr);
  }

 private:
  natsConnection* connection_ = nullptr;
  jsCtx* js_ = nullptr;
  bool ok_ = false;
};

// Fetches up to `batch` messages (waiting up to 1 s), applies each to
// `ledger` and acks each (ack_each: natsMsg_Ack, which does not wait for the
// server) or the last one (the consumer's AckPolicy All covers the rest).
// Returns how many it fetched; kUnavailable if fetching failed.
absl::StatusOr<int> PlainFetch(natsSubscription* sub, int batch, bool ack_each,
                               bench::PlainLedger& ledger) {
  natsMsgList list = {nullptr, 0};
  jsErrCode error = static_cast<jsErrCode>(0);
  const natsStatus fetched =
      natsSubscription_Fetch(&list, sub, batch, 1000, &error);
  if (fetched != NATS_OK && fetched != NATS_TIMEOUT) {
    natsMsgList_Destroy(&list);
    return absl::UnavailableError(
        absl::StrCat("nats: fetching: ", natsStatus_GetText(fetched)));
  }
  for (int i = 0; i < list.Count; ++i) {
    natsMsg* msg = list.Msgs[i];
    ledger.Apply(
        std::string_view(natsMsg_GetData(msg), natsMsg_GetDataLength(msg)));
    if (ack_each) natsMsg_Ack(msg, nullptr);
  }
  if (!ack_each && list.Count > 0) {
    natsMsg_Ack(list.Msgs[list.Count - 1], nullptr);
  }
  const int count = list.Count;
  natsMsgList_Destroy(&list);
  return count;
}

// Reads every payment from durable "d" in fetches of range(0), applying
// each to a map, acking each message (ack_each) or the last of each fetch
// (AckPolicy All).
void PlainLoop(benchmark::State& state, bool ack_each) {
  const int batch = BenchBatch(state);
  JetStream nats;
  if (!nats.ok()) {
    state.SkipWithError("connecting failed");
    return;
  }
  int64_t iteration = 0;
  for (auto _ : state) {
    state.PauseTiming();
    const std::string stream = nats.FillStream(
        bench::FreshName(ack_each ? "each" : "batch", iteration++),
        ack_each ? js_AckExplicit : js_AckAll);
    natsSubscription* sub = nullptr;
    jsErrCode error = static_cast<jsErrCode>(0);
    jsSubOptions options;
    jsSubOptions_Init(&options);
    options.Stream = stream.c_str();
    options.Consumer = "d";
    if (stream.empty() ||
        js_PullSubscribe(&sub, nats.js(), (stream + ".in").c_str(), "d",
                         nullptr, &options, &error) != NATS_OK) {
      state.SkipWithError("setting up the stream failed");
      return;
    }
    bench::PlainLedger ledger;
    state.ResumeTiming();
    int read = 0;
    while (read < bench::kBrokerBenchMessages) {
      absl::StatusOr<int> fetched = PlainFetch(sub, batch, ack_each, ledger);
      if (!fetched.ok()) {
        state.SkipWithError(fetched.status().ToString().c_str());
        return;
      }
      read += *fetched;
    }
    state.PauseTiming();
    natsSubscription_Destroy(sub);
    nats.DeleteStream(stream);
    state.ResumeTiming();
  }
  bench::SetBrokerBenchItems(state);
}

void IdemLoopWith(benchmark::State& state, Durability durability,
                  bool prefetch) {
  JetStream nats;
  if (!nats.ok()) {
    state.SkipWithError("connecting failed");
    return;
  }
  int64_t iteration = 0;
  bench::IdemShares shares;
  for (auto _ : state) {
    state.PauseTiming();
    const std::string stream =
        nats.FillStream(bench::FreshName("idem", iteration++), js_AckExplicit);
    util::TempDir dir;
    absl::StatusOr<std::unique_ptr<Engine>> engine =
        bench::OpenBenchStore(dir.Sub("db"), durability);
    nats::ConsumerOptions options;
    options.url = Url();
    options.stream = stream;
    options.subject = stream + ".in";
    options.durable = "d";
    options.create_stream = false;
    // The settings of the durable FillStream made (no delivery limit), which
    // the consumer binds as it is.
    options.max_deliver = 0;
    options.id_header = "message-id";
    options.prefetch = prefetch;
    options.delivery.max_batch = BenchBatch(state);
    options.delivery.relay_outbox = false;
    options.delivery.receive_timeout = bench::BenchReceiveTimeout();
    absl::StatusOr<std::unique_ptr<nats::Consumer>> consumer =
        engine.ok() ? nats::Consumer::Create(engine->get(), options)
                    : engine.status();
    if (stream.empty()) {
      state.SkipWithError("setup failed");
      return;
    }
    if (!bench::TimeIdemDrain(state, consumer, shares)) return;
    consumer->reset();
    engine->reset();
    nats.DeleteStream(stream);
    state.ResumeTiming();
  }
  bench::SetBrokerBenchItems(state);
  shares.Report(state, "nats");
}

void IdemLoop(benchmark::State& state, Durability durability) {
  IdemLoopWith(state, durability, /*prefetch=*/true);
}

}  // namespace
}  // namespace idem

int main(int argc, char** argv) {
  benchmark::RegisterBenchmark("BM_IdemNoPrefetch", [](benchmark::State&
                                                           state) {
    idem::IdemLoopWith(state, idem::Durability::kSync,
                       /*prefetch=*/false);
  })->Apply(idem::bench::BrokerBenchRuns);
  return idem::bench::RunBrokerBenchmarks(
      argc, argv, idem::IdemLoop, idem::PlainLoop, {.event_time = true});
}
