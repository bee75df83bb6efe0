// idem-ctl metrics: a store's figures in Prometheus' text exposition format
// and as JSON, also for a store an engine (a consumer) holds open; without
// prometheus-cpp it fails with exit 3 before opening anything.

#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "cli/idemctl.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "idem/engine.h"
#include "idem/stats.h"
#include "nlohmann/json.hpp"
#include "tests/testing/engine_test_util.h"
#include "util/temp_dir.h"

namespace idem::cli {
namespace {

using ::testing::HasSubstr;

struct Output {
  int code = -1;
  std::string out;
  std::string err;
};

Output Metrics(const std::string& store, bool json = false,
               std::vector<std::string> command = {"metrics"}) {
  IdemctlArgs args;
  args.store = store;
  args.json = json;
  args.command = std::move(command);
  std::ostringstream out, err;
  Output r;
  r.code = RunIdemctl(args, out, err);
  r.out = out.str();
  r.err = err.str();
  return r;
}

// Commits two messages (IDs `prefix` + a, b), one of which emits an outbox
// entry.
void Fill(Engine& engine, const std::string& prefix = "") {
  ASSERT_TRUE(engine.Process({.id = prefix + "a"}, test::AddOne).ok());
  ASSERT_TRUE(engine
                  .Process({.id = prefix + "b"},
                           [](const Message&, Txn& txn) {
                             txn.Emit("out", "k", "v");
                             return absl::OkStatus();
                           })
                  .ok());
}

#if IDEM_HAVE_PROMETHEUS

// A store Fill filled, closed again.
class IdemctlMetricsOfAStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_OPEN(engine, dir_.Sub("db"), Options());
    ASSERT_NO_FATAL_FAILURE(Fill(*engine));
  }
  std::string db() const { return dir_.Sub("db"); }

  util::TempDir dir_;
};

TEST_F(IdemctlMetricsOfAStoreTest, PrintsTheTextExpositionFormat) {
  Output r = Metrics(db());
  ASSERT_EQ(r.code, kExitOk) << r.err;
  for (const char* line :
       {"# TYPE idem_messages_total counter",
        "idem_messages_total{outcome=\"processed\"} 0",
        "idem_messages_total{outcome=\"conflict\"} 0",
        "# TYPE idem_expired_dropped_total counter",
        "# TYPE idem_write_amplification gauge",
        "# TYPE idem_live_sst_bytes gauge", "# TYPE idem_memtable_bytes gauge",
        "idem_outbox_pending 1",
        "# TYPE idem_commit_duration_seconds histogram",
        "idem_commit_duration_seconds_bucket{le=\"+Inf\"} 0"}) {
    EXPECT_THAT(r.out, HasSubstr(line));
  }
}

// A consumer's engine holds the store: metrics opens it read-only and
// reads its figures as of that moment.
TEST_F(IdemctlMetricsOfAStoreTest, ReadsAStoreAnEngineHoldsOpen) {
  ASSERT_OPEN(engine, db(), Options());
  ASSERT_NO_FATAL_FAILURE(Fill(*engine, "more-"));  // a second outbox entry
  Output r = Metrics(db());
  ASSERT_EQ(r.code, kExitOk) << r.err;
  EXPECT_THAT(r.out, HasSubstr("idem_outbox_pending 2"));
  EXPECT_THAT(r.out, HasSubstr("idem_memtable_bytes "));
}

TEST_F(IdemctlMetricsOfAStoreTest, JsonListsEveryMetricWithItsSamples) {
  Output r = Metrics(db(), /*json=*/true);
  ASSERT_EQ(r.code, kExitOk) << r.err;
  const nlohmann::json v = nlohmann::json::parse(r.out);
  std::map<std::string, nlohmann::json> by_name;
  for (const nlohmann::json& m : v.at("metrics")) {
    by_name[m.at("name").get<std::string>()] = m;
  }
  for (const char* name : {"idem_messages_total", "idem_expired_dropped_total",
                           "idem_write_amplification", "idem_live_sst_bytes",
                           "idem_memtable_bytes", "idem_outbox_pending",
                           "idem_commit_duration_seconds"}) {
    EXPECT_TRUE(by_name.contains(name)) << name << "\n" << r.out;
  }
  EXPECT_EQ(by_name["idem_messages_total"].at("type"), "counter");
  EXPECT_EQ(by_name["idem_messages_total"].at("samples").size(), 4u);
  EXPECT_EQ(by_name["idem_outbox_pending"].at("samples")[0].at("value"), 1);
  const nlohmann::json& histogram =
      by_name["idem_commit_duration_seconds"].at("samples")[0];
  EXPECT_EQ(histogram.at("count"), 0);
  EXPECT_EQ(histogram.at("buckets").size(), kCommitDurationBounds.size() + 1);
  EXPECT_TRUE(histogram.at("buckets").back().at("le").is_null());
}

#else  // !IDEM_HAVE_PROMETHEUS

TEST(IdemctlMetricsTest, FailsWithoutPrometheusCpp) {
  util::TempDir dir;
  { ASSERT_OPEN(engine, dir.Sub("db"), Options()); }
  Output r = Metrics(dir.Sub("db"));
  EXPECT_EQ(r.code, kExitStoreFailure);
  EXPECT_THAT(r.err, HasSubstr("without prometheus-cpp"));
}

#endif  // IDEM_HAVE_PROMETHEUS

TEST(IdemctlMetricsTest, AMissingStoreFailsAndAnArgumentIsAUsageError) {
  util::TempDir dir;
  EXPECT_EQ(Metrics(dir.Sub("none")).code, kExitStoreFailure);
  EXPECT_EQ(Metrics(dir.Sub("none"), false, {"metrics", "extra"}).code,
            kExitUsage);
}

}  // namespace
}  // namespace idem::cli
