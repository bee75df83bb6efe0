#include "cli/broker_demo.h"

#include <signal.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <random>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "cli/balance_report.h"
#include "cli/broker_demo_brokers.h"
#include "cli/exit_codes.h"
#include "cli/tool_usage.h"
#include "examples/ledger_stream.h"
#include "idem/engine.h"
#include "servers/server_process.h"
#include "util/json_writer.h"
#include "util/temp_dir.h"

namespace idem::cli {
namespace {

constexpr char kTool[] = "idem-broker-demo";
constexpr int kAccounts = 50;

// The payments to produce, with every duplicate_every-th one publishing an
// earlier record again, and what applying each unique one once leaves.
struct DemoStream {
  std::vector<DemoRecord> records;
  std::vector<std::string> unique_ids;
  examples::ExpectedBalances expected{kAccounts};
};

DemoStream MakeDemoStream(const BrokerDemoOptions& options) {
  examples::LedgerStreamOptions payments;
  payments.seed = options.seed;
  payments.accounts = kAccounts;
  payments.id_prefix = "pay";
  examples::LedgerStream ledger(payments);
  std::mt19937_64 rng(options.seed);  // which earlier record a duplicate is
  DemoStream stream;
  for (int64_t i = 0; i < options.messages; ++i) {
    if (options.duplicate_every > 0 && i > 0 &&
        i % options.duplicate_every == 0) {
      stream.records.push_back(stream.records[rng() % stream.records.size()]);
      continue;
    }
    examples::LedgerMessage payment = ledger.Next();
    stream.expected.Add(payment.payment);
    stream.unique_ids.push_back(payment.id);
    stream.records.push_back({std::move(payment.id), payment.payload});
  }
  return stream;
}

// How many of `ids` the store at `path` has seen, read through a read-only
// engine (the worker may have the store open).
absl::StatusOr<int64_t> CountSeen(const std::string& path,
                                  const std::vector<std::string>& ids) {
  Options read_only;
  read_only.read_only = true;
  absl::StatusOr<std::unique_ptr<Engine>> engine =
      Engine::Open(path, read_only);
  if (!engine.ok()) return engine.status();
  int64_t seen = 0;
  for (const std::string& id : ids) {
    absl::StatusOr<bool> s = (*engine)->Seen(id);
    if (!s.ok()) return s.status();
    seen += *s ? 1 : 0;
  }
  return seen;
}

absl::Status ApplyPayment(const brokers::Delivery& delivery, Txn& txn) {
  return examples::ApplyPayment(delivery.payload, txn);
}

class BrokerDemo {
 public:
  BrokerDemo(const BrokerDemoOptions& options, const std::string& self,
             const BrokerDemoWorker& variant, std::ostream& progress)
      : options_(options),
        self_(self),
        variant_(variant),
        progress_(progress) {}

  absl::StatusOr<BrokerDemoReport> Run() {
    const absl::Time start = absl::Now();
    if (absl::Status s = SetUp(); !s.ok()) return s;
    if (absl::Status s = CreateSource(); !s.ok()) return s;
    const DemoStream stream = MakeDemoStream(options_);
    if (absl::Status s = Produce(stream); !s.ok()) return s;
    if (absl::Status s = CrashConsumer(stream); !s.ok()) return s;
    if (absl::Status s = TakeOver(); !s.ok()) return s;
    if (absl::Status s = Check(stream); !s.ok()) return s;
    report_.seconds = absl::ToDoubleSeconds(absl::Now() - start);
    return report_;
  }

 private:
  // The scratch directory, the broker and its server.
  absl::Status SetUp() {
    absl::StatusOr<util::TempDir> dir =
        util::TempDir::Create("idem_broker_demo_");
    if (!dir.ok()) return dir.status();
    if (options_.keep) dir->Keep();
    scratch_ = *std::move(dir);
    report_.broker = options_.broker;
    report_.scratch = scratch_->path();
    report_.store = scratch_->Sub("store");
    DemoEndpoint endpoint;
    endpoint.host = options_.host;
    endpoint.port = options_.port != 0
                        ? options_.port
                        : DemoBroker::DefaultPort(options_.broker);
    endpoint.source =
        !options_.source.empty()
            ? options_.source
            : absl::StrCat("idem-demo-", absl::ToUnixNanos(absl::Now()));
    absl::StatusOr<std::unique_ptr<DemoBroker>> broker =
        DemoBroker::Create(options_.broker, endpoint);
    if (!broker.ok()) return broker.status();
    broker_ = *std::move(broker);
    report_.source = endpoint.source;
    if (options_.start_server) {
      progress_ << "starting a private " << options_.broker << " server\n";
      if (absl::Status s = broker_->StartServer(); !s.ok()) {
        return absl::UnavailableError(
            absl::StrCat("the private server did not start: ", s.message()));
      }
    }
    const DemoEndpoint& at = broker_->endpoint();
    report_.server =
        absl::StrCat(options_.start_server ? "private server on " : "", at.host,
                     ":", at.port);
    progress_ << options_.broker << ": " << report_.server << ", source "
              << at.source << "\n";
    return absl::OkStatus();
  }

  // The store, and the source (stream, group, durable, queue) made by a
  // first consumer on it, so that producing and the worker find them.
  absl::Status CreateSource() {
    absl::StatusOr<std::unique_ptr<Engine>> engine =
        Engine::Open(report_.store, Options());
    if (!engine.ok()) return engine.status();
    return broker_->Consume(engine->get(), "creator", options_.batch, {})
        .status();
  }

  absl::Status Produce(const DemoStream& stream) {
    report_.produced = static_cast<int64_t>(stream.records.size());
    report_.unique_payments = static_cast<int64_t>(stream.unique_ids.size());
    report_.producer_duplicates = report_.produced - report_.unique_payments;
    progress_ << "producing " << report_.produced << " payments ("
              << report_.producer_duplicates << " published twice)\n";
    return broker_->Produce(stream.records);
  }

  // Runs the worker until its handler is at about a third of the payments,
  // inside a batch (BrokerDemoWorker::hold_at), then kills it with SIGKILL.
  absl::Status CrashConsumer(const DemoStream& stream) {
    const DemoEndpoint& at = broker_->endpoint();
    std::vector<std::string> argv = {self_,
                                     "--broker_worker",
                                     "--broker=" + options_.broker,
                                     "--host=" + at.host,
                                     absl::StrCat("--port=", at.port),
                                     "--source=" + at.source,
                                     "--store=" + report_.store,
                                     absl::StrCat("--batch=", options_.batch)};
    if (variant_.ack_on_receive) argv.push_back("--worker_ack_on_receive");
    const int64_t target = report_.unique_payments / 3;
    const std::string holding = scratch_->Sub("worker.holding");
    argv.push_back(absl::StrCat("--worker_hold_at=", target));
    argv.push_back("--worker_hold_file=" + holding);
    const std::string log = scratch_->Sub("worker.log");
    absl::StatusOr<servers::ChildProcess> worker =
        servers::ChildProcess::Spawn(argv, log);
    if (!worker.ok()) return worker.status();
    progress_ << "consumer 1: started (a separate process, log " << log
              << ")\n";
    if (absl::Status s = WaitForWorker(*worker, stream, holding, log);
        !s.ok()) {
      return s;
    }
    worker->Signal(SIGKILL);
    absl::StatusOr<int64_t> applied =
        CountSeen(report_.store, stream.unique_ids);
    if (!applied.ok()) return applied.status();
    report_.applied_before_kill = *applied;
    progress_ << "consumer 1: killed (SIGKILL) after applying " << *applied
              << " of " << report_.unique_payments << " payments\n";
    return absl::OkStatus();
  }

  // Waits until the worker holds inside a batch (it created `holding`),
  // watching its progress in the store. kDeadlineExceeded after
  // idle_timeout without progress; kInternal if the worker exits.
  absl::Status WaitForWorker(servers::ChildProcess& worker,
                             const DemoStream& stream,
                             const std::string& holding,
                             const std::string& log) {
    int64_t last = -1;
    absl::Time last_change = absl::Now();
    while (true) {
      // A read-only open can race with the worker's flushes: retried.
      absl::StatusOr<int64_t> seen =
          CountSeen(report_.store, stream.unique_ids);
      if (std::filesystem::exists(holding)) return absl::OkStatus();
      if (seen.ok() && *seen != last) {
        last = *seen;
        last_change = absl::Now();
      }
      if (worker.Exited()) {
        return absl::InternalError("consumer 1 exited by itself; see " + log);
      }
      if (absl::Now() - last_change > options_.idle_timeout) {
        return absl::DeadlineExceededError(absl::StrCat(
            "consumer 1 made no progress for ",
            absl::FormatDuration(options_.idle_timeout), "; see ", log));
      }
      absl::SleepFor(absl::Milliseconds(20));
    }
  }

  // A new consumer on the same store, polled until nothing has arrived for
  // the broker's redelivery delay plus a second.
  absl::Status TakeOver() {
    absl::StatusOr<std::unique_ptr<Engine>> engine =
        Engine::Open(report_.store, Options());
    if (!engine.ok()) return engine.status();
    absl::StatusOr<std::unique_ptr<DemoConsumer>> consumer =
        broker_->Consume(engine->get(), "takeover", options_.batch, {});
    if (!consumer.ok()) return consumer.status();
    progress_ << "consumer 2: started on the same store\n";
    const absl::Duration quiet = broker_->RedeliveryDelay() + absl::Seconds(1);
    const absl::Time start = absl::Now();
    absl::Time last_received = start;
    while (absl::Now() - last_received < quiet) {
      absl::StatusOr<brokers::BatchReport> batch =
          (*consumer)->PollBatch(ApplyPayment);
      if (!batch.ok()) return batch.status();
      if (batch->received > 0) last_received = absl::Now();
      if (absl::Now() - start > options_.idle_timeout + quiet) {
        return absl::DeadlineExceededError(
            "consumer 2 still receives after the idle timeout");
      }
    }
    const DemoConsumerStats stats = (*consumer)->stats();
    report_.received = stats.loop.received;
    report_.processed = stats.loop.processed;
    report_.duplicates = stats.loop.duplicates;
    report_.redelivered = stats.redelivered;
    report_.acked = stats.loop.acked;
    report_.batches = stats.loop.batches;
    progress_ << "consumer 2: nothing more to deliver\n";
    return absl::OkStatus();
  }

  absl::Status Check(const DemoStream& stream) {
    absl::StatusOr<int64_t> applied =
        CountSeen(report_.store, stream.unique_ids);
    if (!applied.ok()) return applied.status();
    report_.applied = *applied;
    absl::StatusOr<std::unique_ptr<Engine>> engine =
        Engine::Open(report_.store, Options());
    if (!engine.ok()) return engine.status();
    absl::StatusOr<examples::BalanceCheck> check =
        examples::CheckBalances(**engine, stream.expected);
    if (!check.ok()) return check.status();
    report_.balances = *check;
    report_.passed = check->ok() && report_.applied == report_.unique_payments;
    return absl::OkStatus();
  }

  const BrokerDemoOptions& options_;
  const std::string self_;
  const BrokerDemoWorker variant_;
  std::ostream& progress_;
  std::optional<util::TempDir> scratch_;  // destroyed last: after the broker
  std::unique_ptr<DemoBroker> broker_;
  BrokerDemoReport report_;
};

}  // namespace

absl::Status ValidateBrokerDemoOptions(const BrokerDemoOptions& options) {
  const std::vector<std::string> names = DemoBroker::Names();
  if (std::find(names.begin(), names.end(), options.broker) == names.end()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--broker: '", options.broker, "' is not one of ",
                     absl::StrJoin(names, ", "), " (the brokers built)"));
  }
  if (options.port < 0 || options.port > 65535) {
    return absl::InvalidArgumentError("--port: must be in [0, 65535]");
  }
  if (options.messages < 10 || options.messages > kMaxBrokerDemoMessages) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--messages: must be in [10, ", kMaxBrokerDemoMessages, "]"));
  }
  if (options.duplicate_every < 0) {
    return absl::InvalidArgumentError("--duplicate_every: must be >= 0");
  }
  if (options.batch < 1 || options.batch > 500) {
    return absl::InvalidArgumentError("--batch: must be in [1, 500]");
  }
  if (options.idle_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("--idle_timeout: must be > 0");
  }
  return absl::OkStatus();
}

absl::StatusOr<BrokerDemoReport> RunBrokerDemo(const BrokerDemoOptions& options,
                                               const std::string& self,
                                               const BrokerDemoWorker& variant,
                                               std::ostream& progress) {
  if (absl::Status s = ValidateBrokerDemoOptions(options); !s.ok()) return s;
  return BrokerDemo(options, self, variant, progress).Run();
}

void PrintBrokerDemoReport(const BrokerDemoReport& r, bool json,
                           std::ostream& out) {
  if (json) {
    util::JsonWriter j;
    j.BeginObject();
    j.Field("broker", r.broker);
    j.Field("server", r.server);
    j.Field("source", r.source);
    j.Field("produced", r.produced);
    j.Field("unique_payments", r.unique_payments);
    j.Field("producer_duplicates", r.producer_duplicates);
    j.Field("applied_before_kill", r.applied_before_kill);
    j.Key("takeover");
    j.BeginObject();
    j.Field("received", r.received);
    j.Field("processed", r.processed);
    j.Field("duplicates", r.duplicates);
    j.Field("redelivered", r.redelivered);
    j.Field("acked", r.acked);
    j.Field("batches", r.batches);
    j.EndObject();
    j.Field("applied", r.applied);
    WriteBalanceCheck(j, "balances", r.balances);
    j.Field("seconds", r.seconds);
    j.Field("passed", r.passed);
    j.EndObject();
    out << j.str() << "\n";
    return;
  }
  out << absl::StrFormat(
      "idem broker demo: a ledger consumer on %s (%s), source %s\n"
      "  stream: %d messages, %d unique payments, %d published twice\n"
      "  consumer 1 (a separate process): killed with SIGKILL after applying "
      "%d payments\n"
      "  consumer 2 (same store): received %d, processed %d, duplicates %d, "
      "redelivered by the broker %d, acked %d, in %d batches\n"
      "  check: %d of %d payments applied; %s\n%s\n",
      r.broker, r.server, r.source, r.produced, r.unique_payments,
      r.producer_duplicates, r.applied_before_kill, r.received, r.processed,
      r.duplicates, r.redelivered, r.acked, r.batches, r.applied,
      r.unique_payments, DescribeBalanceCheck(r.balances),
      r.passed ? "PASS" : "FAIL");
}

int RunBrokerDemoTool(const BrokerDemoOptions& options, const std::string& self,
                      const BrokerDemoWorker& variant, bool json,
                      std::ostream& out, std::ostream& err) {
  if (absl::Status s = ValidateBrokerDemoOptions(options); !s.ok()) {
    return ReportUsageError(kTool, s.message(), err);
  }
  absl::StatusOr<BrokerDemoReport> report =
      RunBrokerDemo(options, self, variant, err);
  if (!report.ok()) {
    err << kTool << ": " << report.status() << "\n";
    if (absl::IsUnavailable(report.status())) return kExitBrokerUnavailable;
    return kExitFailure;
  }
  PrintBrokerDemoReport(*report, json, out);
  if (options.keep) {
    err << kTool << ": the scratch directory is kept at " << report->scratch
        << "\n";
  }
  return report->passed ? kExitOk : kExitFailure;
}

namespace {

// Creates `file` and waits for the SIGKILL that the demo sends.
[[noreturn]] void HoldUntilKilled(const std::string& file) {
  std::ofstream(file) << "holding\n";
  while (true) absl::SleepFor(absl::Seconds(1));
}

}  // namespace

int RunBrokerDemoWorker(const BrokerDemoOptions& options,
                        const BrokerDemoWorker& worker, std::ostream& err) {
  absl::StatusOr<std::unique_ptr<Engine>> engine =
      Engine::Open(worker.store, Options());
  if (!engine.ok()) {
    err << kTool << " worker: " << engine.status() << "\n";
    return kExitFailure;
  }
  DemoEndpoint endpoint;
  endpoint.host = options.host;
  endpoint.port = options.port;
  endpoint.source = options.source;
  absl::StatusOr<std::unique_ptr<DemoBroker>> broker =
      DemoBroker::Create(options.broker, endpoint);
  if (!broker.ok()) {
    err << kTool << " worker: " << broker.status() << "\n";
    return kExitFailure;
  }
  brokers::LoopHooks hooks;
  hooks.ack_on_receive = worker.ack_on_receive;
  absl::StatusOr<std::unique_ptr<DemoConsumer>> consumer =
      (*broker)->Consume(engine->get(), "crashed", options.batch, hooks);
  if (!consumer.ok()) {
    err << kTool << " worker: " << consumer.status() << "\n";
    return kExitFailure;
  }
  int64_t calls = 0;
  absl::Status run = (*consumer)->Run(
      [&worker, &calls](const brokers::Delivery& delivery, Txn& txn) {
        absl::SleepFor(worker.pause);
        if (++calls == worker.hold_at) HoldUntilKilled(worker.hold_file);
        return ApplyPayment(delivery, txn);
      });
  err << kTool << " worker: the consumer stopped: " << run << "\n";
  return kExitFailure;
}

}  // namespace idem::cli
