#include "cli/kafka_failover_demo.h"

#include <signal.h>

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/types/span.h"
#include "cli/exit_codes.h"
#include "cli/kafka_demo_worker.h"
#include "idem/engine.h"
#include "idem/kafka/consumer.h"
#include "idem/kafka/producer.h"
#include "idem/partition_state.h"
#include "kafka/changelog_format.h"
#include "util/json_writer.h"
#include "util/temp_dir.h"

namespace idem::cli {
namespace {

std::string ChangelogTopic(const std::string& topic) {
  return topic + ".changelog";
}
std::string GroupOf(const std::string& topic) { return topic + "-failover"; }

// Both members' stores: partition-scoped, as changelog mode needs.
Options MemberStoreOptions() {
  Options options;
  options.dedupe_scope = DedupeScope::kPartition;
  return options;
}

// The handler both members run: the payment applied to its account's balance
// under the record's partition.
absl::Status ApplyInPartition(const kafka::Record& record, Txn& txn) {
  PartitionTxn partition(txn, record.topic, record.partition);
  return examples::ApplyPayment(record.value, partition);
}

std::string DescribeRestore(const kafka::RestoreReport& r) {
  if (!r.restored) {
    return absl::StrCat("partition ", r.partition,
                        ": store already current, nothing restored");
  }
  return absl::StrCat(
      "partition ", r.partition, ": restored from ",
      r.from_standby ? "its standby copy and the changelog's tail, "
                     : "the changelog, ",
      r.records_read, " records (", r.bytes_read, " bytes) read, ",
      r.state_entries, " state entries, ", r.dedupe_records,
      " dedupe records, ", r.orphans, " orphans, in ",
      absl::FormatDuration(absl::Trunc(r.duration, absl::Milliseconds(1))),
      "; resuming at offset ", r.offset.has_value() ? *r.offset + 1 : 0);
}

class Failover {
 public:
  Failover(const KafkaDemoOptions& options, const std::string& self,
           const FailoverDemoVariant& variant, std::ostream& progress)
      : options_(options),
        self_(self),
        variant_(variant),
        progress_(progress) {}

  absl::StatusOr<FailoverDemoReport> Run() {
    const absl::Time start = absl::Now();
    if (absl::Status s = SetUp(); !s.ok()) return s;
    const PaymentStream stream =
        MakePaymentStream(options_, report_.topic, PaymentKeys::kByAccount);
    report_.unique_payments = stream.unique;
    report_.injected_duplicates = stream.duplicates;
    progress_ << "producing " << stream.records.size() << " payments to "
              << report_.topic << " (" << options_.partitions
              << " partitions, keyed by account; " << stream.duplicates
              << " re-published)\n";
    if (absl::Status s = bed_.producer->Produce(stream.records); !s.ok()) {
      return s;
    }
    const int64_t produced = static_cast<int64_t>(stream.records.size());

    if (absl::Status s = MemberAUntilKilled(produced); !s.ok()) return s;
    absl::StatusOr<kafka::OutgoingRecord> late = LateDuplicate(stream);
    if (!late.ok()) return late.status();
    if (absl::Status s = MemberB(stream, produced, *late); !s.ok()) return s;
    report_.seconds = absl::ToDoubleSeconds(absl::Now() - start);
    report_.passed = report_.balances.ok() && report_.restored_partitions > 0 &&
                     report_.late_duplicate_caught;
    return report_;
  }

 private:
  absl::Status SetUp() {
    report_.topic =
        options_.topic.empty()
            ? absl::StrCat("idem-failover-", absl::ToUnixSeconds(absl::Now()))
            : options_.topic;
    report_.changelog_topic = ChangelogTopic(report_.topic);
    report_.partitions = options_.partitions;
    // The mock cluster has no admin API: the changelog topics exist
    // beforehand (a real cluster's are created by the consumer).
    absl::StatusOr<DemoBed> bed =
        SetUpDemoBed(options_,
                     {report_.topic, report_.changelog_topic,
                      kafka::DedupeTopicOf(report_.changelog_topic)},
                     "idem_kafka_failover_", progress_);
    if (!bed.ok()) return bed.status();
    bed_ = *std::move(bed);
    report_.brokers = bed_.label;
    report_.scratch = bed_.scratch->path();
    store_a_ = bed_.scratch->Sub("member_a");
    // Created here, so that reading its progress works from the start.
    return Engine::Open(store_a_, MemberStoreOptions()).status();
  }

  absl::Status MemberAUntilKilled(int64_t produced) {
    absl::StatusOr<WorkerProcess> a = WorkerProcess::Start(
        "member A", {self_, "--failover_member", "--brokers=" + bed_.brokers,
                     "--topic=" + report_.topic, "--store=" + store_a_,
                     absl::StrCat("--batch=", options_.batch)});
    if (!a.ok()) return a.status();
    progress_ << "member A: started (a separate process, store " << store_a_
              << ")\n";
    absl::StatusOr<WorkerProgress> third = WaitForWorker(
        *a, store_a_, report_.topic, options_.partitions, options_.idle_timeout,
        "waiting to kill it",
        [&](const WorkerProgress& p) { return p.committed >= produced / 3; },
        progress_);
    if (!third.ok()) return third.status();
    if (absl::Status s = a->Stop(SIGKILL); !s.ok()) return s;
    // Nothing writes the store now.
    absl::StatusOr<WorkerProgress> at_kill =
        ReadWorkerProgress(store_a_, report_.topic, options_.partitions);
    if (!at_kill.ok()) return at_kill.status();
    report_.committed_at_kill = at_kill->committed;
    progress_ << "member A: killed (SIGKILL) after committing "
              << at_kill->committed << " of " << produced << " records, "
              << at_kill->outbox_pending
              << " outbox entries (changelog records among them) "
                 "unpublished\n";
    return absl::OkStatus();
  }

  // A copy of the first payment of a partition member A had committed (the
  // partition's offset 0: always an original, as a re-published record
  // goes where its original went).
  absl::StatusOr<kafka::OutgoingRecord> LateDuplicate(
      const PaymentStream& stream) {
    Options read_only;
    read_only.read_only = true;
    absl::StatusOr<std::unique_ptr<Engine>> a =
        Engine::Open(store_a_, read_only);
    if (!a.ok()) return a.status();
    for (int p = 0; p < options_.partitions; ++p) {
      absl::StatusOr<std::optional<int64_t>> offset =
          (*a)->CommittedOffset(report_.topic, p);
      if (!offset.ok()) return offset.status();
      if (!offset->has_value()) continue;
      for (const kafka::OutgoingRecord& record : stream.records) {
        if (record.partition == p) return record;
      }
    }
    return absl::InternalError("member A committed no record");
  }

  absl::Status MemberB(const PaymentStream& stream, int64_t produced,
                       const kafka::OutgoingRecord& late) {
    absl::StatusOr<std::unique_ptr<Engine>> engine =
        Engine::Open(bed_.scratch->Sub("member_b"), MemberStoreOptions());
    if (!engine.ok()) return engine.status();
    kafka::ConsumerOptions options = DemoMemberOptions(
        bed_.brokers, report_.topic, GroupOf(report_.topic), options_.batch);
    if (!variant_.member_b_without_changelog) {
      options.changelog_topic = report_.changelog_topic;
      options.on_restore = [this](const kafka::RestoreReport& r) {
        report_.restores.push_back(r);
        if (r.restored) ++report_.restored_partitions;
        progress_ << "member B: " << DescribeRestore(report_.restores.back())
                  << "\n";
      };
    }
    auto consumer = kafka::Consumer::Create(engine->get(), options);
    if (!consumer.ok()) return consumer.status();
    progress_ << "member B: joining group " << GroupOf(report_.topic)
              << " with an empty store"
              << (variant_.member_b_without_changelog
                      ? " and WITHOUT changelog mode (a deliberately broken "
                        "variant)"
                      : "")
              << "; it gets the partitions once member A's session ends\n";
    absl::Status caught_up = PollUntil(**consumer, **engine, produced);
    if (!caught_up.ok()) return caught_up;
    const kafka::ConsumerStats before = (*consumer)->stats();
    progress_ << "member B: consumed to the end (" << before.processed
              << " applied, " << before.duplicates
              << " duplicates suppressed); re-publishing "
              << late.headers[0].second << " (partition " << late.partition
              << "), which member A processed\n";
    if (absl::Status s = bed_.producer->Produce(absl::MakeConstSpan(&late, 1));
        !s.ok())
      return s;
    if (absl::Status s = PollUntil(**consumer, **engine, produced + 1);
        !s.ok()) {
      return s;
    }
    const kafka::ConsumerStats after = (*consumer)->stats();
    report_.late_duplicate_id = late.headers[0].second;
    report_.late_duplicate_partition = late.partition;
    report_.late_duplicate_caught = after.duplicates == before.duplicates + 1 &&
                                    after.processed == before.processed;
    progress_ << "member B: the re-published payment was "
              << (report_.late_duplicate_caught ? "suppressed as a duplicate"
                                                : "APPLIED AGAIN")
              << "\n";
    report_.member_b_records = after.records;
    report_.member_b_processed = after.processed;
    report_.member_b_duplicates = after.duplicates;
    if (absl::Status s = (*consumer)->Close(); !s.ok()) return s;
    absl::StatusOr<examples::BalanceCheck> check =
        examples::CheckPartitionBalances(**engine, report_.topic,
                                         options_.partitions, stream.expected);
    if (!check.ok()) return check.status();
    report_.balances = *check;
    return absl::OkStatus();
  }

  // Polls until `engine` has handled `records` records of the topic. Without
  // changelog mode a partition member A finished has no offset in `engine`:
  // there, 3 s without a record after some also ends it.
  absl::Status PollUntil(kafka::Consumer& consumer, Engine& engine,
                         int64_t records) {
    absl::Time last_record = absl::Now();
    bool some = false;
    while (true) {
      absl::StatusOr<kafka::BatchReport> batch =
          consumer.PollBatch(ApplyInPartition);
      if (!batch.ok()) return batch.status();
      const absl::Time now = absl::Now();
      if (batch->records > 0) {
        last_record = now;
        some = true;
      }
      absl::StatusOr<int64_t> handled =
          CommittedRecords(engine, report_.topic, options_.partitions);
      if (!handled.ok()) return handled.status();
      if (*handled >= records) return absl::OkStatus();
      if (variant_.member_b_without_changelog && some &&
          now - last_record > absl::Seconds(3)) {
        return absl::OkStatus();
      }
      if (now - last_record > options_.idle_timeout) {
        return absl::DeadlineExceededError(
            absl::StrCat("member B: no record for ",
                         absl::FormatDuration(options_.idle_timeout),
                         " after handling ", *handled, " of ", records));
      }
    }
  }

  const KafkaDemoOptions& options_;
  const std::string self_;
  const FailoverDemoVariant variant_;
  std::ostream& progress_;
  DemoBed bed_;
  std::string store_a_;
  FailoverDemoReport report_;
};

}  // namespace

absl::StatusOr<FailoverDemoReport> RunKafkaFailoverDemo(
    const KafkaDemoOptions& options, const std::string& self,
    const FailoverDemoVariant& variant, std::ostream& progress) {
  if (absl::Status s = ValidateTwoProcessDemoOptions(options, "both members'");
      !s.ok()) {
    return s;
  }
  return Failover(options, self, variant, progress).Run();
}

void PrintFailoverDemoReport(const FailoverDemoReport& report, bool json,
                             std::ostream& out) {
  if (json) {
    util::JsonWriter j;
    j.BeginObject();
    j.Field("brokers", report.brokers);
    j.Field("topic", report.topic);
    j.Field("changelog_topic", report.changelog_topic);
    j.Field("scratch", report.scratch);
    j.Field("partitions", report.partitions);
    j.Field("unique_payments", report.unique_payments);
    j.Field("injected_duplicates", report.injected_duplicates);
    j.Field("committed_at_kill", report.committed_at_kill);
    j.Key("restores");
    j.BeginArray();
    for (const kafka::RestoreReport& r : report.restores) {
      j.BeginObject();
      j.Field("partition", r.partition);
      j.Field("restored", r.restored);
      j.Field("from_standby", r.from_standby);
      j.Field("offset", r.offset);
      j.Field("records_read", r.records_read);
      j.Field("bytes_read", r.bytes_read);
      j.Field("state_entries", r.state_entries);
      j.Field("dedupe_records", r.dedupe_records);
      j.Field("orphans", r.orphans);
      j.Field("seconds", absl::ToDoubleSeconds(r.duration));
      j.EndObject();
    }
    j.EndArray();
    j.Field("restored_partitions", report.restored_partitions);
    j.Field("member_b_records", report.member_b_records);
    j.Field("member_b_processed", report.member_b_processed);
    j.Field("member_b_duplicates", report.member_b_duplicates);
    j.Field("late_duplicate_id", report.late_duplicate_id);
    j.Field("late_duplicate_partition", report.late_duplicate_partition);
    j.Field("late_duplicate_caught", report.late_duplicate_caught);
    WriteBalanceCheck(j, "balances", report.balances);
    j.Field("seconds", report.seconds);
    j.Field("passed", report.passed);
    j.EndObject();
    out << j.str() << "\n";
    return;
  }
  out << "failover " << report.topic << " (" << report.brokers << ", "
      << report.partitions << " partitions, changelog "
      << report.changelog_topic << "): " << report.unique_payments
      << " payments, " << report.injected_duplicates << " re-published\n"
      << "  member A killed after committing " << report.committed_at_kill
      << " records\n"
      << "  member B restored " << report.restored_partitions << " of "
      << report.partitions << " partitions from the changelog\n";
  for (const kafka::RestoreReport& r : report.restores) {
    out << "    " << DescribeRestore(r) << "\n";
  }
  out << "  member B: " << report.member_b_records << " records, "
      << report.member_b_processed << " applied, " << report.member_b_duplicates
      << " duplicates suppressed\n"
      << "  " << report.late_duplicate_id << " re-published after the kill: "
      << (report.late_duplicate_caught ? "suppressed as a duplicate"
                                       : "applied again")
      << "\n"
      << "  " << DescribeBalanceCheck(report.balances) << "\n"
      << (report.passed ? "PASSED" : "FAILED")
      << ": the partitions' state followed them to member B, every payment "
         "applied exactly once\n";
}

int RunKafkaFailoverDemoTool(const KafkaDemoOptions& options,
                             const std::string& self,
                             const FailoverDemoVariant& variant, bool json,
                             std::ostream& out, std::ostream& err) {
  return EndDemoTool(RunKafkaFailoverDemo(options, self, variant, err), options,
                     json, PrintFailoverDemoReport, out, err);
}

int RunFailoverMember(const KafkaDemoOptions& options, std::ostream& err) {
  absl::StatusOr<std::unique_ptr<Engine>> engine =
      Engine::Open(options.store, MemberStoreOptions());
  if (!engine.ok()) {
    err << "member A: " << engine.status() << "\n";
    return kExitFailure;
  }
  kafka::ConsumerOptions consumer_options = DemoMemberOptions(
      options.brokers, options.topic, GroupOf(options.topic), options.batch);
  consumer_options.changelog_topic = ChangelogTopic(options.topic);
  absl::StatusOr<std::unique_ptr<kafka::Consumer>> consumer =
      kafka::Consumer::Create(engine->get(), consumer_options);
  if (!consumer.ok()) {
    err << "member A: " << consumer.status() << "\n";
    return kExitFailure;
  }
  absl::Status status = (*consumer)->Run([](const kafka::Record& r, Txn& txn) {
    // Slow enough that the kill lands in mid-stream.
    absl::SleepFor(absl::Microseconds(200));
    return ApplyInPartition(r, txn);
  });
  // Only an error ends the member (the demo kills it).
  err << "member A: " << (status.ok() ? "stopped" : status.ToString()) << "\n";
  return kExitFailure;
}

}  // namespace idem::cli
