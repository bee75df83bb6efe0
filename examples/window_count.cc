// window_count: counts events per key per minute from a Kafka topic, with
// idem::TumblingWindows on the consumer's durable timers, and emits each
// (key, minute) once, when its minute closes (docs/state.md, "Windows").
//
// On librdkafka's mock cluster it produces --events events over --minutes
// minutes of event time (the records' timestamps, a little out of order),
// keys k0 .. k<--keys - 1> over two partitions, then one late-in-time event
// per partition that moves its stream time past every window. A Kafka
// consumer (ConsumerOptions::timer_handler) counts them into one-minute
// windows with a 10 s grace and closes each window when its partition's
// stream time passes it: silent keys' windows close too. Its outbox then
// holds one entry per (key, minute). Exit 0 if every (key, minute) was
// emitted exactly once with exactly the count of its events, 1 otherwise
// (naming what differed), 2 for bad flags.
//
// Usage: window_count [--events=N] [--keys=N] [--minutes=N]
//        (defaults 3000, 50, 10)

#include <stdlib.h>

#include <cstdint>
#include <filesystem>
#include <iostream>
#include <map>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "idem/engine.h"
#include "idem/kafka/consumer.h"
#include "idem/kafka/mock_cluster.h"
#include "idem/kafka/producer.h"
#include "idem/windows.h"

namespace {

constexpr char kTopic[] = "clicks";
constexpr int kPartitions = 2;
const absl::Time kFirstMinute = absl::FromUnixSeconds(1'700'000'040);

// (key, window start in microseconds) -> count.
using Counts = std::map<std::pair<std::string, std::string>, int64_t>;

struct Flags {
  int events = 3000;
  int keys = 50;
  int minutes = 10;
};

bool ParseFlags(int argc, char** argv, Flags& flags) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    int* target = nullptr;
    std::string value;
    for (auto [name, field] : {std::pair{"--events=", &flags.events},
                               std::pair{"--keys=", &flags.keys},
                               std::pair{"--minutes=", &flags.minutes}}) {
      if (arg.rfind(name, 0) == 0) {
        target = field;
        value = arg.substr(std::string(name).size());
      }
    }
    if (target == nullptr || !absl::SimpleAtoi(value, target) || *target < 1) {
      std::cerr << "window_count: bad flag " << arg << "\n";
      return false;
    }
  }
  return true;
}

// The events, produced in time order with up to 4 s of jitter (within the
// grace), the counts a correct run emits, and how many windows (one per
// partition and minute with events) close.
std::vector<idem::kafka::OutgoingRecord> MakeEvents(const Flags& flags,
                                                    Counts& expected,
                                                    int64_t& closings) {
  std::set<std::pair<int32_t, int64_t>> partition_windows;
  std::mt19937_64 random(42);
  std::vector<idem::kafka::OutgoingRecord> records;
  const absl::Duration span = absl::Minutes(flags.minutes);
  for (int i = 0; i < flags.events; ++i) {
    const int key = static_cast<int>(random() % flags.keys);
    const absl::Duration jitter =
        absl::Milliseconds(static_cast<int64_t>(random() % 4000));
    absl::Time at = kFirstMinute + span * i / flags.events + jitter;
    if (at >= kFirstMinute + span) at = kFirstMinute + span - absl::Seconds(1);
    idem::kafka::OutgoingRecord record;
    record.topic = kTopic;
    record.key = absl::StrCat("k", key);
    record.partition = key % kPartitions;
    record.headers = {{"message-id", absl::StrCat("e", i)}};
    record.timestamp_ms = absl::ToUnixMillis(at);
    const int64_t start = absl::ToUnixMicros(
        kFirstMinute + absl::Minutes((at - kFirstMinute) / absl::Minutes(1)));
    ++expected[{record.key, absl::StrCat(start)}];
    partition_windows.emplace(record.partition, start);
    records.push_back(std::move(record));
  }
  closings = static_cast<int64_t>(partition_windows.size());
  // Past every window and its grace, on each partition.
  for (int p = 0; p < kPartitions; ++p) {
    idem::kafka::OutgoingRecord record;
    record.topic = kTopic;
    record.key = "end";
    record.partition = p;
    record.headers = {{"message-id", absl::StrCat("end", p)}};
    record.timestamp_ms =
        absl::ToUnixMillis(kFirstMinute + span + absl::Minutes(5));
    records.push_back(std::move(record));
  }
  return records;
}

// What the store's outbox holds, as counts; "twice" names a repeat.
Counts Emitted(idem::Engine& engine, std::vector<std::string>& errors) {
  Counts emitted;
  absl::StatusOr<std::vector<idem::OutboxEntry>> entries =
      engine.ReadOutbox(1'000'000);
  if (!entries.ok()) {
    errors.push_back(entries.status().ToString());
    return emitted;
  }
  for (const idem::OutboxEntry& entry : *entries) {
    std::string start;
    for (const auto& [name, value] : entry.headers) {
      if (name == "idem.window.start") start = value;
    }
    int64_t count = 0;
    if (!absl::SimpleAtoi(entry.value, &count)) {
      errors.push_back("a count that is not a number: " + entry.value);
    }
    if (!emitted.emplace(std::pair{entry.key, start}, count).second) {
      errors.push_back(
          absl::StrCat("emitted twice: ", entry.key, " at ", start));
    }
  }
  return emitted;
}

int Run(const Flags& flags, const std::string& dir) {
  auto cluster = idem::kafka::MockCluster::Start();
  if (!cluster.ok() || !(*cluster)->CreateTopic(kTopic, kPartitions).ok()) {
    std::cerr << "window_count: cannot start the mock cluster\n";
    return 1;
  }
  auto producer =
      idem::kafka::Producer::Create((*cluster)->bootstrap_servers());
  Counts expected;
  int64_t closings = 0;
  const std::vector<idem::kafka::OutgoingRecord> records =
      MakeEvents(flags, expected, closings);
  if (!producer.ok() || !(*producer)->Produce(records).ok()) {
    std::cerr << "window_count: cannot produce\n";
    return 1;
  }
  auto engine = idem::Engine::Open(dir + "/store", idem::Options());
  idem::TumblingWindowOptions window_options;
  window_options.size = absl::Minutes(1);
  window_options.grace = absl::Seconds(10);
  window_options.name = "per-minute";
  window_options.destination = "counts";
  absl::StatusOr<idem::TumblingWindows> windows =
      idem::TumblingWindows::Create(window_options);
  if (!engine.ok() || !windows.ok()) {
    std::cerr << "window_count: " << engine.status() << windows.status()
              << "\n";
    return 1;
  }
  idem::kafka::ConsumerOptions options;
  options.brokers = (*cluster)->bootstrap_servers();
  options.group_id = "window_count";
  options.topics = {kTopic};
  options.poll_timeout = absl::Milliseconds(50);
  options.relay_outbox = false;  // the outbox is what is checked
  options.kafka_config = {{"log_level", "3"}};
  options.timer_handler = [&](const idem::TimerFire& fire,
                              idem::Txn& txn) -> absl::Status {
    absl::StatusOr<bool> closed = windows->Close(fire, txn);
    if (!closed.ok()) return closed.status();
    return *closed ? absl::OkStatus()
                   : absl::InternalError("a timer that is no window's");
  };
  int64_t late = 0;
  auto count = [&](const idem::kafka::Record& record,
                   idem::Txn& txn) -> absl::Status {
    idem::Message message;
    message.source = record.topic;
    message.partition = record.partition;
    message.event_time = absl::FromUnixMillis(record.timestamp_ms);
    absl::StatusOr<idem::WindowAdd> added =
        windows->Add(message, txn, record.key);
    if (!added.ok()) return added.status();
    if (*added == idem::WindowAdd::kLate) ++late;
    return absl::OkStatus();
  };
  auto consumer = idem::kafka::Consumer::Create(engine->get(), options);
  if (!consumer.ok()) {
    std::cerr << "window_count: " << consumer.status() << "\n";
    return 1;
  }
  const absl::Time deadline = absl::Now() + absl::Seconds(120);
  while ((*consumer)->stats().records < static_cast<int64_t>(records.size()) ||
         (*consumer)->stats().timers_fired < closings) {
    absl::StatusOr<idem::kafka::BatchReport> report =
        (*consumer)->PollBatch(count);
    if (!report.ok() || absl::Now() > deadline) {
      std::cerr << "window_count: "
                << (report.ok() ? "timed out" : report.status().ToString())
                << "\n";
      return 1;
    }
  }
  (*consumer)->Close().IgnoreError();  // the outbox is what counts

  std::vector<std::string> errors;
  const Counts emitted = Emitted(**engine, errors);
  for (const auto& [window, want] : expected) {
    auto it = emitted.find(window);
    if (it == emitted.end() || it->second != want) {
      errors.push_back(absl::StrCat(
          window.first, " at ", window.second, ": emitted ",
          it == emitted.end() ? "nothing" : absl::StrCat(it->second),
          ", expected ", want));
    }
  }
  for (const auto& [window, got] : emitted) {
    if (!expected.contains(window)) {
      errors.push_back(absl::StrCat("unexpected ", window.first, " at ",
                                    window.second, ": ", got));
    }
  }
  if (late > 0) errors.push_back(absl::StrCat(late, " events counted late"));
  std::cout << "window_count: " << flags.events << " events, "
            << expected.size() << " (key, minute) windows, " << emitted.size()
            << " emitted, " << (*consumer)->stats().timers_fired
            << " windows closed\n";
  for (const std::string& error : errors) std::cout << "  " << error << "\n";
  return errors.empty() ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  Flags flags;
  if (!ParseFlags(argc, argv, flags)) return 2;
  std::string dir =
      std::filesystem::temp_directory_path() / "window_count_XXXXXX";
  if (mkdtemp(dir.data()) == nullptr) {
    std::cerr << "window_count: cannot make a temporary directory\n";
    return 1;
  }
  const int code = Run(flags, dir);
  std::filesystem::remove_all(dir);
  return code;
}
