// The TTL compaction filter for the dedupe column family: drops records whose
// absolute expiry has passed, at flush and at compaction.
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

  // Records dropped by this factory's filters so far.
  uint64_t dropped() const { return dropped_.load(std::memory_order_relaxed); }

 private:
  const std::shared_ptr<EngineClock> clock_;
  std::atomic<uint64_t> dropped_{0};
};

}  // namespace idem

#endif  // IDEM_ENGINE_TTL_FILTER_H_
