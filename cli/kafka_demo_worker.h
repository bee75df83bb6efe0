// What idem-kafka-demo's modes share. All of them: what they run against
// (a Kafka cluster, an in-process mock one unless brokers are given, a
// producer and a scratch directory: DemoBed). The two-process modes
// (--pipeline, --failover): their options' check, the payment stream they
// produce, the consumer options of their members, a worker (a process of
// this same binary, started with a hidden flag, whose progress is read from
// its store and which is stopped with SIGKILL, the crash, or SIGTERM, the
// end), and how they end as a tool (a balance check's report is
// cli/balance_report.h's).
//
// Thread-compatible.

#ifndef IDEM_CLI_KAFKA_DEMO_WORKER_H_
#define IDEM_CLI_KAFKA_DEMO_WORKER_H_

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "cli/balance_report.h"
#include "cli/exit_codes.h"
#include "cli/kafka_demo.h"
#include "examples/ledger.h"
#include "idem/engine.h"
#include "idem/kafka/consumer.h"
#include "idem/kafka/mock_cluster.h"
#include "idem/kafka/producer.h"
#include "util/json_writer.h"
#include "util/temp_dir.h"

namespace idem::cli {

// Accounts of the two-process modes' payments.
inline constexpr int kWorkerDemoAccounts = 50;

// The ledger's payments (examples/ledger_stream.h), options.messages records
// with every options.duplicate_every-th one re-publishing an earlier record
// (same message-id, key and partition).
struct PaymentStream {
  std::vector<kafka::OutgoingRecord> records;
  examples::ExpectedBalances expected{kWorkerDemoAccounts};
  int64_t unique = 0;
  int64_t duplicates = 0;
};

// How the payments are keyed and partitioned.
enum class PaymentKeys {
  // Keyed by message-id; librdkafka's partitioner chooses the partition.
  kById,
  // Keyed by account name, on partition account % partitions: every payment
  // of an account is on one partition (what per-partition state needs).
  kByAccount,
};

// The stream for `topic`. REQUIRES: `options` valid
// (ValidateKafkaDemoOptions).
PaymentStream MakePaymentStream(const KafkaDemoOptions& options,
                                const std::string& topic, PaymentKeys keys);

// ValidateKafkaDemoOptions, and kInvalidArgument for a `store`: the
// two-process modes keep `whose` ("both stages'") stores in their scratch
// directory.
absl::Status ValidateTwoProcessDemoOptions(const KafkaDemoOptions& options,
                                           std::string_view whose);

// What a mode runs against and works in.
struct DemoBed {
  // Declared first, destroyed last: after every client of it.
  std::unique_ptr<kafka::MockCluster> mock;  // null with real brokers
  std::string brokers;                       // bootstrap servers
  std::string label;                         // "mock" or the brokers
  std::unique_ptr<kafka::Producer> producer;
  // A new directory under $TMPDIR (or /tmp), removed with the bed unless
  // options.keep.
  std::optional<util::TempDir> scratch;
};

// A new mock cluster holding `topics` (each with options.partitions
// partitions) when options.brokers is empty, else options.brokers (whose
// topics are left alone); a producer on it; and a scratch directory named
// `scratch_prefix` and six random characters. Names the mock cluster on
// `progress`. Errors: the cluster's, the producer's, the directory's.
absl::StatusOr<DemoBed> SetUpDemoBed(const KafkaDemoOptions& options,
                                     const std::vector<std::string>& topics,
                                     std::string_view scratch_prefix,
                                     std::ostream& progress);

// A member's consumer options: `topic` as `group`, at most `batch` records a
// batch, and a session short enough (6 s) that a killed member's partitions
// move on soon.
kafka::ConsumerOptions DemoMemberOptions(const std::string& brokers,
                                         const std::string& topic,
                                         const std::string& group, int batch);

// Records handled in `engine` on `topic` partitions [0, partitions): each
// partition's committed offset + 1, summed. The engine's errors.
absl::StatusOr<int64_t> CommittedRecords(Engine& engine,
                                         const std::string& topic,
                                         int partitions);

// What a worker's store shows, read through a read-only engine (the worker
// may have it open): records committed on `topic` partitions [0,
// partitions) (each partition's committed offset + 1, summed) and the
// outbox entries not yet published.
struct WorkerProgress {
  int64_t committed = 0;
  uint64_t outbox_pending = 0;
};
absl::StatusOr<WorkerProgress> ReadWorkerProgress(const std::string& store,
                                                  const std::string& topic,
                                                  int partitions);

// A process of this binary, started with posix_spawn; killed (SIGKILL) if
// still running when destroyed.
class WorkerProcess {
 public:
  // Starts `args[0]` with `args`; `name` ("stage one", "member A") names it
  // in errors. kUnavailable if it cannot be started.
  static absl::StatusOr<WorkerProcess> Start(std::string name,
                                             std::vector<std::string> args);

  WorkerProcess(WorkerProcess&& other) noexcept;
  WorkerProcess& operator=(WorkerProcess&&) = delete;
  ~WorkerProcess();

  const std::string& name() const { return name_; }

  // Whether the process has ended by itself.
  bool Exited();

  // Sends `signal` and waits for the process; kInternal unless it ended as
  // `signal` asks (killed by SIGKILL, or exit 0 after SIGTERM) or had ended
  // already.
  absl::Status Stop(int signal);

 private:
  WorkerProcess(std::string name, pid_t pid)
      : name_(std::move(name)), pid_(pid) {}
  std::string name_;
  pid_t pid_ = 0;
};

// Polls ReadWorkerProgress(store, topic, partitions) every 20 ms until
// `done` holds (returns that progress), writing a progress line every 2 s.
// kDeadlineExceeded if the progress did not change for `idle_timeout`
// (`what` says what was awaited); kInternal if the process ended by itself.
// A failed read (a read-only open can race with the worker's flushes) is
// retried.
absl::StatusOr<WorkerProgress> WaitForWorker(
    WorkerProcess& process, const std::string& store, const std::string& topic,
    int partitions, absl::Duration idle_timeout, const std::string& what,
    const std::function<bool(const WorkerProgress&)>& done,
    std::ostream& progress);

// How a mode's Run*Tool ends: the error on `err` (exit 2 for
// kInvalidArgument, else 1), or `print(*report, json, out)`, the kept
// scratch directory named on `err` when options.keep, and exit 0 if
// report->passed, else 1.
template <typename Report>
int EndDemoTool(const absl::StatusOr<Report>& report,
                const KafkaDemoOptions& options, bool json,
                void (*print)(const Report&, bool, std::ostream&),
                std::ostream& out, std::ostream& err) {
  if (!report.ok()) {
    err << "idem-kafka-demo: " << report.status() << "\n";
    return absl::IsInvalidArgument(report.status()) ? kExitUsage : kExitFailure;
  }
  print(*report, json, out);
  if (options.keep) {
    err << "idem-kafka-demo: the scratch directory is kept at "
        << report->scratch << "\n";
  }
  return report->passed ? kExitOk : kExitFailure;
}

}  // namespace idem::cli

#endif  // IDEM_CLI_KAFKA_DEMO_WORKER_H_
