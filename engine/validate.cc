#include "engine/validate.h"

#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "engine/state_value.h"

namespace idem {

absl::Status ValidateOptions(const Options& options) {
  if (options.dedupe_window <= absl::ZeroDuration() ||
      options.dedupe_window == absl::InfiniteDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("dedupe_window must be positive and finite, got ",
                     absl::FormatDuration(options.dedupe_window)));
  }
  if (absl::Status s = ValidateTtl(options.state_ttl, "state_ttl"); !s.ok()) {
    return s;
  }
  if (options.durability != Durability::kSync &&
      options.durability != Durability::kBuffered) {
    return absl::InvalidArgumentError("durability is not a Durability value");
  }
  if (options.dedupe_scope != DedupeScope::kStore &&
      options.dedupe_scope != DedupeScope::kPartition) {
    return absl::InvalidArgumentError(
        "dedupe_scope is not a DedupeScope value");
  }
  if (options.shards < 1 || options.shards > kMaxShards) {
    return absl::InvalidArgumentError(absl::StrCat(
        "shards must be in [1, ", kMaxShards, "], got ", options.shards));
  }
  if (options.shards > 1 && options.dedupe_scope != DedupeScope::kPartition) {
    return absl::InvalidArgumentError(absl::StrCat(
        "shards = ", options.shards,
        " needs dedupe_scope = kPartition: each message ID is deduplicated "
        "within its partition's shard, so a store-wide scope cannot hold"));
  }
  if (options.bloom_bits_per_key < 0 || options.bloom_bits_per_key > 64) {
    return absl::InvalidArgumentError(
        absl::StrCat("bloom_bits_per_key must be in [0, 64], got ",
                     options.bloom_bits_per_key));
  }
  if (options.max_background_jobs < kMinBackgroundJobs ||
      options.max_background_jobs > kMaxBackgroundJobs) {
    return absl::InvalidArgumentError(absl::StrCat(
        "max_background_jobs must be in [", kMinBackgroundJobs, ", ",
        kMaxBackgroundJobs, "], got ", options.max_background_jobs));
  }
  if (options.expiry_buckets < 0 || options.expiry_buckets > 64) {
    return absl::InvalidArgumentError(absl::StrCat(
        "expiry_buckets must be in [0, 64], got ", options.expiry_buckets));
  }
  if (options.expiry_buckets > 0 &&
      options.dedupe_window / options.expiry_buckets < absl::Seconds(1)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "dedupe_window / expiry_buckets must be at least 1s, got ",
        absl::FormatDuration(options.dedupe_window / options.expiry_buckets)));
  }
  if (options.write_buffer_bytes < kMinWriteBufferBytes ||
      options.write_buffer_bytes > kMaxWriteBufferBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("write_buffer_bytes must be in [64 KiB, 4 GiB] (",
                     kMinWriteBufferBytes, " to ", kMaxWriteBufferBytes,
                     " bytes), got ", options.write_buffer_bytes));
  }
  if (options.block_cache_bytes > kMaxBlockCacheBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "block_cache_bytes must be at most 1 TiB (", kMaxBlockCacheBytes,
        " bytes), got ", options.block_cache_bytes));
  }
  return absl::OkStatus();
}

absl::Status ValidateId(std::string_view id) {
  if (id.empty()) return absl::InvalidArgumentError("message id is empty");
  if (id.size() > kMaxIdBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "message id is ", id.size(), " bytes; the limit is ", kMaxIdBytes));
  }
  return absl::OkStatus();
}

absl::Status ValidateSource(std::string_view source, int32_t partition) {
  if (source.empty()) return absl::InvalidArgumentError("source is empty");
  if (source.size() > kMaxSourceBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "source is ", source.size(), " bytes; the limit is ", kMaxSourceBytes));
  }
  if (partition < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("partition must be >= 0, got ", partition));
  }
  return absl::OkStatus();
}

absl::Status ValidateOffset(int64_t offset, std::string_view what) {
  if (offset >= 0 && offset < std::numeric_limits<int64_t>::max()) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat(
      absl::string_view(what.data(), what.size()), " must be in [0, ",
      std::numeric_limits<int64_t>::max() - 1, "], got ", offset));
}

absl::Status ValidatePosition(std::string_view source, int32_t partition) {
  if (source.empty() && partition >= 0) return absl::OkStatus();
  return ValidateSource(source, partition);
}

absl::Status ValidateMessage(const Message& message) {
  if (absl::Status s = ValidateId(message.id); !s.ok()) return s;
  if (message.ttl < absl::ZeroDuration() ||
      message.ttl == absl::InfiniteDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("ttl must be >= 0 and finite, got ",
                     absl::FormatDuration(message.ttl)));
  }
  if (message.event_time == absl::InfiniteFuture()) {
    return absl::InvalidArgumentError(
        "event_time must be finite, or InfinitePast for none");
  }
  if (!message.source.empty() && message.offset >= 0) {
    if (absl::Status s = ValidateOffset(message.offset, "offset"); !s.ok()) {
      return s;
    }
    return ValidateSource(message.source, message.partition);
  }
  if (message.source.size() > kMaxSourceBytes) {
    return ValidateSource(message.source, message.partition);
  }
  return absl::OkStatus();
}

}  // namespace idem
