#include "engine/stats_sum.h"

#include <algorithm>

namespace idem {

void AddStats(const Stats& shard, Stats& total) {
  for (uint64_t Stats::*counter : {&Stats::processed,
                                   &Stats::duplicates,
                                   &Stats::failed,
                                   &Stats::conflicts,
                                   &Stats::handler_reruns,
                                   &Stats::late_duplicates,
                                   &Stats::outbox_pending,
                                   &Stats::outbox_emitted,
                                   &Stats::outbox_acknowledged,
                                   &Stats::expired_dropped,
                                   &Stats::user_bytes,
                                   &Stats::wal_bytes,
                                   &Stats::flush_bytes,
                                   &Stats::compaction_bytes,
                                   &Stats::live_sst_bytes,
                                   &Stats::estimated_live_records,
                                   &Stats::expiry_buckets,
                                   &Stats::expiry_buckets_dropped,
                                   &Stats::expiry_bucket_records_dropped,
                                   &Stats::memtable_bytes,
                                   &Stats::block_cache_bytes,
                                   &Stats::table_reader_bytes,
                                   &Stats::bloom_filter_useful,
                                   &Stats::bloom_filter_positive,
                                   &Stats::data_blocks_read}) {
    total.*counter += shard.*counter;
  }
  for (absl::Duration Stats::*age :
       {&Stats::redelivery_age_p50, &Stats::redelivery_age_p99,
        &Stats::redelivery_age_max}) {
    total.*age = std::max(total.*age, shard.*age);
  }
  total.dedupe_compaction_write_amplification =
      std::max(total.dedupe_compaction_write_amplification,
               shard.dedupe_compaction_write_amplification);
  for (size_t i = 0; i < total.commit_durations.counts.size(); ++i) {
    total.commit_durations.counts[i] += shard.commit_durations.counts[i];
  }
  total.commit_durations.count += shard.commit_durations.count;
  total.commit_durations.sum_seconds += shard.commit_durations.sum_seconds;
}

void FinishStatsSum(Stats& total) {
  total.write_amplification =
      total.user_bytes == 0
          ? 0
          : static_cast<double>(total.wal_bytes + total.flush_bytes +
                                total.compaction_bytes) /
                static_cast<double>(total.user_bytes);
}

}  // namespace idem
