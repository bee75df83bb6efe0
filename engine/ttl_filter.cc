#include "engine/ttl_filter.h"

#include <limits>
#include <string_view>
#include <utility>

#include "engine/record.h"

namespace idem {

TtlFilter::TtlFilter(int64_t now_micros, std::atomic<uint64_t>* dropped)
    : now_micros_(now_micros), dropped_(dropped) {}

rocksdb::CompactionFilter::Decision TtlFilter::FilterV2(
    int /*level*/, const rocksdb::Slice& /*key*/, ValueType value_type,
    const rocksdb::Slice& existing_value, std::string* /*new_value*/,
    std::string* /*skip_until*/) const {
  if (value_type != ValueType::kValue) return Decision::kKeep;
  const std::optional<DedupeRecord> record = DecodeDedupeRecord(
      std::string_view(existing_value.data(), existing_value.size()));
  if (!record.has_value() || !IsExpired(*record, now_micros_)) {
    return Decision::kKeep;
  }
  dropped_->fetch_add(1, std::memory_order_relaxed);
  return Decision::kRemove;
}

TtlFilterFactory::TtlFilterFactory(std::shared_ptr<EngineClock> time)
    : clock_(std::move(time)) {}

TtlFilterFactory::TtlFilterFactory(Clock* clock)
    : TtlFilterFactory(std::make_shared<EngineClock>(clock)) {}

std::unique_ptr<rocksdb::CompactionFilter>
TtlFilterFactory::CreateCompactionFilter(
    const rocksdb::CompactionFilter::Context& /*context*/) {
  // A clock that cannot be read (it threw, or returned a non-finite time)
  // makes the filter keep everything: no record expires before the earliest
  // time.
  absl::StatusOr<int64_t> now_micros = clock_->NowMicros();
  return std::make_unique<TtlFilter>(
      now_micros.ok() ? *now_micros : std::numeric_limits<int64_t>::min(),
      &dropped_);
}

bool TtlFilterFactory::ShouldFilterTableFileCreation(
    rocksdb::TableFileCreationReason reason) const {
  return reason == rocksdb::TableFileCreationReason::kFlush ||
         reason == rocksdb::TableFileCreationReason::kCompaction;
}

StateTtlFilter::StateTtlFilter(const StateReadTime& now,
                               int64_t removal_horizon,
                               std::atomic<uint64_t>* dropped)
    : now_(now), removal_horizon_(removal_horizon), dropped_(dropped) {}

rocksdb::CompactionFilter::Decision StateTtlFilter::FilterV2(
    int /*level*/, const rocksdb::Slice& /*key*/, ValueType value_type,
    const rocksdb::Slice& existing_value, std::string* new_value,
    std::string* /*skip_until*/) const {
  if (value_type != ValueType::kValue) return Decision::kKeep;
  const StateValue value =
      DecodeStateValue(existing_value.ToStringView(), now_.enveloped);
  if (value.expires_micros > now_.now_micros) return Decision::kKeep;
  if (value.expires_micros <= removal_horizon_) {
    dropped_->fetch_add(1, std::memory_order_relaxed);
    return Decision::kRemove;
  }
  if (value.value.empty()) return Decision::kKeep;  // a marker already
  *new_value = EncodeStateValue("", value.expires_micros, /*enveloped=*/true);
  return Decision::kChangeValue;
}

StateTtlFilterFactory::StateTtlFilterFactory(
    std::shared_ptr<StateTtlContext> context)
    : context_(std::move(context)) {}

std::unique_ptr<rocksdb::CompactionFilter>
StateTtlFilterFactory::CreateCompactionFilter(
    const rocksdb::CompactionFilter::Context& context) {
  // A clock that cannot be read makes Now() judge nothing expired.
  return std::make_unique<StateTtlFilter>(context_->Now(),
                                          context.is_manual_compaction
                                              ? context_->removal_horizon.load()
                                              : StateReadTime::kNoExpiryCheck,
                                          &dropped_);
}

bool StateTtlFilterFactory::ShouldFilterTableFileCreation(
    rocksdb::TableFileCreationReason reason) const {
  return reason == rocksdb::TableFileCreationReason::kFlush ||
         reason == rocksdb::TableFileCreationReason::kCompaction;
}

}  // namespace idem
