// The "windows" crash-test workload, for the durable timers and windows of
// docs/state.md: each message is an event of one of many keys, with an event
// time that runs forward with bounded disorder; the handler counts it in its
// partition's one-second tumbling window (idem::TumblingWindows, with grace)
// and records, in the same commit, whether it was accepted or late. The
// worker fires the due window timers after each batch, as a consumer's
// TimerPump does, and each closing window emits its keys' counts to the
// outbox, in the same write as its timer's deletion.
//
// Verify learns which events were accepted from those records (durable
// state, never the killed worker's memory), and checks every (partition,
// key, window) against the store: closed windows are emitted exactly once
// with exactly their accepted count, open ones hold exactly that count and
// still have their closing timer, no accepted event is in neither, and a
// late event's window had closed by the partition's stream time.
// SelfTest::kFireOutsideCommit deletes fired timers in a write of their own,
// so a crash between the two writes leaves a window open without its timer,
// never to be emitted: Verify reports it.

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "crash/stream.h"
#include "engine/absl_view.h"
#include "idem/crash/harness.h"
#include "idem/merge.h"
#include "idem/outbox.h"
#include "idem/partition_snapshot.h"
#include "idem/windows.h"

namespace idem::crash {
namespace {

// Half the events are of a few hot keys (several to a window), the others
// of many cold ones.
constexpr int kHotKeys = 4;
constexpr int kWindowKeys = 1000;
// Event time advances by kEventStep per message of the stream, and each
// event is up to kDisorder earlier than that: with the grace period, a few
// in a hundred arrive after their window closed.
constexpr absl::Duration kEventStep = absl::Milliseconds(10);
constexpr absl::Duration kDisorder = absl::Milliseconds(800);
constexpr absl::Duration kWindowSize = absl::Seconds(1);
constexpr absl::Duration kWindowGrace = absl::Milliseconds(300);
// Event times lie in the past, well within kMaxEventTimeAhead of any clock.
const absl::Time kFirstEvent = absl::FromUnixSeconds(1'700'000'000);
constexpr char kWindowsName[] = "windows";
constexpr char kWindowCounts[] = "window-counts";
constexpr char kWindowStartHeader[] = "idem.window.start";

// The handler's record of what it did with a message: "accepted <p>" or
// "late <p>", p the message's partition.
std::string WindowMarkKey(std::string_view id) {
  return absl::StrCat("windows-mark/", AbslView(id));
}

// The key a window counts, and its emitted key: the event's key and its
// partition (the stream spreads a key's events over partitions, and each
// partition has its own windows).
std::string WindowedKey(std::string_view key, int32_t partition) {
  return absl::StrCat(AbslView(key), "@", partition);
}

// Windows are [k * size, (k + 1) * size) since the epoch (the events here
// are all after it).
int64_t WindowStartMicros(absl::Time event_time) {
  const int64_t t = absl::ToUnixMicros(event_time);
  return t - t % absl::ToInt64Microseconds(kWindowSize);
}

absl::Time WindowCloses(int64_t start_micros) {
  return absl::FromUnixMicros(start_micros) + kWindowSize + kWindowGrace;
}

// One (partition, windowed key, window start).
using WindowCell = std::tuple<int32_t, std::string, int64_t>;

std::string CellName(const WindowCell& cell) {
  const auto& [partition, key, start] = cell;
  return absl::StrFormat("partition %d key %s window [%d, %d)", partition, key,
                         start, start + absl::ToInt64Microseconds(kWindowSize));
}

// What the applied messages' records say: the accepted count of each cell,
// and per partition the latest closing time of a window an event found
// closed.
struct Accepted {
  std::map<WindowCell, int64_t> counts;
  std::map<int32_t, absl::Time> late_closes;
};

// What the store holds of one partition's windows: the open windows'
// counts by their state-key prefix, and each window timer's start by that
// prefix.
struct OpenWindows {
  std::map<std::string, std::map<std::string, int64_t>> counts;
  std::map<std::string, int64_t> timers;
  absl::Time stream_time = absl::InfinitePast();
};

class WindowsWorkload : public Workload {
 public:
  WindowsWorkload() : windows_(MakeWindows()) {}

  std::string name() const override { return "windows"; }

  std::vector<StreamMessage> Generate(uint64_t seed,
                                      size_t count) const override {
    std::mt19937_64 rng(seed ^ 0x77696e646f777300ull);
    const int64_t disorder = absl::ToInt64Microseconds(kDisorder);
    std::vector<StreamMessage> messages;
    messages.reserve(count);
    for (size_t i = 0; i < count; ++i) {
      const uint64_t key =
          rng() % 2 == 0 ? rng() % kHotKeys : rng() % kWindowKeys;
      const absl::Time at =
          kFirstEvent + kEventStep * static_cast<int64_t>(i) -
          absl::Microseconds(static_cast<int64_t>(rng() % (disorder + 1)));
      StreamMessage& m = messages.emplace_back();
      m.id = absl::StrCat("windows-", seed, "-", i);
      m.payload = absl::StrFormat("key-%04d", key);
      m.event_time = at;
    }
    return messages;
  }

  absl::Status Handle(const Message& message, Txn& txn) const override {
    if (!windows_.ok()) return windows_.status();
    absl::StatusOr<WindowAdd> added = windows_->Add(
        message, txn, WindowedKey(message.payload, message.partition));
    if (!added.ok()) return added.status();
    txn.Put(WindowMarkKey(message.id),
            absl::StrCat(*added == WindowAdd::kAccepted ? "accepted " : "late ",
                         message.partition));
    return absl::OkStatus();
  }

  bool fires_timers() const override { return true; }

  absl::Status FireTimer(const TimerFire& fire, Txn& txn) const override {
    if (!windows_.ok()) return windows_.status();
    absl::StatusOr<bool> closed = windows_->Close(fire, txn);
    if (!closed.ok()) return closed.status();
    if (!*closed) {
      return absl::InternalError(absl::StrCat(
          "timer ", absl::CEscape(fire.timer_key), " is no window's"));
    }
    return absl::OkStatus();
  }

  absl::StatusOr<bool> EffectPresent(
      Engine& engine, const StreamMessage& message) const override {
    absl::StatusOr<std::optional<std::string>> v =
        engine.GetState(WindowMarkKey(message.id));
    if (!v.ok()) return v.status();
    return v->has_value();
  }

  absl::Status Verify(Engine& engine,
                      absl::Span<const StreamMessage> applied) const override {
    absl::StatusOr<Accepted> accepted = ReadAccepted(engine, applied);
    if (!accepted.ok()) return accepted.status();
    absl::StatusOr<std::map<WindowCell, std::vector<int64_t>>> emitted =
        ReadEmitted(engine);
    if (!emitted.ok()) return emitted.status();
    // Every partition an event was applied in or a window emitted from.
    std::map<int32_t, OpenWindows> partitions;
    for (const auto& [cell, count] : accepted->counts) {
      partitions[std::get<0>(cell)];
    }
    for (const auto& [partition, closes] : accepted->late_closes) {
      partitions[partition];
    }
    for (const auto& [cell, values] : *emitted) partitions[std::get<0>(cell)];
    for (auto& [partition, open] : partitions) {
      absl::StatusOr<OpenWindows> read = ReadOpenWindows(engine, partition);
      if (!read.ok()) return read.status();
      open = *std::move(read);
    }
    if (absl::Status s = CheckLate(*accepted, partitions); !s.ok()) return s;
    if (absl::Status s = CheckEmitted(*accepted, *emitted, partitions);
        !s.ok()) {
      return s;
    }
    return CheckOpen(*accepted, *emitted, partitions);
  }

 private:
  static absl::StatusOr<TumblingWindows> MakeWindows() {
    TumblingWindowOptions options;
    options.size = kWindowSize;
    options.grace = kWindowGrace;
    options.name = kWindowsName;
    options.destination = kWindowCounts;
    return TumblingWindows::Create(options);
  }

  // The accepted count of each cell, from the applied messages' records.
  static absl::StatusOr<Accepted> ReadAccepted(
      Engine& engine, absl::Span<const StreamMessage> applied) {
    Accepted accepted;
    for (const StreamMessage& m : applied) {
      absl::StatusOr<std::optional<std::string>> mark =
          engine.GetState(WindowMarkKey(m.id));
      if (!mark.ok()) return mark.status();
      const std::string record = mark->value_or("<none>");
      int32_t partition = 0;
      const bool is_accepted = absl::StartsWith(record, "accepted ");
      const bool is_late = absl::StartsWith(record, "late ");
      if ((!is_accepted && !is_late) ||
          !absl::SimpleAtoi(record.substr(record.find(' ') + 1), &partition)) {
        return absl::DataLossError(absl::StrCat(
            m.id, " is applied but its record says '", record, "'"));
      }
      const int64_t start = WindowStartMicros(m.event_time);
      if (is_accepted) {
        ++accepted
              .counts[{partition, WindowedKey(m.payload, partition), start}];
      } else {
        absl::Time& closes = accepted.late_closes[partition];
        closes = std::max(closes, WindowCloses(start));
      }
    }
    return accepted;
  }

  // The counts in the outbox, by cell (each emit once, in position order).
  static absl::StatusOr<std::map<WindowCell, std::vector<int64_t>>> ReadEmitted(
      Engine& engine) {
    constexpr size_t kPage = 4096;
    std::map<WindowCell, std::vector<int64_t>> emitted;
    absl::StatusOr<std::vector<OutboxEntry>> page = engine.ReadOutbox(kPage);
    while (page.ok() && !page->empty()) {
      for (const OutboxEntry& e : *page) {
        absl::StatusOr<std::pair<WindowCell, int64_t>> count = ParseEmit(e);
        if (!count.ok()) return count.status();
        emitted[count->first].push_back(count->second);
      }
      page = engine.ReadOutboxAfter(page->back().position, kPage);
    }
    if (!page.ok()) return page.status();
    return emitted;
  }

  // An outbox entry's cell and count.
  static absl::StatusOr<std::pair<WindowCell, int64_t>> ParseEmit(
      const OutboxEntry& e) {
    int64_t start = 0;
    int64_t count = 0;
    int32_t partition = 0;
    bool has_start = false;
    for (const auto& [name, value] : e.headers) {
      if (name == kWindowStartHeader) {
        has_start = absl::SimpleAtoi(value, &start);
      }
    }
    const size_t at = e.key.rfind('@');
    if (e.destination != kWindowCounts || !has_start ||
        at == std::string::npos ||
        !absl::SimpleAtoi(e.key.substr(at + 1), &partition) ||
        !absl::SimpleAtoi(e.value, &count)) {
      return absl::DataLossError(absl::StrCat("outbox entry ", e.position, " (",
                                              e.destination, ", ", e.key, ", ",
                                              e.value, ") is no window count"));
    }
    return std::make_pair(WindowCell{partition, e.key, start}, count);
  }

  // The partition's open windows: their counts and timers, and its stream
  // time, from one consistent export.
  static absl::StatusOr<OpenWindows> ReadOpenWindows(Engine& engine,
                                                     int32_t partition) {
    absl::StatusOr<PartitionSnapshot> snapshot =
        engine.ExportPartition(kStreamSource, partition);
    if (!snapshot.ok()) return snapshot.status();
    // A window's state keys and its timer's key start with the same bytes:
    // the name, '/', and 8 bytes naming the window.
    const std::string name = absl::StrCat(kWindowsName, "/");
    const size_t prefix_bytes = name.size() + 8;
    OpenWindows open;
    open.stream_time = snapshot->stream_time;
    for (const auto& [key, value] : snapshot->entries) {
      std::optional<int64_t> count = ReadInt64(value);
      if (!absl::StartsWith(key, name) || key.size() <= prefix_bytes ||
          !count.has_value()) {
        return absl::DataLossError(absl::StrCat(
            "partition ", partition, " holds state that is no window count"));
      }
      open.counts[key.substr(0, prefix_bytes)][key.substr(prefix_bytes)] =
          *count;
    }
    for (const TimerFire& timer : snapshot->timers) {
      if (timer.domain != TimeDomain::kEvent ||
          timer.timer_key.size() != prefix_bytes ||
          !absl::StartsWith(timer.timer_key, name)) {
        return absl::DataLossError(absl::StrCat(
            "partition ", partition, " has a timer, ",
            absl::CEscape(timer.timer_key), ", that is no window's"));
      }
      open.timers[timer.timer_key] =
          absl::ToUnixMicros(timer.fire_at - kWindowSize - kWindowGrace);
    }
    return open;
  }

  // Each emitted cell: emitted once, with its accepted count, and its
  // window closed (no timer left to fire it again).
  static absl::Status CheckEmitted(
      const Accepted& accepted,
      const std::map<WindowCell, std::vector<int64_t>>& emitted,
      const std::map<int32_t, OpenWindows>& partitions) {
    for (const auto& [cell, values] : emitted) {
      auto it = accepted.counts.find(cell);
      const int64_t want = it == accepted.counts.end() ? 0 : it->second;
      if (values.size() != 1) {
        return absl::DataLossError(absl::StrCat(CellName(cell), " was emitted ",
                                                values.size(), " times"));
      }
      if (values[0] != want) {
        return absl::DataLossError(
            absl::StrCat(CellName(cell), " was emitted with count ", values[0],
                         ", but ", want, " of its events were accepted"));
      }
      for (const auto& [prefix, start] :
           partitions.at(std::get<0>(cell)).timers) {
        if (start == std::get<2>(cell)) {
          return absl::DataLossError(absl::StrCat(
              CellName(cell), " was emitted but its window's timer is set"));
        }
      }
    }
    return absl::OkStatus();
  }

  // Each open window has its closing timer and holds exactly the accepted
  // count of each of its keys; and no accepted event is in neither an open
  // window nor an emitted one.
  static absl::Status CheckOpen(
      const Accepted& accepted,
      const std::map<WindowCell, std::vector<int64_t>>& emitted,
      const std::map<int32_t, OpenWindows>& partitions) {
    // The open counts by cell, for the windows whose timer is set.
    std::map<WindowCell, int64_t> open;
    for (const auto& [partition, windows] : partitions) {
      for (const auto& [prefix, counts] : windows.counts) {
        auto timer = windows.timers.find(prefix);
        if (timer == windows.timers.end()) {
          return absl::DataLossError(absl::StrCat(
              "partition ", partition, " holds an open window (key ",
              counts.begin()->first, " counts ", counts.begin()->second,
              ") whose closing timer is gone: it will never be emitted"));
        }
        for (const auto& [key, count] : counts) {
          open[{partition, key, timer->second}] = count;
        }
      }
    }
    for (const auto& [cell, count] : open) {
      auto it = accepted.counts.find(cell);
      const int64_t want = it == accepted.counts.end() ? 0 : it->second;
      if (count != want || emitted.contains(cell)) {
        return absl::DataLossError(
            absl::StrCat(CellName(cell), " is open with count ", count,
                         ", but ", want, " of its events were accepted",
                         emitted.contains(cell) ? " and it was emitted" : ""));
      }
    }
    for (const auto& [cell, want] : accepted.counts) {
      if (!open.contains(cell) && !emitted.contains(cell)) {
        return absl::DataLossError(
            absl::StrCat(CellName(cell), ": ", want,
                         " accepted events are neither in an open window "
                         "nor emitted"));
      }
    }
    return absl::OkStatus();
  }

  // An event recorded late found its window closed: the partition's stream
  // time (which never goes back) is at or past the window's close.
  static absl::Status CheckLate(
      const Accepted& accepted,
      const std::map<int32_t, OpenWindows>& partitions) {
    for (const auto& [partition, closes] : accepted.late_closes) {
      const absl::Time stream_time = partitions.at(partition).stream_time;
      if (stream_time < closes) {
        return absl::DataLossError(
            absl::StrCat("partition ", partition,
                         " has an event recorded late in a window "
                         "closing at ",
                         absl::FormatTime(closes), ", but its stream time is ",
                         absl::FormatTime(stream_time)));
      }
    }
    return absl::OkStatus();
  }

  const absl::StatusOr<TumblingWindows> windows_;
};

}  // namespace

std::unique_ptr<Workload> NewWindowsWorkload() {
  return std::make_unique<WindowsWorkload>();
}

}  // namespace idem::crash
