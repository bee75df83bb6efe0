// The TTL compaction filters: for the dedupe column family (TtlFilter),
// dropping records whose absolute expiry has passed, and for the state
// family (StateTtlFilter), dropping values that expire
// (engine/state_value.h) once they have; at flush and at compaction.
//
// RocksDB asks the factory for one filter per flush or compaction job, so a
// filter is used by one thread only; the factory is thread-safe. Each filter
// reads the engine's time (engine/engine_clock.h) once, when created, so it
// judges by the same time as the engine's reads, which never goes backwards.
// It fails safe: a value it cannot decode, or a clock that throws or returns
// a non-finite time, keeps the record. It only ever answers kKeep or kRemove
// (which leaves a deletion marker, so older versions of the key stay hidden);
// never kRemoveAndSkipUntil.

#ifndef IDEM_ENGINE_TTL_FILTER_H_
#define IDEM_ENGINE_TTL_FILTER_H_

#include <atomic>
#include <cstdint>
#include <memory>

#include "engine/engine_clock.h"
#include "engine/state_value.h"
#include "idem/clock.h"
#include "rocksdb/compaction_filter.h"

namespace idem {

class TtlFilter : public rocksdb::CompactionFilter {
 public:
  // Drops records with expiry <= now_micros and counts them in `*dropped`,
  // which must outlive the filter.
  TtlFilter(int64_t now_micros, std::atomic<uint64_t>* dropped);

  Decision FilterV2(int level, const rocksdb::Slice& key, ValueType value_type,
                    const rocksdb::Slice& existing_value,
                    std::string* new_value,
                    std::string* skip_until) const override;
  const char* Name() const override { return "idem.TtlFilter"; }

 private:
  const int64_t now_micros_;
  std::atomic<uint64_t>* const dropped_;
};

class TtlFilterFactory : public rocksdb::CompactionFilterFactory {
 public:
  // Filters judge by `time`, the engine's time, shared with the engine.
  explicit TtlFilterFactory(std::shared_ptr<EngineClock> time);
  // Filters judge by an engine time of their own on `clock`, which is
  // borrowed and must outlive the factory (for tools and tests that use the
  // filter without an engine).
  explicit TtlFilterFactory(Clock* clock);

  std::unique_ptr<rocksdb::CompactionFilter> CreateCompactionFilter(
      const rocksdb::CompactionFilter::Context& context) override;

  // Filters at flush as well as at compaction, so records that expire while
  // still in a memtable never reach disk.
  bool ShouldFilterTableFileCreation(
      rocksdb::TableFileCreationReason reason) const override;

  const char* Name() const override { return "idem.TtlFilterFactory"; }

  // The engine time its filters judge by.
  const std::shared_ptr<EngineClock>& time() const { return clock_; }

  // Records dropped by this factory's filters so far.
  uint64_t dropped() const { return dropped_.load(std::memory_order_relaxed); }

 private:
  const std::shared_ptr<EngineClock> clock_;
  std::atomic<uint64_t> dropped_{0};
};

// For the state values whose expiry is at or before `now` (a value without
// one, a merge operand, or any value of a store not yet of format 6, is
// kept as it is): removes those that expired at or before
// `removal_horizon`, and cuts the others down to a marker, the envelope of
// an empty value with the same expiry; counts the removed ones in
// `*dropped`, which must outlive the filter. Either reads as absent
// already, so neither changes a read.
//
// Why not always remove: an operand merged into the value before it
// expired (engine/merge_operator.h) may sit above it, not yet folded in,
// in a file this compaction does not read. Folded onto nothing, it would
// show as a live value of its own; folded onto the marker, it stays part
// of the expired value. Only Engine::CompactExpired sets a horizon: a time
// every earlier commit had reached before it flushed, min(the engine time,
// the oldest commit in flight) (engine/commit_time_watermark.h), so every
// operand written before the horizon is in the files its manual
// compaction carries down, level by level, through the value's own
// compaction, and any operand written at or after it starts a new value
// over a value the horizon removes (that value expired at or before it).
class StateTtlFilter : public rocksdb::CompactionFilter {
 public:
  StateTtlFilter(const StateReadTime& now, int64_t removal_horizon,
                 std::atomic<uint64_t>* dropped);

  Decision FilterV2(int level, const rocksdb::Slice& key, ValueType value_type,
                    const rocksdb::Slice& existing_value,
                    std::string* new_value,
                    std::string* skip_until) const override;
  const char* Name() const override { return "idem.StateTtlFilter"; }

 private:
  const StateReadTime now_;
  const int64_t removal_horizon_;
  std::atomic<uint64_t>* const dropped_;
};

class StateTtlFilterFactory : public rocksdb::CompactionFilterFactory {
 public:
  // Filters judge by `context`'s time and format, read when each is made;
  // a manual compaction's filter also takes its removal horizon.
  explicit StateTtlFilterFactory(std::shared_ptr<StateTtlContext> context);

  std::unique_ptr<rocksdb::CompactionFilter> CreateCompactionFilter(
      const rocksdb::CompactionFilter::Context& context) override;
  bool ShouldFilterTableFileCreation(
      rocksdb::TableFileCreationReason reason) const override;
  const char* Name() const override { return "idem.StateTtlFilterFactory"; }

  // Values dropped by this factory's filters so far.
  uint64_t dropped() const { return dropped_.load(std::memory_order_relaxed); }

 private:
  const std::shared_ptr<StateTtlContext> context_;
  std::atomic<uint64_t> dropped_{0};
};

}  // namespace idem

#endif  // IDEM_ENGINE_TTL_FILTER_H_
