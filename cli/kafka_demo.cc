#include "cli/kafka_demo.h"

#include <algorithm>
#include <cstdint>
#include <exception>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "cli/kafka_demo_worker.h"
#include "cli/tool_usage.h"
#include "examples/ledger.h"
#include "examples/ledger_stream.h"
#include "idem/engine.h"
#include "idem/kafka/consumer.h"
#include "idem/kafka/producer.h"
#include "idem/partition_state.h"
#include "util/json_writer.h"
#include "util/temp_dir.h"

#if IDEM_HAVE_PROMETHEUS
#include "idem/prometheus/collector.h"
#include "idem/prometheus/consumer_collector.h"
#include "prometheus/exposer.h"
#include "prometheus/registry.h"
#endif

namespace idem::cli {
namespace {

using kafka::OutgoingRecord;

constexpr int kAccounts = 50;
constexpr int kMaxAttempts = 3;

std::string Str(std::string_view s) { return std::string(s); }

// The stream: the ledger's payments (examples/ledger_stream.h) keyed and
// identified by their message-id, some re-published, one poison record.
struct DemoStream {
  std::vector<OutgoingRecord> records;
  std::set<std::string> payment_ids;  // unique
  examples::ExpectedBalances expected{kAccounts};
  int64_t duplicates = 0;
  size_t poison_index = 0;
};

DemoStream MakeDemoStream(const KafkaDemoOptions& options,
                          const std::string& topic) {
  examples::LedgerStreamOptions payments;
  payments.seed = options.seed;
  payments.accounts = kAccounts;
  payments.id_prefix = "pay";
  examples::LedgerStream ledger(payments);
  // Which earlier record a duplicate re-publishes.
  std::mt19937_64 rng(options.seed);
  DemoStream stream;
  stream.poison_index = static_cast<size_t>(options.messages / 4);
  std::vector<size_t> originals;  // indexes of first publications
  for (int64_t i = 0; i < options.messages; ++i) {
    OutgoingRecord record;
    record.topic = topic;
    const bool duplicate = options.duplicate_every > 0 && i > 0 &&
                           i % options.duplicate_every == 0 &&
                           !originals.empty();
    if (static_cast<size_t>(i) == stream.poison_index) {
      record.key = absl::StrCat("poison-", options.seed);
      record.value = "not a payment";
    } else if (duplicate) {
      record = stream.records[originals[rng() % originals.size()]];
      ++stream.duplicates;
    } else {
      examples::LedgerMessage payment = ledger.Next();
      record.key = std::move(payment.id);
      record.value = std::move(payment.payload);
      stream.payment_ids.insert(record.key);
      stream.expected.Add(payment.payment);
      originals.push_back(static_cast<size_t>(i));
    }
    record.headers = {{"message-id", record.key}};
    stream.records.push_back(std::move(record));
  }
  return stream;
}

// The handler: the ledger's, on the record's partition's state (so the
// balances move with their partition), plus a count of the payment's
// applications for the check.
absl::Status ApplyPayment(const kafka::Record& record, Txn& txn) {
  PartitionTxn partition(txn, record.topic, record.partition);
  if (absl::Status s = examples::ApplyPayment(record.value, partition);
      !s.ok()) {
    return s;
  }
  const std::string applied = "applied/" + Str(record.id);
  absl::StatusOr<std::optional<std::string>> count = txn.Get(applied);
  if (!count.ok()) return count.status();
  int64_t times = 0;
  if (count->has_value() && !absl::SimpleAtoi(**count, &times)) {
    return absl::DataLossError(absl::StrCat("bad number under ", applied));
  }
  txn.Put(applied, absl::StrCat(times + 1));
  return absl::OkStatus();
}

#if IDEM_HAVE_PROMETHEUS
// --metrics_port: /metrics on 127.0.0.1 with the engine's and the running
// consumer's figures.
class DemoMetrics {
 public:
  static absl::StatusOr<std::unique_ptr<DemoMetrics>> Start(int port,
                                                            Engine* engine) {
    auto metrics = std::make_unique<DemoMetrics>();
    PrometheusCollectorOptions options;
    options.refresh_period = absl::Seconds(1);
    auto collector =
        PrometheusCollector::Create(engine, *metrics->registry_, options);
    if (!collector.ok()) return collector.status();
    metrics->engine_ = *std::move(collector);
    auto consumer = PrometheusConsumerCollector::Create(*metrics->registry_);
    if (!consumer.ok()) return consumer.status();
    metrics->consumer_ = *std::move(consumer);
    try {
      metrics->exposer_ = std::make_unique<prometheus::Exposer>(
          absl::StrCat("127.0.0.1:", port), /*num_threads=*/1);
    } catch (const std::exception& e) {
      return absl::UnavailableError(absl::StrCat(
          "--metrics_port: cannot listen on 127.0.0.1:", port, ": ", e.what()));
    }
    metrics->exposer_->RegisterCollectable(metrics->registry_);
    return metrics;
  }

  int port() const { return exposer_->GetListeningPorts().at(0); }
  void Update(const kafka::ConsumerStats& stats) { consumer_->Update(stats); }
  void UpdateEngine() { engine_->Update().IgnoreError(); }  // best effort

 private:
  std::shared_ptr<prometheus::Registry> registry_ =
      std::make_shared<prometheus::Registry>();
  std::unique_ptr<PrometheusCollector> engine_;
  std::unique_ptr<PrometheusConsumerCollector> consumer_;
  std::unique_ptr<prometheus::Exposer> exposer_;
};
#else
// Without prometheus-cpp ValidateKafkaDemoOptions refuses --metrics_port.
class DemoMetrics {
 public:
  static absl::StatusOr<std::unique_ptr<DemoMetrics>> Start(int, Engine*) {
    return absl::UnimplementedError("built without prometheus-cpp");
  }
  int port() const { return -1; }
  void Update(const kafka::ConsumerStats&) {}
  void UpdateEngine() {}
};
#endif

class Demo {
 public:
  Demo(const KafkaDemoOptions& options, std::ostream& progress)
      : options_(options), progress_(progress) {}

  absl::StatusOr<KafkaDemoReport> Run() {
    if (absl::Status s = SetUp(); !s.ok()) return s;
    const DemoStream stream = MakeDemoStream(options_, report_.topic);
    report_.unique_payments = static_cast<int64_t>(stream.payment_ids.size());
    report_.injected_duplicates = stream.duplicates;
    const size_t half = stream.records.size() / 2;
    const std::vector<OutgoingRecord> first(stream.records.begin(),
                                            stream.records.begin() + half);
    const std::vector<OutgoingRecord> second(stream.records.begin() + half,
                                             stream.records.end());

    auto engine = Engine::Open(report_.store, Options());
    if (!engine.ok()) return engine.status();
    if (options_.metrics_port >= 0) {
      auto metrics = DemoMetrics::Start(options_.metrics_port, engine->get());
      if (!metrics.ok()) return metrics.status();
      metrics_ = *std::move(metrics);
      progress_ << "serving metrics at http://127.0.0.1:" << metrics_->port()
                << "/metrics\n";
    }
    if (absl::Status s = RunPhase("phase 1", first, **engine, report_.first);
        !s.ok()) {
      return s;
    }
    if (absl::Status s = RunPhase("phase 2", second, **engine, report_.second);
        !s.ok()) {
      return s;
    }
    if (absl::Status s = Check(stream, **engine); !s.ok()) return s;
    if (metrics_ != nullptr && options_.metrics_linger > absl::ZeroDuration()) {
      metrics_->UpdateEngine();
      progress_ << "metrics stay up for "
                << absl::FormatDuration(options_.metrics_linger) << "\n";
      absl::SleepFor(options_.metrics_linger);
    }
    metrics_.reset();  // before the engine closes
    return report_;
  }

 private:
  absl::Status SetUp() {
    report_.topic =
        options_.topic.empty()
            ? absl::StrCat("idem-demo-", absl::ToUnixSeconds(absl::Now()))
            : options_.topic;
    absl::StatusOr<DemoBed> bed =
        SetUpDemoBed(options_, {report_.topic, report_.topic + ".dlq"},
                     "idem_kafka_demo_", progress_);
    if (!bed.ok()) return bed.status();
    bed_ = *std::move(bed);
    report_.brokers = bed_.label;
    report_.scratch = bed_.scratch->path();
    if (options_.keep) {
      progress_ << "keeping the scratch directory " << report_.scratch << "\n";
    }
    report_.store =
        options_.store.empty() ? bed_.scratch->Sub("store") : options_.store;
    return absl::OkStatus();
  }

  kafka::ConsumerOptions ConsumerOptionsFor(const std::string& topic,
                                            const std::string& group) const {
    kafka::ConsumerOptions options;
    options.brokers = bed_.brokers;
    options.group_id = group;
    options.topics = {topic};
    options.max_batch = options_.batch;
    options.max_attempts = kMaxAttempts;
    options.retry_backoff = absl::Milliseconds(10);
    options.kafka_config = {{"log_level", "3"}};
    if (bed_.mock != nullptr) {
      // The mock coordinator waits up to the session timeout for members
      // when a group rebalances; keep the restart quick.
      options.kafka_config.push_back({"session.timeout.ms", "6000"});
      options.kafka_config.push_back({"heartbeat.interval.ms", "500"});
    }
    return options;
  }

  // Produces `records`, then consumes until as many records were handled.
  absl::Status RunPhase(const std::string& name,
                        const std::vector<OutgoingRecord>& records,
                        Engine& engine, KafkaDemoPhase& phase) {
    progress_ << name << ": producing " << records.size() << " records to "
              << report_.topic << "\n";
    if (absl::Status s = bed_.producer->Produce(records); !s.ok()) return s;
    phase.produced = static_cast<int64_t>(records.size());

    kafka::ConsumerOptions options =
        ConsumerOptionsFor(report_.topic, "idem-demo-" + report_.topic);
    options.dead_letter_topic = report_.topic + ".dlq";
    options.on_assign = [&](const kafka::PartitionStart& start) {
      phase.starts.push_back(
          start.engine_offset.has_value()
              ? absl::StrFormat("%d: engine offset %d, resuming at %d",
                                start.partition, *start.engine_offset,
                                start.start_offset)
              : absl::StrFormat("%d: no engine offset, group's offset or "
                                "earliest",
                                start.partition));
      progress_ << name << ": assigned partition " << phase.starts.back()
                << "\n";
    };
    auto consumer = kafka::Consumer::Create(&engine, options);
    if (!consumer.ok()) return consumer.status();
    // Timed from the first record on: joining the group is not throughput.
    std::optional<absl::Time> start;
    absl::Time last_record = absl::Now();
    absl::Time last_progress = last_record;
    while ((*consumer)->stats().records < phase.produced) {
      absl::StatusOr<kafka::BatchReport> batch =
          (*consumer)->PollBatch(ApplyPayment);
      if (!batch.ok()) return batch.status();
      if (metrics_ != nullptr) metrics_->Update((*consumer)->stats());
      const absl::Time now = absl::Now();
      if (batch->records > 0) {
        last_record = now;
        if (!start.has_value()) start = now;
      }
      if (now - last_record > options_.idle_timeout) {
        return absl::DeadlineExceededError(
            absl::StrCat(name, ": no record for ",
                         absl::FormatDuration(options_.idle_timeout), " after ",
                         (*consumer)->stats().records, " of ", phase.produced));
      }
      if (now - last_progress > absl::Seconds(2)) {
        last_progress = now;
        progress_ << name << ": consumed " << (*consumer)->stats().records
                  << "/" << phase.produced << "\n";
      }
    }
    const kafka::ConsumerStats stats = (*consumer)->stats();
    phase.seconds =
        absl::ToDoubleSeconds(absl::Now() - start.value_or(last_record));
    if (absl::Status s = (*consumer)->Close(); !s.ok()) return s;
    phase.records = stats.records;
    phase.processed = stats.processed;
    phase.duplicates = stats.duplicates;
    phase.dead_lettered = stats.dead_lettered;
    phase.batches = stats.batches;
    phase.engine_seconds = absl::ToDoubleSeconds(stats.engine_time);
    phase.kafka_seconds = absl::ToDoubleSeconds(stats.kafka_time);
    progress_ << name << ": done, " << phase.processed << " applied, "
              << phase.duplicates << " duplicates suppressed, "
              << phase.dead_lettered << " dead-lettered\n";
    return absl::OkStatus();
  }

  absl::Status Check(const DemoStream& stream, Engine& engine) {
    std::map<std::string, int64_t> applied;
    absl::Status s = engine.Dump([&](const DumpEntry& entry) {
      if (entry.kind != DumpEntry::Kind::kState) return absl::OkStatus();
      int64_t value = 0;
      if (!absl::SimpleAtoi(entry.value, &value)) {
        return absl::DataLossError("a stored number is not a number");
      }
      if (entry.key.starts_with("applied/")) {
        applied[entry.key.substr(8)] = value;
      } else if (std::optional<PartitionStateKey> key =
                     ParsePartitionStateKey(entry.key);
                 key.has_value() &&
                 examples::ParseBalanceKey(key->key).has_value()) {
        report_.actual_total += value;
      }
      return absl::OkStatus();
    });
    if (!s.ok()) return s;
    report_.expected_total = stream.expected.total();
    for (const std::string& id : stream.payment_ids) {
      auto it = applied.find(id);
      if (it != applied.end() && it->second == 1) {
        ++report_.applied_once;
      } else {
        ++report_.applied_wrongly;
      }
    }
    report_.applied_wrongly += static_cast<int64_t>(
        std::count_if(applied.begin(), applied.end(), [&](const auto& entry) {
          return !stream.payment_ids.contains(entry.first);
        }));

    progress_ << "reading the dead-letter topic " << report_.topic << ".dlq\n";
    auto dlq_engine = Engine::Open(bed_.scratch->Sub("dlq"), Options());
    if (!dlq_engine.ok()) return dlq_engine.status();
    auto reader = kafka::Consumer::Create(
        dlq_engine->get(),
        ConsumerOptionsFor(report_.topic + ".dlq",
                           "idem-demo-dlq-" + report_.topic));
    if (!reader.ok()) return reader.status();
    const absl::Time deadline = absl::Now() + options_.idle_timeout;
    while (report_.dead_letter_records < 1 && absl::Now() < deadline) {
      auto batch = (*reader)->PollBatch(
          [](const kafka::Record&, Txn&) { return absl::OkStatus(); });
      if (!batch.ok()) return batch.status();
      report_.dead_letter_records += batch->records;
    }
    report_.passed =
        report_.applied_wrongly == 0 &&
        report_.applied_once == report_.unique_payments &&
        report_.actual_total == report_.expected_total &&
        report_.dead_letter_records == 1 &&
        report_.first.dead_lettered + report_.second.dead_lettered == 1;
    return absl::OkStatus();
  }

  const KafkaDemoOptions& options_;
  std::ostream& progress_;
  DemoBed bed_;
  KafkaDemoReport report_;
  std::unique_ptr<DemoMetrics> metrics_;  // with --metrics_port
};

void WritePhaseJson(const KafkaDemoPhase& p, util::JsonWriter& j) {
  j.BeginObject();
  j.Field("produced", p.produced);
  j.Field("records", p.records);
  j.Field("processed", p.processed);
  j.Field("duplicates", p.duplicates);
  j.Field("dead_lettered", p.dead_lettered);
  j.Field("batches", p.batches);
  j.Field("seconds", p.seconds);
  j.Field("engine_seconds", p.engine_seconds);
  j.Field("kafka_seconds", p.kafka_seconds);
  j.Field("records_per_second",
          p.seconds > 0 ? static_cast<double>(p.records) / p.seconds : 0.0);
  j.Key("starts");
  j.BeginArray();
  for (const std::string& start : p.starts) j.String(start);
  j.EndArray();
  j.EndObject();
}

std::string PhaseText(const std::string& name, const KafkaDemoPhase& p) {
  return absl::StrFormat(
      "  %s: %d records in %d batches, %.2f s from the first record to "
      "the last (%.0f records/s)\n"
      "           %.2f s in idem, %.2f s in librdkafka (joining the group "
      "included)\n"
      "           %d applied, %d duplicates suppressed, %d dead-lettered\n"
      "           started at: %s\n",
      name, p.records, p.batches, p.seconds,
      p.seconds > 0 ? p.records / p.seconds : 0.0, p.engine_seconds,
      p.kafka_seconds, p.processed, p.duplicates, p.dead_lettered,
      absl::StrJoin(p.starts, "; "));
}

}  // namespace

absl::Status ValidateKafkaDemoOptions(const KafkaDemoOptions& options) {
  auto invalid = [](const std::string& what) {
    return absl::InvalidArgumentError(what);
  };
  if (options.partitions < 1) return invalid("--partitions must be >= 1");
  if (options.messages < 10) return invalid("--messages must be >= 10");
  if (options.duplicate_every < 0) {
    return invalid("--duplicate_every must be >= 0");
  }
  if (options.batch < 1) return invalid("--batch must be >= 1");
  if (options.idle_timeout <= absl::ZeroDuration()) {
    return invalid("--idle_timeout must be positive");
  }
  if (options.metrics_port < -1 || options.metrics_port > 65535) {
    return invalid("--metrics_port must be a port number (0: any free one)");
  }
#if !IDEM_HAVE_PROMETHEUS
  if (options.metrics_port >= 0) {
    return invalid(
        "--metrics_port needs a build with prometheus-cpp "
        "(IDEM_WITH_PROMETHEUS, Debian: prometheus-cpp-dev)");
  }
#endif
  if (options.metrics_linger < absl::ZeroDuration()) {
    return invalid("--metrics_linger must be >= 0");
  }
  return absl::OkStatus();
}

absl::StatusOr<KafkaDemoReport> RunKafkaDemo(const KafkaDemoOptions& options,
                                             std::ostream& progress) {
  if (absl::Status s = ValidateKafkaDemoOptions(options); !s.ok()) return s;
  return Demo(options, progress).Run();
}

void PrintKafkaDemoReport(const KafkaDemoReport& r, bool json,
                          std::ostream& out) {
  if (json) {
    util::JsonWriter j;
    j.BeginObject();
    j.Field("brokers", r.brokers);
    j.Field("topic", r.topic);
    j.Field("unique_payments", r.unique_payments);
    j.Field("injected_duplicates", r.injected_duplicates);
    j.Key("first");
    WritePhaseJson(r.first, j);
    j.Key("second");
    WritePhaseJson(r.second, j);
    j.Field("applied_once", r.applied_once);
    j.Field("applied_wrongly", r.applied_wrongly);
    j.Field("expected_total", r.expected_total);
    j.Field("actual_total", r.actual_total);
    j.Field("dead_letter_records", r.dead_letter_records);
    j.Field("passed", r.passed);
    j.EndObject();
    out << j.str() << "\n";
    return;
  }
  out << absl::StrFormat(
      "idem Kafka demo: a ledger consumer on topic %s (%s)\n"
      "  stream: %d payments, %d re-published by the producer, 1 poison "
      "record\n",
      r.topic, r.brokers == "mock" ? "mock cluster" : r.brokers,
      r.unique_payments, r.injected_duplicates);
  out << PhaseText("phase 1", r.first) << PhaseText("phase 2", r.second);
  out << absl::StrFormat(
      "  check: %d payments applied exactly once, %d not; balances %d, "
      "expected %d; %d record(s) on the dead-letter topic\n%s\n",
      r.applied_once, r.applied_wrongly, r.actual_total, r.expected_total,
      r.dead_letter_records, r.passed ? "PASS" : "FAIL");
}

int RunKafkaDemoTool(const KafkaDemoOptions& options, bool json,
                     std::ostream& out, std::ostream& err) {
  if (absl::Status s = ValidateKafkaDemoOptions(options); !s.ok()) {
    return ReportUsageError("idem-kafka-demo", s.message(), err);
  }
  absl::StatusOr<KafkaDemoReport> report = RunKafkaDemo(options, err);
  if (!report.ok()) {
    err << "idem-kafka-demo: " << report.status().ToString() << "\n";
    return kExitFailure;
  }
  PrintKafkaDemoReport(*report, json, out);
  if (!options.store.empty() || options.keep) {
    err << "idem-kafka-demo: the store is kept at " << report->store << "\n";
  }
  if (options.keep) {
    err << "idem-kafka-demo: the scratch directory is kept at "
        << report->scratch << "\n";
  }
  return report->passed ? kExitOk : kExitFailure;
}

}  // namespace idem::cli
