// EngineImpl's timers and stream times (docs/design.md, "Timers"):
// StreamTime, NextTimer and FireTimers, whose rounds run each due timer's
// handler in a BatchTxn and commit its writes and emits with the timer's
// deletion through the same ordered critical section as ProcessBatch
// (QueueCommit), and the timer steps of that commit path.

#include <algorithm>
#include <initializer_list>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/absl_view.h"
#include "engine/batch_txn.h"
#include "engine/coding.h"
#include "engine/engine_impl.h"
#include "engine/handler_scope.h"
#include "engine/record.h"
#include "engine/status_util.h"
#include "engine/timer_record.h"
#include "engine/user_code.h"
#include "engine/validate.h"

namespace idem {
namespace {

// Timers fired per commit at most: large enough to spread a commit's cost,
// small enough that a rerun redoes little.
constexpr size_t kFireRoundTimers = 256;

// A due timer read from the queue, with its queue key.
struct DueTimer {
  std::string queue_key;
  TimerFire fire;
};

// Up to `max` queued timers in [from, end), in key order, as `partition`
// (source, partition and domain set) with their own key, time and payload.
absl::StatusOr<std::vector<DueTimer>> ReadQueued(
    rocksdb::DB* db, rocksdb::ColumnFamilyHandle* family, std::string_view from,
    std::string_view end, size_t max, size_t partition_key_bytes,
    const TimerFire& partition) {
  rocksdb::ReadOptions read;
  const rocksdb::Slice lower = ToSlice(from);
  const rocksdb::Slice upper = ToSlice(end);
  read.iterate_lower_bound = &lower;
  read.iterate_upper_bound = &upper;
  std::unique_ptr<rocksdb::Iterator> it(db->NewIterator(read, family));
  std::vector<DueTimer> due;
  for (it->Seek(lower); it->Valid() && due.size() < max; it->Next()) {
    const std::string_view key(it->key().data(), it->key().size());
    std::optional<QueuedTimer> queued =
        DecodeTimerQueueKey(key, partition_key_bytes);
    if (!queued.has_value()) {
      return absl::DataLossError("undecodable timer queue key");
    }
    DueTimer& timer = due.emplace_back();
    timer.queue_key = std::string(key);
    timer.fire = partition;
    timer.fire.timer_key = std::string(queued->timer_key);
    timer.fire.fire_at = absl::FromUnixMicros(queued->fire_at_micros);
    timer.fire.payload = it->value().ToString();
  }
  if (!it->status().ok()) {
    return FromRocksStatus(it->status(), "reading the timers");
  }
  return due;
}

int64_t ToMicrosSaturated(absl::Time time) {
  if (time == absl::InfiniteFuture()) return INT64_MAX;
  if (time == absl::InfinitePast()) return INT64_MIN;
  return absl::ToUnixMicros(time);
}

absl::Status ValidateDomain(TimeDomain domain, const char* call) {
  if (ValidTimeDomain(domain)) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      call, ": domain ", static_cast<int>(domain), " is not a TimeDomain"));
}

// Whether a timer read from the queue at `queued` is still the one the
// index names, as `layers` (newest first, over the store's index, which
// agrees with the queue read) leave its entry `index_key`.
bool QueuedTimerCurrent(std::initializer_list<const StateLayer*> layers,
                        std::string_view index_key, const TimerIndex& queued) {
  LayeredRead read;
  for (const StateLayer* layer : layers) {
    if (read.Take(layer->Find(index_key))) break;
  }
  if (!read.decided()) return true;  // as the store has it
  if (!read.value().has_value()) return false;
  std::optional<TimerIndex> index = DecodeTimerIndex(*read.value());
  return index.has_value() && index->domain == queued.domain &&
         index->fire_at_micros == queued.fire_at_micros;
}

// The ID a fired timer's emits are named by: a hash of its queue key.
RecordKey FireRecordKey(std::string_view queue_key) {
  return RecordKey::ForStore(
      HashMessageId(absl::StrCat("idem.timer/", AbslView(queue_key))));
}

}  // namespace

std::optional<int64_t> EngineImpl::StreamAdvance(const Message& message,
                                                 int64_t now_micros) {
  if (message.source.empty() || message.event_time == absl::InfinitePast()) {
    return std::nullopt;
  }
  const int64_t micros = ToMicrosSaturated(message.event_time);
  if (micros > now_micros + absl::ToInt64Microseconds(kMaxEventTimeAhead)) {
    return std::nullopt;
  }
  return micros;
}

bool EngineImpl::CarriesStreamTime(absl::Span<const Message> messages,
                                   int64_t now_micros) {
  return std::any_of(messages.begin(), messages.end(),
                     [&](const Message& message) {
                       return StreamAdvance(message, now_micros).has_value();
                     });
}

absl::Status EngineImpl::LoadStreamTimes(Store& store,
                                         absl::Span<const Message> messages) {
  if (store.timers == nullptr) return absl::OkStatus();
  const Message* last = nullptr;  // a batch is mostly runs of one partition
  for (const Message& message : messages) {
    if (message.source.empty() || message.event_time == absl::InfinitePast()) {
      continue;
    }
    if (last != nullptr && message.source == last->source &&
        message.partition == last->partition) {
      continue;
    }
    last = &message;
    absl::StatusOr<int64_t> loaded = stream_times_.Load(
        store.db, store.timers,
        TimerPartitionKey(message.source, message.partition));
    if (!loaded.ok()) return loaded.status();
  }
  return absl::OkStatus();
}

void EngineImpl::TimersLanded(const TimerCommit& timers, bool landed) {
  timer_versions_.Publish(timers.writes.index(), timers.version);
  if (!landed) return;
  for (const std::string& key : timers.writes.QueuedPuts()) {
    timer_cursors_.Lower(key);
  }
}

absl::StatusOr<absl::Time> EngineImpl::StreamTime(std::string_view source,
                                                  int32_t partition) {
  if (absl::Status s = ValidateSource(source, partition); !s.ok()) return s;
  ReadLock lock(this);
  absl::StatusOr<Store*> store = CurrentStore();
  if (!store.ok()) return store.status();
  if ((*store)->timers == nullptr) return absl::InfinitePast();
  std::string value;
  rocksdb::Status s = (*store)->db->Get(
      rocksdb::ReadOptions(), (*store)->timers,
      StreamTimeKey(TimerPartitionKey(source, partition)), &value);
  if (s.IsNotFound()) return absl::InfinitePast();
  if (!s.ok()) return FromRocksStatus(s, "reading a stream time");
  std::optional<int64_t> micros = DecodeStreamTime(value);
  if (!micros.has_value()) {
    return absl::DataLossError(
        absl::StrCat("undecodable stored stream time of source \"",
                     AbslView(source), "\" partition ", partition));
  }
  return absl::FromUnixMicros(*micros);
}

absl::StatusOr<std::optional<TimerFire>> EngineImpl::NextTimer(
    std::string_view source, int32_t partition, TimeDomain domain) {
  if (absl::Status s = ValidateSource(source, partition); !s.ok()) return s;
  if (absl::Status s = ValidateDomain(domain, "NextTimer"); !s.ok()) return s;
  ReadLock lock(this);
  absl::StatusOr<Store*> store = CurrentStore();
  if (!store.ok()) return store.status();
  if ((*store)->timers == nullptr) return std::nullopt;
  const std::string partition_key = TimerPartitionKey(source, partition);
  const std::string start = TimerQueueStart(partition_key, domain);
  const TimerCursors::Cursor cursor = timer_cursors_.Get(start);
  TimerFire where;
  where.source = std::string(source);
  where.partition = partition;
  where.domain = domain;
  absl::StatusOr<std::vector<DueTimer>> next =
      ReadQueued((*store)->db, (*store)->timers, std::max(start, cursor.key),
                 TimerQueueEnd(partition_key, domain, INT64_MAX), 1,
                 partition_key.size(), where);
  if (!next.ok()) return next.status();
  if (next->empty()) return std::nullopt;
  return std::move(next->front().fire);
}

absl::StatusOr<size_t> EngineImpl::FireTimers(std::string_view source,
                                              int32_t partition,
                                              TimeDomain domain,
                                              absl::Time up_to, size_t max,
                                              TimerHandler handler) {
  if (absl::Status s = ValidateSource(source, partition); !s.ok()) return s;
  if (absl::Status s = ValidateDomain(domain, "FireTimers"); !s.ok()) return s;
  if (max == 0) return absl::InvalidArgumentError("FireTimers: max is 0");
  if (absl::Status s = RejectInsideHandler("FireTimers"); !s.ok()) return s;
  if (absl::Status s = RejectIfReadOnly("FireTimers"); !s.ok()) return s;
  std::optional<WalSyncer::CommitScope> in_flight;
  if (options_.durability == Durability::kBuffered) in_flight.emplace(&syncer_);
  if (needs_reopen_.load()) {
    CommitLock commit_lock(this);
    if (absl::Status s = RecoverIfNeeded(); !s.ok()) return s;
  }
  const std::string partition_key = TimerPartitionKey(source, partition);
  TimerFire where;
  where.source = std::string(source);
  where.partition = partition;
  where.domain = domain;
  size_t fired = 0;
  while (fired < max) {
    const size_t wanted = std::min(max - fired, kFireRoundTimers);
    absl::StatusOr<FireRound> round;
    {
      absl::ReaderMutexLock store_lock(&store_mu_);
      absl::StatusOr<Store*> store = CurrentStore();
      if (!store.ok()) return store.status();
      if ((*store)->timers == nullptr) return fired;
      // The round's engine time, registered until its write has landed in
      // a store whose state expires, as a message commit's is
      // (engine/engine_commit.cc).
      CommitTimeWatermark::InFlight commit_time(&watermark_);
      absl::StatusOr<int64_t> engine_now = ReadCommitTime(**store, commit_time);
      if (!engine_now.ok()) return engine_now.status();
      // What is due: up to the domain's time, and up to `up_to`.
      absl::StatusOr<int64_t> now =
          domain == TimeDomain::kProcessing
              ? engine_now
              : stream_times_.Load((*store)->db, (*store)->timers,
                                   partition_key);
      if (!now.ok()) return now.status();
      const int64_t limit = std::min(*now, ToMicrosSaturated(up_to));
      if (limit == kNoStreamTime) return fired;
      round = FireRoundLocked(**store, where, partition_key, limit, wanted,
                              *engine_now, handler);
    }
    if (!round.ok()) return round.status();
    if (round->needs_format != 0) {
      // Once per store: the round runs again on the marked store.
      CommitLock commit_lock(this);
      if (absl::Status s = MarkFormat(round->needs_format); !s.ok()) return s;
      continue;
    }
    fired += round->fired;
    if (!round->failure.ok()) return round->failure;
    if (round->fired < wanted) break;  // none left due
  }
  return fired;
}

absl::StatusOr<EngineImpl::FireRound> EngineImpl::FireRoundLocked(
    Store& store, const TimerFire& partition, const std::string& partition_key,
    int64_t limit_micros, size_t max, int64_t now_micros,
    TimerHandler handler) {
  const std::string queue_start =
      TimerQueueStart(partition_key, partition.domain);
  const std::string queue_end =
      TimerQueueEnd(partition_key, partition.domain, limit_micros);
  const std::string index_start = TimerIndexKey(partition_key, "");
  RerunTurn rerun_turn(this);
  for (int reruns = 0;; ++reruns) {
    if (reruns == kRerunsBeforePriority && !hooks_.no_rerun_priority) {
      rerun_turn.TakePriority();
    }
    const TimerCursors::Cursor cursor = timer_cursors_.Get(queue_start);
    // The partition's index as the commits in flight leave it, read before
    // the queue: a commit registered before this read has landed in what
    // the queue's iterator shows or is in `in_flight`; one registered
    // after it changes a fired timer's index entry only to make the fire
    // run again (its read is noted at this version). So no fired timer's
    // index entry needs reading from the store.
    StateReads timer_reads;
    const StateVersions::RangeRead in_flight = timer_versions_.ReadRange(
        index_start, KeyRangeEnd(index_start), timer_reads);
    absl::StatusOr<std::vector<DueTimer>> due =
        ReadQueued(store.db, store.timers, std::max(queue_start, cursor.key),
                   queue_end, max, partition_key.size(), partition);
    if (!due.ok()) return due.status();
    if (due->empty()) return FireRound();
    // Run the due timers' handlers into one commit.
    CommitBuilder commit(store.state, store.offsets, store.outbox);
    commit.set_state_enveloped(store.format_version >= kStateTtlFormatVersion);
    StateReads reads;
    TimerWrites timers;
    // The fired timers' deletions alone, for the broken variant that writes
    // them apart from their effects.
    TimerWrites split;
    FirePass pass{.store = store,
                  .partition = partition,
                  .partition_key = partition_key,
                  .handler = handler,
                  .in_flight = in_flight,
                  .timer_reads = timer_reads,
                  .commit = commit,
                  .reads = reads,
                  .timers = timers,
                  .split = split,
                  .now_micros = now_micros};
    std::string last_key;
    for (DueTimer& timer : *due) {
      absl::StatusOr<bool> fired = FireOne(pass, timer.fire, timer.queue_key);
      if (!fired.ok()) return fired.status();
      if (!*fired) break;  // a transient failure ends the round
      last_key = timer.queue_key;
    }
    // Values that expire, or merge operands, in an older store: it is
    // marked first (FireTimers), then the round runs again.
    if (const int needed = StateFormatNeeded(store, commit.state());
        needed != 0) {
      FireRound marked;
      marked.needs_format = needed;
      return marked;
    }
    // Validate, build, queue and write it.
    absl::StatusOr<bool> landed = CommitFireRound(pass, rerun_turn);
    if (!landed.ok()) return landed.status();
    if (!*landed) {  // a read went stale: the handlers run again
      handler_reruns_.fetch_add(pass.handlers, std::memory_order_relaxed);
      rerun_turn.Take();
      continue;
    }
    if (!last_key.empty()) {
      timer_cursors_.Advance(queue_start, cursor, last_key);
    }
    timers_fired_.fetch_add(pass.round.fired, std::memory_order_relaxed);
    timers_dead_lettered_.fetch_add(pass.dead, std::memory_order_relaxed);
    outbox_emitted_.fetch_add(commit.emitted(), std::memory_order_relaxed);
    return pass.round;
  }
}

absl::StatusOr<bool> EngineImpl::CommitFireRound(FirePass& pass,
                                                 RerunTurn& rerun_turn) {
  Store& store = pass.store;
  if (!pass.split.empty()) {
    // Deliberately broken: the deletions land before, and apart from,
    // the effects.
    rocksdb::WriteBatch deletions;
    if (absl::Status s =
            pass.split.Build(store.timers, stream_times_, deletions);
        !s.ok()) {
      return s;
    }
    if (absl::Status s = Write(store, &deletions); !s.ok()) return s;
  }
  // As a message commit's (engine/engine_commit.cc).
  rocksdb::WriteBatch batch;
  CommitQueue::Writer writer(&batch);
  InFlightCommit in_flight(&queue_, &versions_, store.db, &writer);
  const uint64_t failed_syncs = parts_.wal_watch->failed_syncs();
  TimerCommit timer_commit{pass.timers, pass.timer_reads, store.timers};
  absl::StatusOr<Queued> queued =
      QueueCommit(pass.commit, pass.reads, StoredOffsets(), batch, batch,
                  in_flight, rerun_turn, &timer_commit);
  if (!queued.ok()) return queued.status();
  if (*queued == Queued::kStale) return false;
  rerun_turn.Release();
  if (absl::Status s = WriteQueued(store, *queued, in_flight, batch,
                                   failed_syncs, timer_commit);
      !s.ok()) {
    return s;
  }
  return true;
}

absl::StatusOr<bool> EngineImpl::FireOne(FirePass& pass, TimerFire& fire,
                                         const std::string& queue_key) {
  BatchTxn txn(&pass.commit.state(), pass.store.db, pass.store.state,
               &versions_, &pass.reads);
  TimerScope scope{.family = pass.store.timers,
                   .versions = &timer_versions_,
                   .reads = &pass.timer_reads,
                   .batch = &pass.timers,
                   .stream_times = &stream_times_,
                   .partition_key = pass.partition_key,
                   .source = {},
                   .partition = 0,
                   .event_micros = kNoStreamTime};
  txn.set_timers(&scope);
  // As a message's handler: reads judge expiry, and writes expire, by the
  // round's engine time.
  txn.set_state_time(HandlerStateTime(pass.store, pass.now_micros));
  const std::string index_key =
      TimerIndexKey(pass.partition_key, fire.timer_key);
  pass.timer_reads.Add(index_key, pass.in_flight.version);
  if (!QueuedTimerCurrent({&pass.timers.index(), &pass.in_flight.in_flight},
                          index_key,
                          TimerIndex{pass.partition.domain,
                                     absl::ToUnixMicros(fire.fire_at)})) {
    // An earlier fire of this round, or a commit in flight, moves or
    // cancels it.
    return true;
  }
  // The deletion first: the handler may set the same key again.
  txn.timer_writes().DeleteQueued(queue_key);
  txn.timer_writes().index().Delete(index_key);
  if (hooks_.fire_outside_commit) {
    pass.split.DeleteQueued(queue_key);
    pass.split.index().Delete(index_key);
  }
  const RecordKey fire_key = FireRecordKey(queue_key);
  absl::Status status;
  ++pass.handlers;
  {
    HandlerScope handler_scope(this, txn, fire_key.hash());
    status = CallUserCode("the timer handler",
                          [&] { return pass.handler(fire, txn); });
  }
  if (!txn.read_error().ok()) return txn.read_error();
  const bool permanent = IsPermanentError(status);
  if (status.ok()) status = txn.Apply(&pass.commit.state());
  if (!status.ok() && !permanent) {
    timer_failures_.fetch_add(1, std::memory_order_relaxed);
    pass.round.failure = std::move(status);
    return false;
  }
  if (permanent) {
    // Dead-lettered: deleted and recorded, without its effects.
    TimerWrites dropped;
    dropped.DeleteQueued(queue_key);
    dropped.index().Delete(index_key);
    dropped.PutDead(
        DeadTimerKey(pass.partition_key, pass.partition.domain,
                     absl::ToUnixMicros(fire.fire_at), fire.timer_key),
        EncodeDeadTimer(status, fire.payload));
    pass.timers.Absorb(std::move(dropped));
    ++pass.dead;
  } else {
    pass.timers.Absorb(std::move(txn.timer_writes()));
    pass.commit.AddEmits(fire_key, std::move(txn.emitted()));
  }
  ++pass.round.fired;
  return true;
}

}  // namespace idem
