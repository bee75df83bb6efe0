#include "tests/testing/kafka_test_util.h"

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

#include <random>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "idem/partition_state.h"
#include "kafka/partition_reader.h"
#include "tests/testing/engine_test_util.h"

extern char** environ;

namespace idem::test {

void StartKafka(const std::string& topic, int partitions, KafkaTestBed& bed) {
  auto cluster = kafka::MockCluster::Start(1);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  ASSERT_TRUE((*cluster)->CreateTopic(topic, partitions).ok());
  auto producer = kafka::Producer::Create((*cluster)->bootstrap_servers());
  ASSERT_TRUE(producer.ok()) << producer.status();
  bed.cluster = *std::move(cluster);
  bed.producer = *std::move(producer);
  bed.topic = topic;
}

ProducedStream MakeStream(const std::string& topic, int partitions, int count,
                          int duplicate_every, uint64_t seed) {
  std::mt19937_64 rng(seed);
  ProducedStream stream;
  std::vector<std::string> ids;
  for (int i = 0; i < count; ++i) {
    kafka::OutgoingRecord record;
    record.topic = topic;
    record.partition = i % partitions;
    std::string id;
    if (duplicate_every > 0 && i > 0 && i % duplicate_every == 0) {
      id = ids[rng() % ids.size()];
      ++stream.duplicates;
    } else {
      id = absl::StrCat("msg-", seed, "-", i);
      ids.push_back(id);
      stream.unique_ids.insert(id);
    }
    record.key = id;
    record.value = absl::StrCat(1 + rng() % 100);
    record.headers = {{"message-id", id}};
    stream.records.push_back(std::move(record));
  }
  return stream;
}

namespace {

absl::Status Bump(Txn& txn, const std::string& key, int64_t by) {
  absl::StatusOr<std::optional<std::string>> current = txn.Get(key);
  if (!current.ok()) return current.status();
  int64_t value = 0;
  if (current->has_value() && !absl::SimpleAtoi(**current, &value)) {
    return absl::DataLossError("bad counter");
  }
  txn.Put(key, absl::StrCat(value + by));
  return absl::OkStatus();
}

// ApplyRecord's effect, its "applied/<id>" counter kept in `applied`.
absl::Status Apply(const kafka::Record& record, Txn& txn, Txn& applied) {
  const std::string id(record.id);
  int64_t amount = 0;
  if (!absl::SimpleAtoi(std::string(record.value), &amount)) {
    return absl::InvalidArgumentError("bad amount");
  }
  if (absl::Status s = Bump(applied, "applied/" + id, 1); !s.ok()) return s;
  PartitionTxn partition(txn, record.topic, record.partition);
  if (absl::Status s = Bump(partition, "total", amount); !s.ok()) return s;
  txn.SetResult("ok:" + id);
  return absl::OkStatus();
}

}  // namespace

absl::Status ApplyRecord(const kafka::Record& record, Txn& txn) {
  return Apply(record, txn, txn);
}

absl::Status ApplyInPartition(const kafka::Record& record, Txn& txn) {
  PartitionTxn partition(txn, record.topic, record.partition);
  return Apply(record, txn, partition);
}

std::map<std::string, int> PartitionAppliedCounts(Engine& engine,
                                                  const std::string& topic,
                                                  int partitions) {
  std::map<std::string, int> counts;
  for (int p = 0; p < partitions; ++p) {
    absl::StatusOr<PartitionSnapshot> snapshot =
        engine.ExportPartition(topic, p);
    if (!snapshot.ok()) {
      ADD_FAILURE() << snapshot.status();
      return counts;
    }
    for (const auto& [key, value] : snapshot->entries) {
      if (!key.starts_with("applied/")) continue;
      counts[key.substr(8)] += std::stoi(value);
    }
  }
  return counts;
}

absl::Status ApplyAndForward(const kafka::Record& record, Txn& txn,
                             const std::string& downstream) {
  if (absl::Status s = ApplyRecord(record, txn); !s.ok()) return s;
  txn.Emit(downstream, record.key, record.value);
  return absl::OkStatus();
}

absl::Status ApplyInPartitionAndForward(const kafka::Record& record, Txn& txn,
                                        const std::string& downstream) {
  if (absl::Status s = ApplyInPartition(record, txn); !s.ok()) return s;
  txn.Emit(downstream, record.key, record.value);
  return absl::OkStatus();
}

std::string FirstEmitId(std::string_view id) { return HexOfIdHash(id) + "-0"; }

std::map<std::string, int> AppliedCounts(Engine& engine) {
  std::map<std::string, int> counts;
  absl::Status s = engine.Dump([&](const DumpEntry& entry) {
    if (entry.kind == DumpEntry::Kind::kState &&
        entry.key.starts_with("applied/")) {
      int value = 0;
      EXPECT_TRUE(absl::SimpleAtoi(entry.value, &value)) << entry.value;
      counts[entry.key.substr(8)] = value;
    }
    return absl::OkStatus();
  });
  EXPECT_TRUE(s.ok()) << s;
  return counts;
}

std::vector<std::string> TotalErrors(Engine& engine, const std::string& topic,
                                     const std::map<int32_t, int64_t>& totals) {
  std::vector<std::string> errors;
  for (const auto& [partition, total] : totals) {
    absl::StatusOr<std::optional<std::string>> got = engine.GetState(
        topic, partition, PartitionStatePrefix(topic, partition) + "total");
    const std::string want = absl::StrCat(total);
    if (!got.ok() || *got != want) {
      errors.push_back(absl::StrCat(
          "p", partition, " total ",
          got.ok() ? got->value_or("(none)") : got.status().ToString(),
          " != ", want));
    }
  }
  return errors;
}

std::map<std::string, int> Merge(
    const std::vector<std::map<std::string, int>>& parts) {
  std::map<std::string, int> merged;
  for (const auto& part : parts) {
    for (const auto& [id, count] : part) merged[id] += count;
  }
  return merged;
}

std::vector<std::string> EffectErrors(
    const std::set<std::string>& expected,
    const std::map<std::string, int>& applied) {
  std::vector<std::string> errors;
  for (const std::string& id : expected) {
    auto it = applied.find(id);
    const int count = it == applied.end() ? 0 : it->second;
    if (count != 1) errors.push_back(absl::StrCat(id, ": ", count));
  }
  for (const auto& [id, count] : applied) {
    if (!expected.contains(id)) {
      errors.push_back(absl::StrCat(id, ": ", count, " (unexpected)"));
    }
  }
  return errors;
}

std::map<std::string, int> MessageIdCounts(const std::string& brokers,
                                           const std::string& topic,
                                           const std::string& isolation) {
  std::map<std::string, int> counts;
  auto reader = kafka::PartitionReader::Create(
      brokers, {{"log_level", "3"}, {"isolation.level", isolation}});
  EXPECT_TRUE(reader.ok()) << reader.status();
  if (!reader.ok()) return counts;
  absl::StatusOr<int32_t> partitions =
      (*reader)->PartitionCount(topic, absl::Seconds(10));
  EXPECT_TRUE(partitions.ok()) << partitions.status();
  for (int32_t p = 0; partitions.ok() && p < *partitions; ++p) {
    absl::Status s = (*reader)->Read(
        topic, p, 0, absl::Seconds(10), [&](const kafka::LogRecord& l) {
          ++counts[std::string(l.record.Header("message-id").value_or(""))];
          return absl::OkStatus();
        });
    EXPECT_TRUE(s.ok()) << s;
  }
  return counts;
}

std::vector<std::string> NotOnce(const std::map<std::string, int>& counts) {
  std::vector<std::string> errors;
  for (const auto& [id, count] : counts) {
    if (count != 1) errors.push_back(absl::StrCat(id, ": ", count));
  }
  return errors;
}

absl::Status PollUntil(kafka::Consumer& consumer, kafka::Handler handler,
                       const std::function<bool()>& done,
                       absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (!done()) {
    if (absl::Now() > deadline) {
      return absl::DeadlineExceededError("condition not reached in time");
    }
    absl::StatusOr<kafka::BatchReport> report = consumer.PollBatch(handler);
    if (!report.ok()) return report.status();
  }
  return absl::OkStatus();
}

kafka::ConsumerOptions TestConsumerOptions(const KafkaTestBed& bed,
                                           const std::string& group) {
  kafka::ConsumerOptions options;
  options.brokers = bed.cluster->bootstrap_servers();
  options.group_id = group;
  options.topics = {bed.topic};
  options.poll_timeout = absl::Milliseconds(50);
  options.retry_backoff = absl::Milliseconds(1);
  options.kafka_config = {
      {"session.timeout.ms", absl::StrCat(kTestSessionTimeoutMs)},
      {"heartbeat.interval.ms", "100"},
      {"log_level", "3"}};
  return options;
}

absl::StatusOr<pid_t> SpawnKafkaChild(const std::string& child,
                                      std::vector<std::string> args) {
  args.insert(args.begin(), child);
  std::vector<char*> argv;
  for (std::string& arg : args) argv.push_back(arg.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  if (int err = posix_spawn(&pid, child.c_str(), nullptr, nullptr, argv.data(),
                            environ);
      err != 0) {
    return absl::InternalError(
        absl::StrCat("posix_spawn ", child, ": error ", err));
  }
  return pid;
}

bool WaitUntil(const std::function<bool()>& done, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (!done()) {
    if (absl::Now() > deadline) return false;
    absl::SleepFor(absl::Milliseconds(10));
  }
  return true;
}

absl::StatusOr<int> WaitForExit(pid_t pid, absl::Duration timeout) {
  int wstatus = 0;
  if (WaitUntil([&] { return waitpid(pid, &wstatus, WNOHANG) != 0; },
                timeout)) {
    return wstatus;
  }
  kill(pid, SIGKILL);
  waitpid(pid, &wstatus, 0);
  return absl::DeadlineExceededError(
      absl::StrCat("the child did not end in ", absl::FormatDuration(timeout)));
}

absl::Status WaitForKillPoint(pid_t pid, absl::Duration timeout) {
  absl::StatusOr<int> wstatus = WaitForExit(pid, timeout);
  if (!wstatus.ok()) {
    return absl::DeadlineExceededError(absl::StrCat(
        "never reached its kill point: ", wstatus.status().message()));
  }
  if (WIFSIGNALED(*wstatus) && WTERMSIG(*wstatus) == SIGKILL) {
    return absl::OkStatus();
  }
  return absl::InternalError(absl::StrCat(
      "the child ended otherwise than at its kill point (wait status ",
      *wstatus, ")"));
}

int64_t CommittedRecords(Engine& engine, const std::string& topic,
                         int partitions) {
  int64_t total = 0;
  for (int p = 0; p < partitions; ++p) {
    absl::StatusOr<std::optional<int64_t>> offset =
        engine.CommittedOffset(topic, p);
    if (offset.ok() && offset->has_value()) total += **offset + 1;
  }
  return total;
}

int64_t CommittedRecords(const std::string& store, const std::string& topic,
                         int partitions) {
  Options read_only;
  read_only.read_only = true;
  absl::StatusOr<std::unique_ptr<Engine>> engine =
      Engine::Open(store, read_only);
  return engine.ok() ? CommittedRecords(**engine, topic, partitions) : 0;
}

}  // namespace idem::test
