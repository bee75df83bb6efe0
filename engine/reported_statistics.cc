#include "engine/reported_statistics.h"

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <utility>

namespace idem {
namespace {

// Whether each ticker is one of kReportedTickers, by its number.
constexpr std::array<bool, rocksdb::TICKER_ENUM_MAX> ReportedTable() {
  std::array<bool, rocksdb::TICKER_ENUM_MAX> reported{};
  for (rocksdb::Tickers ticker : kReportedTickers) reported[ticker] = true;
  return reported;
}
constexpr std::array<bool, rocksdb::TICKER_ENUM_MAX> kReported =
    ReportedTable();

bool IsReported(uint32_t ticker) {
  return ticker < kReported.size() && kReported[ticker];
}

// Forwards the reported tickers to RocksDB's own statistics (per-core
// counters) and drops every other ticker and every histogram.
class ReportedStatistics final : public rocksdb::Statistics {
 public:
  ReportedStatistics() : counted_(rocksdb::CreateDBStatistics()) {
    set_stats_level(rocksdb::StatsLevel::kExceptHistogramOrTimers);
  }

  const char* Name() const override { return "idem.ReportedStatistics"; }

  void recordTick(uint32_t ticker, uint64_t count) override {
    if (IsReported(ticker)) counted_->recordTick(ticker, count);
  }
  void setTickerCount(uint32_t ticker, uint64_t count) override {
    if (IsReported(ticker)) counted_->setTickerCount(ticker, count);
  }
  uint64_t getTickerCount(uint32_t ticker) const override {
    return counted_->getTickerCount(ticker);
  }
  uint64_t getAndResetTickerCount(uint32_t ticker) override {
    return counted_->getAndResetTickerCount(ticker);
  }
  bool getTickerMap(std::map<std::string, uint64_t>* map) const override {
    return counted_->getTickerMap(map);
  }

  // No histograms: each reads empty.
  void recordInHistogram(uint32_t, uint64_t) override {}
  bool HistEnabledForType(uint32_t) const override { return false; }
  void histogramData(uint32_t type,
                     rocksdb::HistogramData* data) const override {
    counted_->histogramData(type, data);
  }

  rocksdb::Status Reset() override { return counted_->Reset(); }
  using rocksdb::Statistics::ToString;
  std::string ToString() const override { return counted_->ToString(); }

 private:
  const std::shared_ptr<rocksdb::Statistics> counted_;
};

}  // namespace

std::shared_ptr<rocksdb::Statistics> NewReportedStatistics() {
  return std::make_shared<ReportedStatistics>();
}

}  // namespace idem
