// WindowBed: an engine (test::EngineHarness) fed events with event times on
// partitions of one source, whose due event-time timers are fired through a
// window set's Close, and whose outbox is read back as windows. Shared by
// the tests of idem/windows.h. Not thread-safe, except Event, which may be
// called from several threads at once.

#ifndef IDEM_TESTS_TESTING_WINDOW_TEST_UTIL_H_
#define IDEM_TESTS_TESTING_WINDOW_TEST_UTIL_H_

#include <atomic>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "engine/engine_hooks.h"
#include "gtest/gtest.h"
#include "idem/engine.h"
#include "idem/windows.h"
#include "tests/testing/engine_test_util.h"

namespace idem::test {

// A minute boundary: windows of one minute (or of ten seconds) start here.
inline const absl::Time kMinute0 = absl::FromUnixSeconds(1'699'999'980);

// Adds one event to windows, in its message's handler.
using WindowAddFn =
    std::function<absl::StatusOr<WindowAdd>(const Message&, Txn&)>;
// A window set's Close.
using WindowCloseFn =
    std::function<absl::StatusOr<bool>(const TimerFire&, Txn&)>;

// What a window emitted: key, value and the window's bounds.
struct Emitted {
  std::string message_id;
  std::string destination;
  std::string key;
  std::string value;
  std::string start;       // header idem.window.start
  std::string end;         // header idem.window.end
  std::string event_time;  // header idem.event.time (late events)
};

// Microseconds since the epoch in decimal, as window headers carry them.
inline std::string MicrosText(absl::Time t) {
  return absl::StrCat(absl::ToUnixMicros(t));
}

class WindowBed {
 public:
  static constexpr char kSource[] = "clicks";

  // `hooks`: a deliberately broken engine (engine/engine_hooks.h).
  explicit WindowBed(const EngineHooks& hooks = {})
      : harness_(Options(), EngineHarness::Storage::kDefault, hooks) {}

  absl::Status Open() { return harness_.Open(); }
  Engine& engine() { return harness_.engine(); }
  EngineHarness& harness() { return harness_; }
  // The offset of the next Event (they count up from 0): past an imported
  // partition's.
  void set_next_offset(int64_t offset) { next_ = offset; }

  // Processes a new message with event time kMinute0 + `at` on `partition`
  // whose handler calls `add`; returns what `add` said, or the message's
  // error.
  absl::StatusOr<WindowAdd> Event(const WindowAddFn& add, absl::Duration at,
                                  int32_t partition = 0) {
    WindowAdd added = WindowAdd::kLate;
    // Message views its ID: keep the bytes alive through the call.
    const int64_t n = next_.fetch_add(1);
    const std::string id = absl::StrCat("e", n, "-p", partition);
    Message m{.id = id,
              .source = kSource,
              .partition = partition,
              .offset = n,
              .event_time = kMinute0 + at};
    absl::StatusOr<Result> r =
        engine().Process(m, [&](const Message& msg, Txn& txn) -> absl::Status {
          absl::StatusOr<WindowAdd> a = add(msg, txn);
          if (!a.ok()) return a.status();
          added = *a;
          return absl::OkStatus();
        });
    if (!r.ok()) return r.status();
    if (r->outcome != Outcome::kProcessed) return r->error;
    return added;
  }

  // Fires the due event-time timers of `partition` through `close` (a
  // timer it does not know fails the fire); returns how many fired, or the
  // first error.
  absl::StatusOr<size_t> Fire(const WindowCloseFn& close,
                              int32_t partition = 0) {
    return engine().FireTimers(
        kSource, partition, TimeDomain::kEvent, absl::InfiniteFuture(), 1000,
        [&](const TimerFire& fire, Txn& txn) -> absl::Status {
          absl::StatusOr<bool> ours = close(fire, txn);
          if (!ours.ok()) return ours.status();
          return *ours ? absl::OkStatus()
                       : absl::InternalError("not a window's timer");
        });
  }

  // Event with `windows`' Add of `key` (amount 1); fails the test on an
  // error.
  WindowAdd Add(const WindowSet& windows, const std::string& key,
                absl::Duration at, int32_t partition = 0) {
    absl::StatusOr<WindowAdd> added = Event(
        [&](const Message& m, Txn& txn) { return windows.Add(m, txn, key); },
        at, partition);
    EXPECT_TRUE(added.ok()) << added.status();
    return added.value_or(WindowAdd::kLate);
  }

  // Fire through `windows`' Close; fails the test on an error.
  size_t Close(const WindowSet& windows, int32_t partition = 0) {
    absl::StatusOr<size_t> fired = Fire(
        [&](const TimerFire& f, Txn& txn) { return windows.Close(f, txn); },
        partition);
    EXPECT_TRUE(fired.ok()) << fired.status();
    return fired.value_or(0);
  }

  // Every outbox entry, as windows emit them.
  std::vector<Emitted> Outbox() {
    std::vector<Emitted> out;
    absl::StatusOr<std::vector<OutboxEntry>> entries =
        engine().ReadOutbox(100000);
    EXPECT_TRUE(entries.ok()) << entries.status();
    if (!entries.ok()) return out;
    for (const OutboxEntry& e : *entries) {
      Emitted w{.message_id = e.message_id,
                .destination = e.destination,
                .key = e.key,
                .value = e.value};
      for (const auto& [name, value] : e.headers) {
        if (name == "idem.window.start") w.start = value;
        if (name == "idem.window.end") w.end = value;
        if (name == "idem.event.time") w.event_time = value;
      }
      out.push_back(std::move(w));
    }
    return out;
  }

  // The values emitted to `destination`, by (window start, key); fails the
  // test if one (window, key) was emitted twice.
  std::map<std::pair<std::string, std::string>, std::string> Windows(
      const std::string& destination) {
    std::map<std::pair<std::string, std::string>, std::string> out;
    for (const Emitted& e : Outbox()) {
      if (e.destination != destination) continue;
      EXPECT_TRUE(out.emplace(std::pair{e.start, e.key}, e.value).second)
          << "emitted twice: window " << e.start << " key " << e.key;
    }
    return out;
  }

 private:
  EngineHarness harness_;
  std::atomic<int64_t> next_{0};
};

}  // namespace idem::test

#endif  // IDEM_TESTS_TESTING_WINDOW_TEST_UTIL_H_
