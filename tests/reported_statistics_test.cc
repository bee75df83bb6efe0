// engine/reported_statistics.h: the store's statistics count exactly the
// tickers GetStats reports and keep no histogram. (That GetStats reads
// nothing else is EngineCallsTest.StatsReportRocksDbsOwnFiguresAfterAFlush:
// each ticker figure it reports is above 0 after a flush and a compaction.)
#include "engine/reported_statistics.h"

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "gtest/gtest.h"
#include "rocksdb/statistics.h"

namespace idem {
namespace {

bool IsListed(uint32_t ticker) {
  for (rocksdb::Tickers reported : kReportedTickers) {
    if (reported == ticker) return true;
  }
  return false;
}

TEST(ReportedStatisticsTest, CountsEachReportedTickerAndNoOther) {
  std::shared_ptr<rocksdb::Statistics> stats = NewReportedStatistics();
  for (uint32_t t = 0; t < rocksdb::TICKER_ENUM_MAX; ++t) {
    stats->recordTick(t, 3);
    stats->recordTick(t, 4);
  }
  for (uint32_t t = 0; t < rocksdb::TICKER_ENUM_MAX; ++t) {
    EXPECT_EQ(stats->getTickerCount(t), IsListed(t) ? 7u : 0u)
        << rocksdb::TickersNameMap[t].second;
  }
  std::map<std::string, uint64_t> map;
  ASSERT_TRUE(stats->getTickerMap(&map));
  EXPECT_EQ(map[rocksdb::TickersNameMap[rocksdb::WAL_FILE_BYTES].second], 7u);
}

TEST(ReportedStatisticsTest, SetAndResetApplyToReportedTickers) {
  std::shared_ptr<rocksdb::Statistics> stats = NewReportedStatistics();
  stats->setTickerCount(rocksdb::FLUSH_WRITE_BYTES, 10);
  stats->setTickerCount(rocksdb::NUMBER_KEYS_READ, 10);
  EXPECT_EQ(stats->getTickerCount(rocksdb::FLUSH_WRITE_BYTES), 10u);
  EXPECT_EQ(stats->getTickerCount(rocksdb::NUMBER_KEYS_READ), 0u);
  EXPECT_EQ(stats->getAndResetTickerCount(rocksdb::FLUSH_WRITE_BYTES), 10u);
  EXPECT_EQ(stats->getTickerCount(rocksdb::FLUSH_WRITE_BYTES), 0u);
  stats->recordTick(rocksdb::WAL_FILE_BYTES, 5);
  ASSERT_TRUE(stats->Reset().ok());
  EXPECT_EQ(stats->getTickerCount(rocksdb::WAL_FILE_BYTES), 0u);
}

TEST(ReportedStatisticsTest, KeepsNoHistogramAndAsksForNoTimer) {
  std::shared_ptr<rocksdb::Statistics> stats = NewReportedStatistics();
  EXPECT_EQ(stats->get_stats_level(),
            rocksdb::StatsLevel::kExceptHistogramOrTimers);
  EXPECT_FALSE(stats->HistEnabledForType(rocksdb::DB_GET));
  stats->recordInHistogram(rocksdb::BYTES_PER_READ, 100);
  stats->reportTimeToHistogram(rocksdb::DB_GET, 100);
  rocksdb::HistogramData data;
  stats->histogramData(rocksdb::BYTES_PER_READ, &data);
  EXPECT_EQ(data.count, 0u);
}

}  // namespace
}  // namespace idem
