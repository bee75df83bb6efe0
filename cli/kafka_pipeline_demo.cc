#include "cli/kafka_pipeline_demo.h"

#include <signal.h>

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "cli/exit_codes.h"
#include "cli/kafka_demo_worker.h"
#include "idem/engine.h"
#include "idem/kafka/consumer.h"
#include "idem/kafka/producer.h"
#include "util/json_writer.h"
#include "util/temp_dir.h"

namespace idem::cli {
namespace {

std::string LedgerTopic(const std::string& topic) { return topic + ".ledger"; }

class Pipeline {
 public:
  Pipeline(const KafkaDemoOptions& options, const std::string& self,
           std::ostream& progress)
      : options_(options), self_(self), progress_(progress) {}

  absl::StatusOr<PipelineDemoReport> Run() {
    const absl::Time start = absl::Now();
    if (absl::Status s = SetUp(); !s.ok()) return s;
    const PaymentStream stream =
        MakePaymentStream(options_, report_.topic, PaymentKeys::kById);
    report_.unique_payments = stream.unique;
    report_.injected_duplicates = stream.duplicates;
    progress_ << "producing " << stream.records.size() << " payments to "
              << report_.topic << " (" << stream.duplicates
              << " re-published)\n";
    if (absl::Status s = bed_.producer->Produce(stream.records); !s.ok())
      return s;
    const int64_t produced = static_cast<int64_t>(stream.records.size());

    if (absl::Status s = StageOneWithAKill(produced); !s.ok()) return s;
    absl::StatusOr<std::unique_ptr<Engine>> stage1 =
        Engine::Open(stage1_store_, Options());
    if (!stage1.ok()) return stage1.status();
    absl::StatusOr<examples::BalanceCheck> check1 =
        examples::CheckBalances(**stage1, stream.expected);
    if (!check1.ok()) return check1.status();
    report_.stage1 = *check1;
    stage1->reset();

    if (absl::Status s = StageTwo(stream); !s.ok()) return s;
    report_.seconds = absl::ToDoubleSeconds(absl::Now() - start);
    report_.passed = report_.stage1.ok() && report_.stage2.ok();
    return report_;
  }

 private:
  absl::Status SetUp() {
    report_.topic =
        options_.topic.empty()
            ? absl::StrCat("idem-pipeline-", absl::ToUnixSeconds(absl::Now()))
            : options_.topic;
    report_.ledger_topic = LedgerTopic(report_.topic);
    absl::StatusOr<DemoBed> bed =
        SetUpDemoBed(options_, {report_.topic, report_.ledger_topic},
                     "idem_kafka_pipeline_", progress_);
    if (!bed.ok()) return bed.status();
    bed_ = *std::move(bed);
    report_.brokers = bed_.label;
    report_.scratch = bed_.scratch->path();
    stage1_store_ = bed_.scratch->Sub("stage1");
    // Created here, so that reading its progress works from the start.
    return Engine::Open(stage1_store_, Options()).status();
  }

  absl::StatusOr<WorkerProcess> StartStageOne() {
    return WorkerProcess::Start(
        "stage one", {self_, "--pipeline_worker", "--brokers=" + bed_.brokers,
                      "--topic=" + report_.topic, "--store=" + stage1_store_,
                      absl::StrCat("--batch=", options_.batch)});
  }

  absl::StatusOr<WorkerProgress> WaitForStageOne(
      WorkerProcess& process, const std::string& what,
      const std::function<bool(const WorkerProgress&)>& done) {
    return WaitForWorker(process, stage1_store_, report_.topic,
                         options_.partitions, options_.idle_timeout, what, done,
                         progress_);
  }

  absl::Status StageOneWithAKill(int64_t produced) {
    absl::StatusOr<WorkerProcess> first = StartStageOne();
    if (!first.ok()) return first.status();
    progress_ << "stage one: started (a separate process)\n";
    absl::StatusOr<WorkerProgress> third = WaitForStageOne(
        *first, "waiting to kill it",
        [&](const WorkerProgress& p) { return p.committed >= produced / 3; });
    if (!third.ok()) return third.status();
    if (absl::Status s = first->Stop(SIGKILL); !s.ok()) return s;
    // Nothing writes the store now.
    absl::StatusOr<WorkerProgress> at_kill =
        ReadWorkerProgress(stage1_store_, report_.topic, options_.partitions);
    if (!at_kill.ok()) return at_kill.status();
    report_.committed_at_kill = at_kill->committed;
    progress_ << "stage one: killed (SIGKILL) after committing "
              << at_kill->committed << " of " << produced << " records, "
              << at_kill->outbox_pending << " outbox entries unpublished\n";

    absl::StatusOr<WorkerProcess> second = StartStageOne();
    if (!second.ok()) return second.status();
    progress_ << "stage one: restarted\n";
    absl::StatusOr<WorkerProgress> end = WaitForStageOne(
        *second, "finishing the stream", [&](const WorkerProgress& p) {
          return p.committed >= produced && p.outbox_pending == 0;
        });
    if (!end.ok()) return end.status();
    if (absl::Status s = second->Stop(SIGTERM); !s.ok()) return s;
    progress_ << "stage one: done, every record committed and every ledger "
                 "entry published\n";
    return absl::OkStatus();
  }

  absl::Status StageTwo(const PaymentStream& stream) {
    absl::StatusOr<std::unique_ptr<Engine>> engine =
        Engine::Open(bed_.scratch->Sub("stage2"), Options());
    if (!engine.ok()) return engine.status();
    auto consumer = kafka::Consumer::Create(
        engine->get(),
        DemoMemberOptions(bed_.brokers, report_.ledger_topic,
                          report_.topic + "-stage2", options_.batch));
    if (!consumer.ok()) return consumer.status();
    progress_ << "stage two: consuming " << report_.ledger_topic << "\n";
    absl::Time last_record = absl::Now();
    // Every entry was published before stage one stopped; stage two is done
    // once it has applied one per payment and then sees nothing more for a
    // moment (re-published copies arrive with the originals).
    while (true) {
      absl::StatusOr<kafka::BatchReport> batch =
          (*consumer)->PollBatch([](const kafka::Record& r, Txn& txn) {
            return examples::ApplyPayment(r.value, txn);
          });
      if (!batch.ok()) return batch.status();
      const absl::Time now = absl::Now();
      if (batch->records > 0) last_record = now;
      const kafka::ConsumerStats stats = (*consumer)->stats();
      if (stats.processed >= stream.unique &&
          now - last_record > absl::Seconds(1)) {
        break;
      }
      if (now - last_record > options_.idle_timeout) {
        return absl::DeadlineExceededError(
            absl::StrCat("stage two: no record for ",
                         absl::FormatDuration(options_.idle_timeout), " after ",
                         stats.processed, " of ", stream.unique));
      }
    }
    const kafka::ConsumerStats stats = (*consumer)->stats();
    report_.stage2_records = stats.records;
    report_.stage2_processed = stats.processed;
    report_.stage2_duplicates = stats.duplicates;
    if (absl::Status s = (*consumer)->Close(); !s.ok()) return s;
    absl::StatusOr<examples::BalanceCheck> check =
        examples::CheckBalances(**engine, stream.expected);
    if (!check.ok()) return check.status();
    report_.stage2 = *check;
    progress_ << "stage two: done, " << stats.processed << " entries applied, "
              << stats.duplicates << " re-published copies suppressed\n";
    return absl::OkStatus();
  }

  const KafkaDemoOptions& options_;
  const std::string self_;
  std::ostream& progress_;
  DemoBed bed_;
  std::string stage1_store_;
  PipelineDemoReport report_;
};

// Stage one's consumer, for the SIGTERM handler (Consumer::Stop is safe
// from a signal handler).
std::atomic<kafka::Consumer*> stage1_consumer{nullptr};

void StopStageOne(int) {
  if (kafka::Consumer* consumer = stage1_consumer.load()) consumer->Stop();
}

}  // namespace

absl::StatusOr<PipelineDemoReport> RunKafkaPipelineDemo(
    const KafkaDemoOptions& options, const std::string& self,
    std::ostream& progress) {
  if (absl::Status s = ValidateTwoProcessDemoOptions(options, "both stages'");
      !s.ok()) {
    return s;
  }
  return Pipeline(options, self, progress).Run();
}

void PrintPipelineDemoReport(const PipelineDemoReport& report, bool json,
                             std::ostream& out) {
  if (json) {
    util::JsonWriter j;
    j.BeginObject();
    j.Field("brokers", report.brokers);
    j.Field("topic", report.topic);
    j.Field("ledger_topic", report.ledger_topic);
    j.Field("scratch", report.scratch);
    j.Field("unique_payments", report.unique_payments);
    j.Field("injected_duplicates", report.injected_duplicates);
    j.Field("committed_at_kill", report.committed_at_kill);
    j.Field("stage2_records", report.stage2_records);
    j.Field("stage2_processed", report.stage2_processed);
    j.Field("stage2_duplicates", report.stage2_duplicates);
    WriteBalanceCheck(j, "stage1", report.stage1);
    WriteBalanceCheck(j, "stage2", report.stage2);
    j.Field("seconds", report.seconds);
    j.Field("passed", report.passed);
    j.EndObject();
    out << j.str() << "\n";
    return;
  }
  out << "pipeline " << report.topic << " -> " << report.ledger_topic << " ("
      << report.brokers << "): " << report.unique_payments << " payments, "
      << report.injected_duplicates << " re-published\n"
      << "  stage one killed after committing " << report.committed_at_kill
      << " records, then restarted\n"
      << "  stage two: " << report.stage2_records << " ledger records, "
      << report.stage2_processed << " applied, " << report.stage2_duplicates
      << " duplicates suppressed\n";
  out << "  stage one: " << DescribeBalanceCheck(report.stage1) << "\n"
      << "  stage two: " << DescribeBalanceCheck(report.stage2) << "\n";
  out << (report.passed ? "PASSED" : "FAILED")
      << ": every payment applied exactly once in both stages\n";
}

int RunKafkaPipelineDemoTool(const KafkaDemoOptions& options,
                             const std::string& self, bool json,
                             std::ostream& out, std::ostream& err) {
  return EndDemoTool(RunKafkaPipelineDemo(options, self, err), options, json,
                     PrintPipelineDemoReport, out, err);
}

int RunPipelineStage1(const KafkaDemoOptions& options, std::ostream& err) {
  absl::StatusOr<std::unique_ptr<Engine>> engine =
      Engine::Open(options.store, Options());
  if (!engine.ok()) {
    err << "stage one: " << engine.status() << "\n";
    return kExitFailure;
  }
  const std::string ledger_topic = LedgerTopic(options.topic);
  absl::StatusOr<std::unique_ptr<kafka::Consumer>> consumer =
      kafka::Consumer::Create(
          engine->get(),
          DemoMemberOptions(options.brokers, options.topic,
                            options.topic + "-stage1", options.batch));
  if (!consumer.ok()) {
    err << "stage one: " << consumer.status() << "\n";
    return kExitFailure;
  }
  stage1_consumer.store(consumer->get());
  signal(SIGTERM, StopStageOne);
  absl::Status status = (*consumer)->Run([&](const kafka::Record& r, Txn& txn) {
    absl::StatusOr<examples::Payment> payment = examples::ParsePayment(r.value);
    if (!payment.ok()) return payment.status();
    if (absl::Status s = examples::ApplyPayment(r.value, txn); !s.ok()) {
      return s;
    }
    // The ledger entry: the payment itself, keyed by its account, committed
    // with the balance it changed.
    txn.Emit(ledger_topic, examples::AccountName(payment->account), r.value);
    // Slow enough that the pipeline's kill lands in mid-stream.
    absl::SleepFor(absl::Microseconds(200));
    return absl::OkStatus();
  });
  stage1_consumer.store(nullptr);
  if (absl::Status s = (*consumer)->Close(); status.ok()) status = s;
  if (!status.ok()) {
    err << "stage one: " << status << "\n";
    return kExitFailure;
  }
  return kExitOk;
}

}  // namespace idem::cli
