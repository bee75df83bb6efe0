#include "cli/kafka_demo_worker.h"

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

#include <optional>
#include <random>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "examples/ledger_stream.h"
#include "idem/engine.h"

extern char** environ;

namespace idem::cli {

PaymentStream MakePaymentStream(const KafkaDemoOptions& options,
                                const std::string& topic, PaymentKeys keys) {
  examples::LedgerStreamOptions payments;
  payments.seed = options.seed;
  payments.accounts = kWorkerDemoAccounts;
  payments.id_prefix = "pay";
  examples::LedgerStream ledger(payments);
  std::mt19937_64 rng(options.seed);  // which earlier record a duplicate is
  PaymentStream stream;
  for (int64_t i = 0; i < options.messages; ++i) {
    if (options.duplicate_every > 0 && i > 0 &&
        i % options.duplicate_every == 0) {
      stream.records.push_back(stream.records[rng() % stream.records.size()]);
      ++stream.duplicates;
      continue;
    }
    examples::LedgerMessage payment = ledger.Next();
    kafka::OutgoingRecord record;
    record.topic = topic;
    if (keys == PaymentKeys::kByAccount) {
      record.key = examples::AccountName(payment.payment.account);
      record.partition = payment.payment.account % options.partitions;
    } else {
      record.key = payment.id;
    }
    record.value = std::move(payment.payload);
    record.headers = {{"message-id", std::move(payment.id)}};
    stream.expected.Add(payment.payment);
    ++stream.unique;
    stream.records.push_back(std::move(record));
  }
  return stream;
}

absl::Status ValidateTwoProcessDemoOptions(const KafkaDemoOptions& options,
                                           std::string_view whose) {
  if (absl::Status s = ValidateKafkaDemoOptions(options); !s.ok()) return s;
  if (!options.store.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--store: this mode keeps ", std::string(whose),
        " stores in its scratch directory (use --keep to keep them)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<DemoBed> SetUpDemoBed(const KafkaDemoOptions& options,
                                     const std::vector<std::string>& topics,
                                     std::string_view scratch_prefix,
                                     std::ostream& progress) {
  DemoBed bed;
  if (options.brokers.empty()) {
    absl::StatusOr<std::unique_ptr<kafka::MockCluster>> mock =
        kafka::MockCluster::Start(1);
    if (!mock.ok()) return mock.status();
    bed.mock = *std::move(mock);
    for (const std::string& topic : topics) {
      if (absl::Status s = bed.mock->CreateTopic(topic, options.partitions);
          !s.ok()) {
        return s;
      }
    }
    bed.brokers = bed.mock->bootstrap_servers();
    bed.label = "mock";
    progress << "started a mock Kafka cluster at " << bed.brokers << "\n";
  } else {
    bed.brokers = options.brokers;
    bed.label = options.brokers;
  }
  absl::StatusOr<std::unique_ptr<kafka::Producer>> producer =
      kafka::Producer::Create(bed.brokers);
  if (!producer.ok()) return producer.status();
  bed.producer = *std::move(producer);
  absl::StatusOr<util::TempDir> dir = util::TempDir::Create(scratch_prefix);
  if (!dir.ok()) return dir.status();
  if (options.keep) dir->Keep();
  bed.scratch = *std::move(dir);
  return bed;
}

kafka::ConsumerOptions DemoMemberOptions(const std::string& brokers,
                                         const std::string& topic,
                                         const std::string& group, int batch) {
  kafka::ConsumerOptions options;
  options.brokers = brokers;
  options.group_id = group;
  options.topics = {topic};
  options.max_batch = batch;
  options.retry_backoff = absl::Milliseconds(10);
  // A restarted or surviving member gets a killed member's partitions
  // quickly: the killed member's session ends after 6 s.
  options.kafka_config = {{"log_level", "3"},
                          {"session.timeout.ms", "6000"},
                          {"heartbeat.interval.ms", "500"}};
  return options;
}

absl::StatusOr<int64_t> CommittedRecords(Engine& engine,
                                         const std::string& topic,
                                         int partitions) {
  int64_t committed = 0;
  for (int p = 0; p < partitions; ++p) {
    absl::StatusOr<std::optional<int64_t>> offset =
        engine.CommittedOffset(topic, p);
    if (!offset.ok()) return offset.status();
    if (offset->has_value()) committed += **offset + 1;
  }
  return committed;
}

absl::StatusOr<WorkerProgress> ReadWorkerProgress(const std::string& store,
                                                  const std::string& topic,
                                                  int partitions) {
  Options read_only;
  read_only.read_only = true;
  absl::StatusOr<std::unique_ptr<Engine>> engine =
      Engine::Open(store, read_only);
  if (!engine.ok()) return engine.status();
  WorkerProgress progress;
  absl::StatusOr<int64_t> committed =
      CommittedRecords(**engine, topic, partitions);
  if (!committed.ok()) return committed.status();
  progress.committed = *committed;
  absl::StatusOr<Stats> stats = (*engine)->GetStats();
  if (!stats.ok()) return stats.status();
  progress.outbox_pending = stats->outbox_pending;
  return progress;
}

absl::StatusOr<WorkerProcess> WorkerProcess::Start(
    std::string name, std::vector<std::string> args) {
  std::vector<char*> argv;
  for (std::string& arg : args) argv.push_back(arg.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  if (int e = posix_spawn(&pid, args[0].c_str(), nullptr, nullptr, argv.data(),
                          environ);
      e != 0) {
    return absl::UnavailableError(
        absl::StrCat("starting ", name, " (", args[0], "): error ", e));
  }
  return WorkerProcess(std::move(name), pid);
}

WorkerProcess::WorkerProcess(WorkerProcess&& other) noexcept
    : name_(std::move(other.name_)), pid_(std::exchange(other.pid_, 0)) {}

WorkerProcess::~WorkerProcess() {
  if (pid_ > 0) Stop(SIGKILL).IgnoreError();  // cleaning up after an error
}

bool WorkerProcess::Exited() {
  int status = 0;
  if (pid_ > 0 && waitpid(pid_, &status, WNOHANG) == pid_) {
    pid_ = 0;
    return true;
  }
  return false;
}

absl::Status WorkerProcess::Stop(int signal) {
  if (pid_ <= 0) return absl::InternalError(name_ + " already ended");
  kill(pid_, signal);
  int status = 0;
  const pid_t pid = std::exchange(pid_, 0);
  if (waitpid(pid, &status, 0) != pid) {
    return absl::InternalError("waiting for " + name_ + " failed");
  }
  const bool as_asked = signal == SIGKILL
                            ? WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL
                            : WIFEXITED(status) && WEXITSTATUS(status) == 0;
  if (!as_asked) {
    return absl::InternalError(absl::StrCat(name_, " ended with status ",
                                            status, " (see its stderr above)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<WorkerProgress> WaitForWorker(
    WorkerProcess& process, const std::string& store, const std::string& topic,
    int partitions, absl::Duration idle_timeout, const std::string& what,
    const std::function<bool(const WorkerProgress&)>& done,
    std::ostream& progress) {
  WorkerProgress last;
  absl::Status last_error;
  absl::Time last_change = absl::Now();
  absl::Time last_report = last_change;
  while (true) {
    // A read-only open can race with the worker's flushes and compactions
    // (a file its MANIFEST lists is gone): such a read is retried, and only
    // reported if no progress is seen for idle_timeout.
    absl::StatusOr<WorkerProgress> now =
        ReadWorkerProgress(store, topic, partitions);
    if (!now.ok()) {
      last_error = now.status();
      now = last;
    } else if (done(*now)) {
      return *now;
    }
    if (now->committed != last.committed ||
        now->outbox_pending != last.outbox_pending) {
      last_change = absl::Now();
    }
    last = *now;
    if (absl::Now() - last_change > idle_timeout) {
      return absl::DeadlineExceededError(absl::StrCat(
          process.name(), " made no progress for ",
          absl::FormatDuration(idle_timeout), " while ", what,
          last_error.ok() ? "" : "; reading its store last failed with ",
          last_error.ok() ? "" : last_error.ToString()));
    }
    if (process.Exited()) {
      return absl::InternalError(process.name() +
                                 " exited by itself (see above)");
    }
    if (absl::Now() - last_report > absl::Seconds(2)) {
      last_report = absl::Now();
      progress << process.name() << ": " << now->committed
               << " records committed, " << now->outbox_pending
               << " outbox entries pending\n";
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
}

}  // namespace idem::cli
