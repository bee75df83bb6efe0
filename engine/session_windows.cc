// idem/windows.h's session windows.
//
// A session's state, within its partition (PartitionTxn), with K the
// event key as u32 big-endian length + bytes and times as
// AppendOrderedInt64 writes them (engine/coding.h):
//   <name> "/s" K start -> its last event time; also its timer's key
//   <name> "/a" K start -> its aggregate (merged by `aggregation`)
// so one key's sessions are one range, in start order. Open sessions of a
// key never overlap and lie at least `gap` apart, so their ends rise with
// their starts, and so do their closing times: a reverse scan from the
// event on meets the sessions it may join first and can stop at the first
// that is too far back or already closed.

#include <algorithm>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/absl_view.h"
#include "engine/coding.h"
#include "engine/window_spec.h"
#include "idem/partition_state.h"
#include "idem/windows.h"

namespace idem {
namespace {

// A session as stored: [start, end] are its first and last event times.
struct Session {
  int64_t start = 0;
  int64_t end = 0;
};

// How many times Add re-plans when the stream time passes a session it
// planned to join before it confirmed the session open.
constexpr int kMaxPlans = 3;

class SessionKeys {
 public:
  SessionKeys(const WindowSpec& spec, std::string_view key)
      : bounds_prefix_(Prefix(spec, 's', key)),
        aggregate_prefix_(Prefix(spec, 'a', key)) {}

  // The prefix of every session of the key, in the partition.
  const std::string& sessions() const { return bounds_prefix_; }
  std::string Bounds(int64_t start) const {
    return WithTime(bounds_prefix_, start);
  }
  std::string Aggregate(int64_t start) const {
    return WithTime(aggregate_prefix_, start);
  }

  static std::string Prefix(const WindowSpec& spec, char kind,
                            std::string_view key) {
    std::string prefix = absl::StrCat(spec.name, "/");
    prefix.push_back(kind);
    char length[4];
    PutBigEndian32(length, static_cast<uint32_t>(key.size()));
    prefix.append(length, sizeof(length));
    prefix.append(key);
    return prefix;
  }

 private:
  static std::string WithTime(const std::string& prefix, int64_t micros) {
    std::string out = prefix;
    AppendOrderedInt64(out, micros);
    return out;
  }

  const std::string bounds_prefix_;
  const std::string aggregate_prefix_;
};

std::string EncodeEnd(int64_t end) {
  std::string out;
  AppendOrderedInt64(out, end);
  return out;
}

class SessionAdd {
 public:
  SessionAdd(const WindowSpec& spec, const Message& message, Txn& txn,
             std::string_view key, std::string_view operand)
      : spec_(spec),
        message_(message),
        txn_(txn),
        partition_(txn, message.source, message.partition),
        key_(key),
        operand_(operand),
        keys_(spec, key),
        t_(absl::ToUnixMicros(message.event_time)) {}

  absl::StatusOr<WindowAdd> Run() {
    absl::StatusOr<std::vector<Session>> joined = JoinedSessions();
    if (!joined.ok()) return joined.status();
    Session merged{t_, t_};
    for (const Session& s : *joined) {
      merged.start = std::min(merged.start, s.start);
      merged.end = std::max(merged.end, s.end);
    }
    absl::Status armed =
        txn_.SetTimer(keys_.Bounds(merged.start), TimeDomain::kEvent,
                      absl::FromUnixMicros(CloseOf(merged)));
    if (absl::IsOutOfRange(armed)) return Late();  // joins nothing, closed
    if (!armed.ok()) return armed;
    return Fold(*joined, merged);
  }

 private:
  int64_t CloseOf(const Session& s) const {
    return s.end + spec_.size_us + spec_.grace_us;
  }

  // The open sessions the event joins, confirmed open (ConfirmOpen); read
  // again if the stream time this handler sees passed one meanwhile.
  absl::StatusOr<std::vector<Session>> JoinedSessions() {
    for (int plan = 1;; ++plan) {
      absl::StatusOr<std::vector<Session>> open = OpenSessionsNear();
      if (!open.ok()) return open.status();
      absl::Status confirmed = ConfirmOpen(*open);
      if (confirmed.ok()) return open;
      if (!absl::IsOutOfRange(confirmed)) return confirmed;
      if (plan == kMaxPlans) {
        return absl::AbortedError(
            "SessionWindows::Add: the stream time kept passing the sessions "
            "the event joins; try again");
      }
    }
  }

  // Reports the event late: to the side output, as the session it alone
  // would have opened.
  absl::StatusOr<WindowAdd> Late() {
    if (absl::Status s =
            EmitLate(spec_, txn_, message_, key_, operand_, t_, t_);
        !s.ok()) {
      return s;
    }
    return WindowAdd::kLate;
  }

  // The key's open sessions the event joins (those less than `gap` from
  // it), earliest first.
  absl::StatusOr<std::vector<Session>> OpenSessionsNear() {
    const absl::Time now = txn_.stream_time();
    const int64_t stream = now == absl::InfinitePast()
                               ? std::numeric_limits<int64_t>::min()
                               : absl::ToUnixMicros(now);
    const int64_t gap = spec_.size_us;
    std::vector<Session> near;
    absl::Status bad;
    ScanOptions reverse;
    reverse.reverse = true;
    const size_t prefix = keys_.sessions().size();
    absl::Status scanned = partition_.Scan(
        keys_.sessions(), keys_.Bounds(t_ + gap),
        [&](std::string_view k, std::string_view v) {
          if (k.size() != prefix + 8 || v.size() != 8) {
            bad = absl::DataLossError(
                "SessionWindows::Add: stored session bounds do not decode");
            return false;
          }
          Session s{GetOrderedInt64(k.data() + prefix),
                    GetOrderedInt64(v.data())};
          if (s.end <= t_ - gap || CloseOf(s) <= stream) return false;
          near.push_back(s);
          return true;
        },
        reverse);
    if (!scanned.ok()) return scanned;
    if (!bad.ok()) return bad;
    std::reverse(near.begin(), near.end());
    return near;
  }

  // Sets each joined session's timer again where it is, so the commit runs
  // again if a concurrent commit moves the stream time past it (a session
  // closed in between cannot be joined). kOutOfRange if the stream time
  // this handler sees has already passed one.
  absl::Status ConfirmOpen(const std::vector<Session>& sessions) {
    if (spec_.hooks.skip_confirm_open) return absl::OkStatus();
    for (const Session& s : sessions) {
      if (absl::Status st =
              txn_.SetTimer(keys_.Bounds(s.start), TimeDomain::kEvent,
                            absl::FromUnixMicros(CloseOf(s)));
          !st.ok()) {
        return st;
      }
    }
    return absl::OkStatus();
  }

  // Writes the merged session: absorbs the joined sessions that do not
  // start it, records its end, and merges the event's operand in. Its
  // timer is set.
  absl::StatusOr<WindowAdd> Fold(const std::vector<Session>& joined,
                                 const Session& merged) {
    const std::string survivor = keys_.Aggregate(merged.start);
    for (const Session& s : joined) {
      if (s.start == merged.start) continue;
      if (absl::Status st = Absorb(s, survivor); !st.ok()) return st;
    }
    const bool extends = joined.empty() ||
                         joined.front().start != merged.start ||
                         joined.front().end != merged.end;
    if (extends) {
      partition_.Put(keys_.Bounds(merged.start), EncodeEnd(merged.end));
    }
    if (absl::Status s =
            partition_.Merge(survivor, spec_.aggregation, operand_);
        !s.ok()) {
      return s;
    }
    return WindowAdd::kAccepted;
  }

  // Folds session `s`'s aggregate into `survivor` and deletes `s`, its
  // state and its timer.
  absl::Status Absorb(const Session& s, const std::string& survivor) {
    const std::string aggregate = keys_.Aggregate(s.start);
    absl::StatusOr<std::optional<std::string>> value =
        partition_.Get(aggregate);
    if (!value.ok()) return value.status();
    if (value->has_value()) {
      if (absl::Status st =
              partition_.Merge(survivor, spec_.aggregation, **value);
          !st.ok()) {
        return st;
      }
    }
    if (spec_.hooks.keep_merged_sessions) return absl::OkStatus();
    partition_.Delete(keys_.Bounds(s.start));
    partition_.Delete(aggregate);
    if (spec_.hooks.keep_merged_timers) return absl::OkStatus();
    return txn_.CancelTimer(keys_.Bounds(s.start));
  }

  const WindowSpec& spec_;
  const Message& message_;
  Txn& txn_;
  PartitionTxn partition_;
  const std::string_view key_;
  const std::string_view operand_;
  const SessionKeys keys_;
  const int64_t t_;
};

}  // namespace

absl::StatusOr<WindowAdd> AddToSession(const WindowSpec& spec,
                                       const Message& message, Txn& txn,
                                       std::string_view key,
                                       std::string_view operand) {
  if (key.size() > std::numeric_limits<uint32_t>::max()) {
    return absl::InvalidArgumentError(
        "SessionWindows::Add: a key is at most 4 GiB");
  }
  return SessionAdd(spec, message, txn, key, operand).Run();
}

absl::StatusOr<bool> CloseSession(const WindowSpec& spec, const TimerFire& fire,
                                  Txn& txn) {
  // The timer key: <name> "/s" length key start.
  const std::string head = absl::StrCat(spec.name, "/s");
  const std::string_view timer = fire.timer_key;
  if (fire.domain != TimeDomain::kEvent || timer.size() < head.size() + 4 + 8 ||
      timer.compare(0, head.size(), head) != 0) {
    return false;
  }
  const uint32_t length = GetBigEndian32(timer.data() + head.size());
  if (timer.size() != head.size() + 4 + length + 8) return false;
  const std::string_view key = timer.substr(head.size() + 4, length);
  const int64_t start = GetOrderedInt64(timer.data() + timer.size() - 8);
  const SessionKeys keys(spec, key);
  PartitionTxn partition(txn, fire.source, fire.partition);
  absl::StatusOr<std::optional<std::string>> end =
      partition.Get(keys.Bounds(start));
  if (!end.ok()) return end.status();
  if (!end->has_value()) return true;  // absorbed by another session
  if ((*end)->size() != 8) {
    return absl::DataLossError(
        "SessionWindows::Close: stored session bounds do not decode");
  }
  absl::StatusOr<std::optional<std::string>> aggregate =
      partition.Get(keys.Aggregate(start));
  if (!aggregate.ok()) return aggregate.status();
  if (aggregate->has_value()) {
    if (absl::Status s = EmitWindow(spec, txn, key, **aggregate, start,
                                    GetOrderedInt64((*end)->data()));
        !s.ok()) {
      return s;
    }
  }
  partition.Delete(keys.Bounds(start));
  partition.Delete(keys.Aggregate(start));
  return true;
}

absl::StatusOr<SessionWindows> CreateSessionWindowsWithHooks(
    SessionWindowOptions options, const WindowHooks& hooks) {
  absl::StatusOr<int64_t> gap =
      WindowLengthMicros("SessionWindowOptions::gap", options.gap);
  if (!gap.ok()) return gap.status();
  absl::StatusOr<std::shared_ptr<WindowSpec>> spec =
      NewWindowSpec("SessionWindows", "SessionWindowOptions", options);
  if (!spec.ok()) return spec.status();
  (*spec)->sessions = true;
  (*spec)->size_us = *gap;
  (*spec)->hop_us = *gap;
  (*spec)->hooks = hooks;
  return SessionWindows(*std::move(spec));
}

absl::StatusOr<SessionWindows> SessionWindows::Create(
    SessionWindowOptions options) {
  return CreateSessionWindowsWithHooks(std::move(options), WindowHooks());
}

}  // namespace idem
