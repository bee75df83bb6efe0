// Changelog mode (ConsumerOptions::changelog_topic) with durable timers,
// stream time and windows against librdkafka's mock cluster: a partition's
// timers and stream time follow it to the member that restores it, which
// fires each remaining timer exactly once; tumbling windows open at a
// hand-over are emitted once, with their whole count; a standby copy holds
// the owner's timers and stream time; expiring state keeps its expiry
// through a restore. Broken variant: a changelog without
// timer records (ConsumerHooks::changelog_drops_timers) is caught.

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "idem/clock.h"
#include "idem/engine.h"
#include "idem/kafka/consumer.h"
#include "idem/partition_snapshot.h"
#include "idem/partition_state.h"
#include "idem/timers.h"
#include "idem/windows.h"
#include "kafka/consumer_hooks.h"
#include "kafka/partition_reader.h"
#include "tests/testing/changelog_test_base.h"
#include "tests/testing/kafka_test_util.h"

namespace idem {
namespace {

using ::idem::kafka::ConsumerOptions;
using ::idem::kafka::Record;
using ::idem::kafka::RestoreReport;
using ::idem::test::kPartitions;
using ::idem::test::kTopic;
using ::idem::test::Stream;
using ::testing::IsEmpty;
using ::testing::Not;

constexpr char kFires[] = "timer-fires";
constexpr char kCounts[] = "window-counts";
const absl::Duration kWait = absl::Seconds(30);

// A timer as compared between two copies of a partition.
using TimerRow = std::tuple<int, std::string, absl::Time, std::string>;

// A window bound as the windows' headers carry it.
std::string MicrosText(absl::Time t) {
  return absl::StrCat(absl::ToUnixMicros(t));
}

// The event-time timer a record of ArmTimers sets: 1.5 s after its
// timestamp, so the record two seconds later closes it.
std::string CloseKey(const std::string& id) { return "close/" + id; }

// ApplyInPartition, then an event-time timer CloseKey(id) 1.5 s after the
// record's timestamp, and for the first record of a partition
// ("<prefix>-<p>-0") a processing-time timer an hour away.
absl::Status ArmTimers(const Record& record, Txn& txn) {
  if (absl::Status s = test::ApplyInPartition(record, txn); !s.ok()) return s;
  const std::string id(record.id);
  const absl::Time at = absl::FromUnixMillis(record.timestamp_ms);
  if (absl::Status s = txn.SetTimer(CloseKey(id), TimeDomain::kEvent,
                                    at + absl::Milliseconds(1500), id);
      !s.ok()) {
    return s;
  }
  if (id.ends_with("-0")) {
    return txn.SetTimer("later/" + id, TimeDomain::kProcessing,
                        absl::Now() + absl::Hours(1));
  }
  return absl::OkStatus();
}

class KafkaChangelogTimersTest : public test::ChangelogTestBase {
 protected:
  void SetUp() override {
    ChangelogTestBase::SetUp();
    ASSERT_TRUE(bed_.cluster->CreateTopic(kFires, 1).ok());
    ASSERT_TRUE(bed_.cluster->CreateTopic(kCounts, 1).ok());
    // Whole 10 s windows, an hour back: event times the engine takes.
    const int64_t now_s = absl::ToUnixSeconds(absl::Now()) - 3600;
    base_ = absl::FromUnixSeconds(now_s - now_s % 10);
  }

  // A record "<id>" on `partition` at base_ + `at`, with `key`.
  void Add(Stream& stream, const std::string& id, int32_t partition,
           absl::Duration at, const std::string& key = "") {
    test::AddMessage(stream, id, partition, 1, false);
    stream.records.back().timestamp_ms = absl::ToUnixMillis(base_ + at);
    if (!key.empty()) stream.records.back().key = key;
  }

  // Each timer's fire emits its key to kFires.
  static absl::Status EmitFire(const TimerFire& fire, Txn& txn) {
    txn.Emit(kFires, fire.timer_key, fire.payload);
    return absl::OkStatus();
  }

  // Consumes with `engine`, timers fired by `on_timer`, until it handled
  // `records` records and fired `fires` timers, then closes the consumer.
  // Returns an error, not a failure, when that is not reached in time.
  absl::Status ConsumeAndFire(
      Engine& engine, int64_t records, int64_t fires,
      const kafka::ConsumerHooks& hooks, kafka::Handler handler,
      std::function<absl::Status(const TimerFire&, Txn&)> on_timer) {
    std::vector<RestoreReport> reports;
    ConsumerOptions options = MemberOptions(&reports);
    options.timer_handler = std::move(on_timer);
    auto consumer = kafka::CreateConsumerWithHooks(&engine, options, hooks);
    if (!consumer.ok()) return consumer.status();
    absl::Status s = test::PollUntil(
        **consumer, handler,
        [&] {
          return Handled(engine) >= records &&
                 (*consumer)->stats().timers_fired >= fires;
        },
        kWait);
    absl::Status closed = (*consumer)->Close();
    return s.ok() ? closed : s;
  }

  // How often each key appears in `topic` (one partition).
  std::map<std::string, int> KeyCounts(const std::string& topic) {
    std::map<std::string, int> counts;
    auto reader = kafka::PartitionReader::Create(
        bed_.cluster->bootstrap_servers(), {{"log_level", "3"}});
    EXPECT_TRUE(reader.ok()) << reader.status();
    if (!reader.ok()) return counts;
    absl::Status s = (*reader)->Read(
        topic, 0, 0, absl::Seconds(10), [&](const kafka::LogRecord& r) {
          std::string key(r.record.key);
          if (std::optional<std::string_view> start =
                  r.record.Header("idem.window.start")) {
            absl::StrAppend(&key, "@", std::string(*start), "=",
                            std::string(r.record.value));
          }
          ++counts[key];
          return absl::OkStatus();
        });
    EXPECT_TRUE(s.ok()) << s;
    return counts;
  }

  // The partition's timers in `engine`, in export order.
  static std::vector<TimerRow> Timers(Engine& engine, int32_t partition) {
    absl::StatusOr<PartitionSnapshot> copy =
        engine.ExportPartition(kTopic, partition);
    EXPECT_TRUE(copy.ok()) << copy.status();
    std::vector<TimerRow> rows;
    if (!copy.ok()) return rows;
    for (const TimerFire& t : copy->timers) {
      rows.emplace_back(static_cast<int>(t.domain), t.timer_key, t.fire_at,
                        t.payload);
    }
    return rows;
  }

  // What of the partition's time differs between `owner` and `copy`:
  // stream time, next timers of both domains, the timers themselves.
  static std::vector<std::string> TimeDifferences(Engine& owner, Engine& copy,
                                                  int32_t p) {
    std::vector<std::string> errors;
    absl::StatusOr<absl::Time> want = owner.StreamTime(kTopic, p);
    absl::StatusOr<absl::Time> got = copy.StreamTime(kTopic, p);
    if (!want.ok() || !got.ok() || *want != *got ||
        *want == absl::InfinitePast()) {
      errors.push_back(absl::StrCat("p", p, ": stream time"));
    }
    for (TimeDomain domain : {TimeDomain::kEvent, TimeDomain::kProcessing}) {
      absl::StatusOr<std::optional<TimerFire>> a =
          owner.NextTimer(kTopic, p, domain);
      absl::StatusOr<std::optional<TimerFire>> b =
          copy.NextTimer(kTopic, p, domain);
      if (!a.ok() || !b.ok() || !a->has_value() || !b->has_value() ||
          (*a)->timer_key != (*b)->timer_key ||
          (*a)->fire_at != (*b)->fire_at) {
        errors.push_back(absl::StrCat("p", p, ": next timer of domain ",
                                      static_cast<int>(domain)));
      }
    }
    if (Timers(owner, p) != Timers(copy, p)) {
      errors.push_back(absl::StrCat("p", p, ": timers"));
    }
    return errors;
  }

  // Per partition, records "first-<p>-<i>" 1 s apart (i < 4), each arming
  // CloseKey (ArmTimers). A, writing with `a_hooks`, handles them and fires
  // the two timers the later records close; A leaves. B restores every
  // partition: its stream times and timers must be A's. Then a record per
  // partition 10 s on makes B fire the rest. Returns what went wrong: time
  // that differs after the restore, and timer keys not emitted exactly once.
  std::vector<std::string> HandOverErrors(const kafka::ConsumerHooks& a_hooks) {
    Stream first;
    std::set<std::string> keys;
    for (int32_t p = 0; p < kPartitions; ++p) {
      for (int i = 0; i < 4; ++i) {
        const std::string id = absl::StrCat("first-", p, "-", i);
        Add(first, id, p, absl::Seconds(i));
        keys.insert(CloseKey(id));
      }
    }
    Produce(first);
    std::unique_ptr<Engine> a = OpenStore("a");
    std::unique_ptr<Engine> b = OpenStore("b");
    if (a == nullptr || b == nullptr) return {"no store"};
    std::vector<std::string> errors;
    absl::Status s = ConsumeAndFire(*a, Handled(first), 2 * kPartitions,
                                    a_hooks, ArmTimers, EmitFire);
    if (!s.ok()) errors.push_back(absl::StrCat("A: ", s.ToString()));
    // B restores, with nothing new to handle and nothing due.
    s = ConsumeAndFire(*b, Handled(first), 0, {}, ArmTimers, EmitFire);
    if (!s.ok()) errors.push_back(absl::StrCat("B restores: ", s.ToString()));
    for (int32_t p = 0; p < kPartitions; ++p) {
      for (std::string& e : TimeDifferences(*a, *b, p)) {
        errors.push_back(std::move(e));
      }
    }
    Stream second;
    for (int32_t p = 0; p < kPartitions; ++p) {
      Add(second, absl::StrCat("second-", p), p, absl::Seconds(10));
    }
    Produce(second);
    s = ConsumeAndFire(*b, Handled(first) + Handled(second), 2 * kPartitions,
                       {}, ArmTimers, EmitFire);
    if (!s.ok()) errors.push_back(absl::StrCat("B fires: ", s.ToString()));
    std::map<std::string, int> fired = KeyCounts(kFires);
    for (const std::string& key : keys) {
      if (fired[key] != 1) {
        errors.push_back(absl::StrCat(key, " fired ", fired[key], " times"));
      }
    }
    for (const auto& [key, count] : fired) {
      if (!keys.contains(key)) errors.push_back(key + " fired unexpectedly");
    }
    return errors;
  }

  // Tumbling 10 s windows counting per key. A handles, per partition p,
  // "p<p>-k0" at 1 s and 3 s, "p<p>-k1" at 2 s (window 0) and "p<p>-k0" at
  // 11 s (window 1, which closes window 0), and leaves with window 1 open;
  // B restores, then handles "p<p>-k1" at 21 s and "p<p>-k0" at 31 s,
  // closing windows 1 and 2. Returns the (key, window, count) emits that
  // are not exactly the expected ones, each once.
  std::vector<std::string> WindowErrors(const kafka::ConsumerHooks& a_hooks) {
    TumblingWindowOptions window_options;
    window_options.size = absl::Seconds(10);
    window_options.name = "w";
    window_options.destination = kCounts;
    absl::StatusOr<TumblingWindows> windows =
        TumblingWindows::Create(window_options);
    if (!windows.ok()) return {windows.status().ToString()};
    auto add = [&](const Record& record, Txn& txn) -> absl::Status {
      Message message;
      message.source = record.topic;
      message.partition = record.partition;
      message.event_time = absl::FromUnixMillis(record.timestamp_ms);
      return windows->Add(message, txn, record.key).status();
    };
    auto close = [&](const TimerFire& fire, Txn& txn) -> absl::Status {
      absl::StatusOr<bool> closed = windows->Close(fire, txn);
      if (!closed.ok()) return closed.status();
      return *closed ? absl::OkStatus()
                     : absl::InternalError("a timer that is no window's");
    };
    Stream first, second;
    std::map<std::string, int> want;
    const std::string w0 = MicrosText(base_);
    const std::string w1 = MicrosText(base_ + absl::Seconds(10));
    const std::string w2 = MicrosText(base_ + absl::Seconds(20));
    for (int32_t p = 0; p < kPartitions; ++p) {
      const std::string k0 = absl::StrCat("p", p, "-k0");
      const std::string k1 = absl::StrCat("p", p, "-k1");
      Add(first, absl::StrCat("a-", p, "-0"), p, absl::Seconds(1), k0);
      Add(first, absl::StrCat("a-", p, "-1"), p, absl::Seconds(2), k1);
      Add(first, absl::StrCat("a-", p, "-2"), p, absl::Seconds(3), k0);
      Add(first, absl::StrCat("a-", p, "-3"), p, absl::Seconds(11), k0);
      Add(second, absl::StrCat("b-", p, "-0"), p, absl::Seconds(21), k1);
      Add(second, absl::StrCat("b-", p, "-1"), p, absl::Seconds(31), k0);
      want[absl::StrCat(k0, "@", w0, "=2")] = 1;
      want[absl::StrCat(k1, "@", w0, "=1")] = 1;
      want[absl::StrCat(k0, "@", w1, "=1")] = 1;
      want[absl::StrCat(k1, "@", w2, "=1")] = 1;
    }
    Produce(first);
    std::unique_ptr<Engine> a = OpenStore("a");
    std::unique_ptr<Engine> b = OpenStore("b");
    if (a == nullptr || b == nullptr) return {"no store"};
    std::vector<std::string> errors;
    absl::Status s =
        ConsumeAndFire(*a, Handled(first), kPartitions, a_hooks, add, close);
    if (!s.ok()) errors.push_back(absl::StrCat("A: ", s.ToString()));
    Produce(second);
    s = ConsumeAndFire(*b, Handled(first) + Handled(second), 2 * kPartitions,
                       {}, add, close);
    if (!s.ok()) errors.push_back(absl::StrCat("B: ", s.ToString()));
    std::map<std::string, int> got = KeyCounts(kCounts);
    for (const auto& [emit, count] : want) {
      if (got[emit] != count) {
        errors.push_back(absl::StrCat(emit, " emitted ", got[emit], " times"));
      }
    }
    for (const auto& [emit, count] : got) {
      if (!want.contains(emit)) errors.push_back(emit + " emitted");
    }
    return errors;
  }

  // A (on a manual clock, writing with `a_hooks`) handles a record per
  // partition, each setting a processing-time timer an hour away, and
  // closes; two hours later A restarts, finds its copy current (at the
  // offset of the changelog's last commit), fires the overdue timers and
  // closes. B restores after that. Returns what went wrong: a timer B still
  // has, a timer not emitted exactly once.
  std::vector<std::string> RestartThenHandOverErrors(
      const kafka::ConsumerHooks& a_hooks) {
    ManualClock clock(absl::Now());
    Stream first;
    for (int32_t p = 0; p < kPartitions; ++p) {
      Add(first, absl::StrCat("r-", p), p, absl::Seconds(p));
    }
    Produce(first);
    auto remind = [&](const Record& record, Txn& txn) -> absl::Status {
      if (absl::Status s = test::ApplyInPartition(record, txn); !s.ok()) {
        return s;
      }
      return txn.SetTimer(absl::StrCat("remind/", std::string(record.id)),
                          TimeDomain::kProcessing,
                          clock.Now() + absl::Hours(1));
    };
    std::unique_ptr<Engine> a = OpenStore("a", &clock);
    std::unique_ptr<Engine> b = OpenStore("b", &clock);
    if (a == nullptr || b == nullptr) return {"no store"};
    std::vector<std::string> errors;
    absl::Status s =
        ConsumeAndFire(*a, Handled(first), 0, a_hooks, remind, EmitFire);
    if (!s.ok()) errors.push_back(absl::StrCat("A: ", s.ToString()));
    clock.Advance(absl::Hours(2));
    s = ConsumeAndFire(*a, Handled(first), kPartitions, a_hooks, remind,
                       EmitFire);
    if (!s.ok()) errors.push_back(absl::StrCat("A again: ", s.ToString()));
    s = ConsumeAndFire(*b, Handled(first), 0, {}, remind, EmitFire);
    if (!s.ok()) errors.push_back(absl::StrCat("B: ", s.ToString()));
    for (int32_t p = 0; p < kPartitions; ++p) {
      absl::StatusOr<std::optional<TimerFire>> left =
          b->NextTimer(kTopic, p, TimeDomain::kProcessing);
      if (!left.ok() || left->has_value()) {
        errors.push_back(absl::StrCat("p", p, ": B has a fired timer"));
      }
    }
    std::map<std::string, int> fired = KeyCounts(kFires);
    for (int32_t p = 0; p < kPartitions; ++p) {
      const std::string key = absl::StrCat("remind/r-", p);
      if (fired[key] != 1) {
        errors.push_back(absl::StrCat(key, " fired ", fired[key], " times"));
      }
    }
    return errors;
  }

  absl::Time base_;
};

TEST_F(KafkaChangelogTimersTest, TimersAndStreamTimeFollowAPartitionOnce) {
  EXPECT_THAT(HandOverErrors({}), IsEmpty());
}

// The broken variant: the changelog carries no timer records. B restores
// no timers, so the timers A left are never fired: caught.
TEST_F(KafkaChangelogTimersTest, ChangelogWithoutTimerRecordsIsCaught) {
  EXPECT_THAT(HandOverErrors({.changelog_drops_timers = true}), Not(IsEmpty()));
}

TEST_F(KafkaChangelogTimersTest, WindowsOpenAtAHandOverAreEmittedOnce) {
  EXPECT_THAT(WindowErrors({}), IsEmpty());
}

// The broken variant: without timer records the window open at the
// hand-over never closes at B; its count is never emitted.
TEST_F(KafkaChangelogTimersTest, WindowsWithoutTimerRecordsAreCaught) {
  EXPECT_THAT(WindowErrors({.changelog_drops_timers = true}), Not(IsEmpty()));
}

// Fires right after a restart that found the copy current share the offset
// of the changelog's last commit; they still reach the changelog, so the
// next owner does not fire them again.
TEST_F(KafkaChangelogTimersTest, FiresAfterARestartReachTheChangelog) {
  EXPECT_THAT(RestartThenHandOverErrors({}), IsEmpty());
}

// The broken variant: those fires are held back as if published before.
// B restores the fired timers: caught.
TEST_F(KafkaChangelogTimersTest, FiresHeldBackAfterARestartAreCaught) {
  EXPECT_THAT(RestartThenHandOverErrors({.changelog_skips_fires = true}),
              Not(IsEmpty()));
}

// B keeps standby copies of A's partitions: each copy has A's stream time
// and timers.
TEST_F(KafkaChangelogTimersTest, StandbyCopyHasTheOwnersTimersAndStreamTime) {
  Stream first;
  for (int32_t p = 0; p < kPartitions; ++p) {
    for (int i = 0; i < 4; ++i) {
      Add(first, absl::StrCat("first-", p, "-", i), p, absl::Seconds(i));
    }
  }
  Produce(first);
  std::unique_ptr<Engine> a = OpenStore("a");
  std::unique_ptr<Engine> b = OpenStore("b");
  ASSERT_TRUE(a != nullptr && b != nullptr);
  std::vector<RestoreReport> reports;
  ConsumerOptions a_options = MemberOptions(&reports);
  a_options.timer_handler = EmitFire;
  ConsumerOptions b_options = MemberOptions(&reports);
  b_options.timer_handler = EmitFire;
  b_options.standby_partitions = {0, 1, 2};
  b_options.standby_interval = absl::Milliseconds(20);
  auto ca = kafka::Consumer::Create(a.get(), a_options);
  auto cb = kafka::Consumer::Create(b.get(), b_options);
  ASSERT_TRUE(ca.ok() && cb.ok());
  // Both hold partitions, and B's copies of A's have A's time.
  auto caught_up = [&] {
    if ((*ca)->Assignment().empty() || (*cb)->Assignment().empty() ||
        Handled(*b) != Handled(first)) {
      return false;
    }
    for (const auto& [topic, p] : (*ca)->Assignment()) {
      if (!TimeDifferences(*a, *b, p).empty()) return false;
    }
    return true;
  };
  const absl::Time deadline = absl::Now() + kWait;
  while (!caught_up() && absl::Now() < deadline) {
    ASSERT_TRUE((*ca)->PollBatch(ArmTimers).ok());
    ASSERT_TRUE((*cb)->PollBatch(ArmTimers).ok());
  }
  ASSERT_FALSE((*ca)->Assignment().empty());
  for (const auto& [topic, p] : (*ca)->Assignment()) {
    EXPECT_THAT(TimeDifferences(*a, *b, p), IsEmpty());
  }
  EXPECT_TRUE((*ca)->Close().ok());
  EXPECT_TRUE((*cb)->Close().ok());
}

// A writes "session/<id>" with a one-hour ttl for each record; B restores
// them on the same clock: each keeps its expiry (not immortal, not
// renewed), and once the hour has passed it is invisible in B, and in C,
// which restores after that.
TEST_F(KafkaChangelogTimersTest, ExpiringStateKeepsItsExpiryThroughARestore) {
  ManualClock clock(absl::Now());
  Stream first;
  for (int32_t p = 0; p < kPartitions; ++p) {
    Add(first, absl::StrCat("first-", p), p, absl::Seconds(p));
  }
  Produce(first);
  auto put = [](const Record& record, Txn& txn) -> absl::Status {
    if (absl::Status s = test::ApplyInPartition(record, txn); !s.ok()) {
      return s;
    }
    PartitionTxn partition(txn, record.topic, record.partition);
    return partition.Put(absl::StrCat("session/", std::string(record.id)),
                         "open", PutOptions{.ttl = absl::Hours(1)});
  };
  std::unique_ptr<Engine> a = OpenStore("a", &clock);
  std::unique_ptr<Engine> b = OpenStore("b", &clock);
  std::unique_ptr<Engine> c = OpenStore("c", &clock);
  ASSERT_TRUE(a != nullptr && b != nullptr && c != nullptr);
  ASSERT_TRUE(ConsumeAndFire(*a, Handled(first), 0, {}, put, EmitFire).ok());
  clock.Advance(absl::Minutes(10));
  ASSERT_TRUE(ConsumeAndFire(*b, Handled(first), 0, {}, put, EmitFire).ok());
  for (int32_t p = 0; p < kPartitions; ++p) {
    const std::string key = absl::StrCat("session/first-", p);
    absl::StatusOr<PartitionSnapshot> owner = a->ExportPartition(kTopic, p);
    absl::StatusOr<PartitionSnapshot> copy = b->ExportPartition(kTopic, p);
    ASSERT_TRUE(owner.ok() && copy.ok());
    ASSERT_TRUE(owner->expires_at.contains(key)) << key;
    EXPECT_EQ(copy->expires_at, owner->expires_at) << "partition " << p;
  }
  clock.Advance(absl::Hours(1));
  ASSERT_TRUE(ConsumeAndFire(*c, Handled(first), 0, {}, put, EmitFire).ok());
  for (int32_t p = 0; p < kPartitions; ++p) {
    const std::string key =
        PartitionStatePrefix(kTopic, p) + absl::StrCat("session/first-", p);
    for (Engine* engine : {b.get(), c.get()}) {
      absl::StatusOr<std::optional<std::string>> value = engine->GetState(key);
      ASSERT_TRUE(value.ok()) << value.status();
      EXPECT_EQ(*value, std::nullopt) << key;
    }
  }
}

}  // namespace
}  // namespace idem
