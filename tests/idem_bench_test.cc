#include "bench/idem_bench/idem_bench.h"

#include <stdlib.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "bench/idem_bench/clock_env.h"
#include "bench/idem_bench/targets.h"
#include "bench/idem_bench/workload.h"
#include "cli/tool_usage.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "idem/clock.h"
#include "nlohmann/json.hpp"
#include "rocksdb/env.h"
#include "util/temp_dir.h"

namespace idem::bench {
namespace {

using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::SizeIs;

// A run of about 2.8 simulated one-hour windows in under a second: 60,000
// messages at 6 simulated messages per second, 1 MiB memtables (about 15,000
// records each), so that records reach SST files and meet the filter.
BenchOptions Tiny(const std::string& dir) {
  BenchOptions o;
  o.messages = 60000;
  o.window = absl::Hours(1);
  o.sim_messages_per_second = 6;
  o.batch = 100;
  o.durability = Durability::kBuffered;
  o.ack_durable = false;
  // Small enough for several flushes per window, so every window (and the
  // steady-state one) writes SST files beside the WAL.
  o.write_buffer_bytes = size_t{256} << 10;
  o.duplicate_rate = 0.1;
  o.duplicate_reach = 2000;
  o.lookups = 200;
  o.steady_windows = 1;
  o.dir = dir;
  return o;
}

BenchToolArgs TinyArgs(const std::string& dir) {
  BenchToolArgs args;
  args.options = Tiny(dir);
  args.durability = "buffered";
  args.write_buffer_mib = 1;
  args.progress = false;
  return args;
}

struct ToolRun {
  int rc = -1;
  std::string out;
  std::string err;
};

ToolRun RunTool(const BenchToolArgs& args) {
  std::ostringstream out, err;
  ToolRun r;
  r.rc = RunBenchTool(args, out, err);
  r.out = out.str();
  r.err = err.str();
  return r;
}

TEST(IdemBenchTest, BadArgumentsExitWithUsageCodeAndNameTheFlag) {
  util::TempDir dir;
  struct Case {
    const char* flag;
    void (*mutate)(BenchToolArgs&);
  };
  const Case cases[] = {
      {"--layout", [](BenchToolArgs& a) { a.layout = "engine,btree"; }},
      {"--id_shape", [](BenchToolArgs& a) { a.id_shape = "snowflake"; }},
      {"--durability", [](BenchToolArgs& a) { a.durability = "eventual"; }},
      {"--duplicate_rate",
       [](BenchToolArgs& a) { a.options.duplicate_rate = 1.5; }},
      {"--duplicate_reach",
       [](BenchToolArgs& a) { a.options.duplicate_reach = 0; }},
      {"--batch", [](BenchToolArgs& a) { a.options.batch = 0; }},
      {"--threads", [](BenchToolArgs& a) { a.options.threads = 0; }},
      {"--window",
       [](BenchToolArgs& a) { a.options.window = absl::Seconds(0); }},
      {"--sim_messages_per_second",
       [](BenchToolArgs& a) { a.options.sim_messages_per_second = -1; }},
      {"--write_buffer_mib",
       [](BenchToolArgs& a) { a.write_buffer_mib = 0.01; }},
      {"--state_bytes", [](BenchToolArgs& a) { a.options.state_bytes = -1; }},
      {"--messages or --duration",
       [](BenchToolArgs& a) {
         a.options.messages = 0;
         a.options.duration = absl::ZeroDuration();
       }},
      // Upper bounds, so that no flag can ask for unbounded memory or time.
      {"--messages must be in [0, 10000000000], got 100000000000",
       [](BenchToolArgs& a) { a.options.messages = 100000000000; }},
      {"--duration",
       [](BenchToolArgs& a) { a.options.duration = absl::Hours(200); }},
      {"--threads must be in [1, 64], got 100000",
       [](BenchToolArgs& a) { a.options.threads = 100000; }},
      {"--batch", [](BenchToolArgs& a) { a.options.batch = 100001; }},
      {"--duplicate_reach",
       [](BenchToolArgs& a) { a.options.duplicate_reach = int64_t{1} << 30; }},
      {"--state_keys", [](BenchToolArgs& a) { a.options.state_keys = 0; }},
      {"--state_bytes",
       [](BenchToolArgs& a) { a.options.state_bytes = (1 << 20) + 1; }},
      {"--window",
       [](BenchToolArgs& a) { a.options.window = absl::Hours(24 * 366); }},
      {"--sim_messages_per_second",
       [](BenchToolArgs& a) { a.options.sim_messages_per_second = 1e-6; }},
      {"--sample_every",
       [](BenchToolArgs& a) { a.options.sample_every = absl::Hours(2); }},
      {"--steady_windows",
       [](BenchToolArgs& a) { a.options.steady_windows = 1001; }},
      {"--lookups", [](BenchToolArgs& a) { a.options.lookups = -1; }},
      {"--expiry_buckets",
       [](BenchToolArgs& a) { a.options.expiry_buckets = 65; }},
      {"--write_buffer_mib",
       [](BenchToolArgs& a) { a.write_buffer_mib = 5000; }},
      {"--emit must be in [0, 1000], got -1",
       [](BenchToolArgs& a) { a.options.emit = -1; }},
      {"--emit must be in [0, 1000], got 1001",
       [](BenchToolArgs& a) { a.options.emit = 1001; }},
      {"--emit needs --layout=engine",
       [](BenchToolArgs& a) {
         a.options.emit = 1;
         a.layout = "engine,fifo";
       }},
      {"--emit_bytes", [](BenchToolArgs& a) { a.options.emit_bytes = -1; }},
      {"--outbox_ack_every",
       [](BenchToolArgs& a) { a.options.outbox_ack_every = -1; }},
  };
  for (const Case& c : cases) {
    BenchToolArgs args = TinyArgs(dir.path());
    c.mutate(args);
    const ToolRun r = RunTool(args);
    EXPECT_EQ(r.rc, cli::kExitUsage) << c.flag;
    EXPECT_THAT(r.err, HasSubstr(c.flag));
    EXPECT_THAT(r.err, HasSubstr("idem-bench --help"));
    EXPECT_THAT(r.out, IsEmpty()) << c.flag;
  }
}

TEST(IdemBenchTest, RunBenchRejectsBadOptionsWithInvalidArgument) {
  BenchOptions o;
  o.batch = -3;
  absl::StatusOr<BenchReport> r = RunBench(o, nullptr);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("--batch"));
}

TEST(IdemBenchTest, SimulatedRunPastTheWindowDropsExpiredRecords) {
  util::TempDir dir;
  absl::StatusOr<BenchReport> report = RunBench(Tiny(dir.path()), nullptr);
  ASSERT_TRUE(report.ok()) << report.status();
  ASSERT_THAT(report->layouts, SizeIs(1));
  const LayoutReport& r = report->layouts[0];
  EXPECT_GT(r.windows_covered, 2.5);
  EXPECT_GT(r.expired_dropped, 0u);
  EXPECT_EQ(r.dedupe_errors, std::optional<int64_t>(0));
  EXPECT_EQ(r.processed + r.duplicates, 60000);
  EXPECT_EQ(r.duplicates, r.redeliveries - r.expired_redeliveries);
  EXPECT_GT(r.cumulative_wa, 1.0);
  ASSERT_TRUE(r.steady_wa.has_value());
  EXPECT_GT(*r.steady_wa, 1.0);
  EXPECT_THAT(r.wa_per_window, SizeIs(2));
  // About one window of records is live: 6 msg/s x 3600 s, minus repeats.
  EXPECT_GT(r.live_records, 16000);
  EXPECT_LT(r.live_records, 21600);
  ASSERT_TRUE(r.read_cost.has_value());
  EXPECT_EQ(r.read_cost->miss.found, 0);
  EXPECT_EQ(r.read_cost->hit.found, r.read_cost->hit.lookups);
}

TEST(IdemBenchTest, NothingIsDroppedBeforeTheClockPassesTheWindow) {
  util::TempDir dir;
  BenchOptions o = Tiny(dir.path());
  o.window = absl::Hours(4);  // the run covers 2.8 h
  absl::StatusOr<BenchReport> report = RunBench(o, nullptr);
  ASSERT_TRUE(report.ok()) << report.status();
  const LayoutReport& r = report->layouts[0];
  EXPECT_LT(r.windows_covered, 1.0);
  EXPECT_EQ(r.expired_dropped, 0u);
  EXPECT_EQ(r.live_records, r.processed);
  EXPECT_FALSE(r.steady_wa.has_value());
}

TEST(IdemBenchTest, AlternativeLayoutsGiveTheEngineAnswersAndDropWhole) {
  util::TempDir dir;
  BenchOptions o = Tiny(dir.path());
  // Smaller and faster: these layouts open RocksDB themselves, so 64 KiB
  // memtables are fine.
  o.messages = 15000;
  o.sim_messages_per_second = 1.5;
  o.write_buffer_bytes = size_t{64} << 10;
  o.layouts = {Layout::kLeveled, Layout::kUniversal, Layout::kFifo};
  absl::StatusOr<BenchReport> report = RunBench(o, nullptr);
  ASSERT_TRUE(report.ok()) << report.status();
  ASSERT_THAT(report->layouts, SizeIs(3));
  for (const LayoutReport& r : report->layouts) {
    SCOPED_TRACE(LayoutName(r.layout));
    EXPECT_EQ(r.dedupe_errors, std::optional<int64_t>(0));
    EXPECT_TRUE(r.rocksdb_sum_wamp.has_value());
    EXPECT_TRUE(r.memtable_bytes.has_value());
    EXPECT_GT(r.expired_dropped + r.expired_dropped_whole, 0u);
  }
  EXPECT_GT(report->layouts[2].expired_dropped_whole, 0u);  // fifo
}

// Time buckets are measured through the engine (Options::expiry_buckets),
// not a layout of the bench's own.
TEST(IdemBenchTest, EngineWithExpiryBucketsGivesTheAnswersAndDropsWhole) {
  util::TempDir dir;
  BenchOptions o = Tiny(dir.path());
  o.messages = 15000;
  o.sim_messages_per_second = 1.5;
  o.layouts = {Layout::kEngine};
  o.expiry_buckets = 4;
  absl::StatusOr<BenchReport> report = RunBench(o, nullptr);
  ASSERT_TRUE(report.ok()) << report.status();
  ASSERT_THAT(report->layouts, SizeIs(1));
  EXPECT_EQ(report->layouts[0].dedupe_errors, std::optional<int64_t>(0));
  EXPECT_GT(report->layouts[0].expired_dropped_whole, 0u);
}

TEST(IdemBenchTest, JsonOutputHasTheReportedFields) {
  util::TempDir dir;
  BenchToolArgs args = TinyArgs(dir.path());
  args.json = true;
  args.id_shape = "kafka";
  args.options.state_bytes = 16;
  const ToolRun run = RunTool(args);
  ASSERT_EQ(run.rc, cli::kExitOk) << run.err;
  const nlohmann::json json =
      nlohmann::json::parse(run.out, nullptr, /*allow_exceptions=*/false);
  ASSERT_TRUE(json.is_object()) << run.out;
  ASSERT_TRUE(json.contains("config"));
  EXPECT_EQ(json["config"].value("id_shape", ""), "kafka");
  ASSERT_TRUE(json.contains("layouts"));
  const nlohmann::json& layouts = json["layouts"];
  ASSERT_TRUE(layouts.is_array());
  ASSERT_EQ(layouts.size(), 1u);
  const nlohmann::json& l = layouts[0];
  for (const char* field :
       {"layout", "messages_per_second", "batch_latency", "message_latency",
        "write_amplification", "steady_state_write_amplification",
        "write_amplification_per_window", "rocksdb_sum_w_amp",
        "expired_dropped", "expired_dropped_whole", "live_records",
        "space_amplification", "disk_bytes", "memory_per_live_id_bytes",
        "index_filter_bytes_per_live_id", "lookup", "dedupe_errors", "notes"}) {
    ASSERT_TRUE(l.contains(field)) << field;
  }
  EXPECT_EQ(l["layout"], "engine");
  // Whether this short run's flushes finish before the report is timing
  // (under ASan they did not); SimulatedRunPastTheWindowDropsExpiredRecords
  // checks that records are dropped. Here: a count, present.
  EXPECT_GE(l["expired_dropped"].get<double>(), 0);
  EXPECT_EQ(l["dedupe_errors"].get<double>(), 0);
  EXPECT_GT(l["batch_latency"]["p99_us"].get<double>(), 0);
  // The engine's own RocksDB figures, through idem::Stats: the Sum W-Amp
  // exists once a dedupe flush has finished (timing again: else null),
  // memory always.
  if (l["rocksdb_sum_w_amp"].is_number()) {
    EXPECT_GE(l["rocksdb_sum_w_amp"].get<double>(), 1.0);
  } else {
    EXPECT_TRUE(l["rocksdb_sum_w_amp"].is_null());
  }
  ASSERT_TRUE(l.contains("memtable_bytes"));
  EXPECT_TRUE(l["memtable_bytes"].is_number());
  EXPECT_EQ(json["config"].value("emit", -1), 0);
  ASSERT_TRUE(l.contains("outbox"));
  EXPECT_TRUE(l["outbox"].is_null());  // no emits
  EXPECT_GT(l["lookup"]["miss"]["filter_probes"].get<double>(), 0);
}

TEST(IdemBenchTest, EmitReportsTheOutboxInTheJson) {
  util::TempDir dir;
  BenchToolArgs args = TinyArgs(dir.path());
  args.json = true;
  args.options.messages = 5000;  // 50 batches of 100
  args.options.lookups = 0;
  args.options.emit = 1;
  const ToolRun run = RunTool(args);
  ASSERT_EQ(run.rc, cli::kExitOk) << run.err;
  const nlohmann::json json =
      nlohmann::json::parse(run.out, nullptr, /*allow_exceptions=*/false);
  ASSERT_TRUE(json.is_object()) << run.out;
  EXPECT_EQ(json["config"].value("emit", -1), 1);
  EXPECT_EQ(json["config"].value("emit_bytes", -1), 64);
  EXPECT_EQ(json["config"].value("outbox_ack_every", -1), 1);
  const nlohmann::json& l = json["layouts"][0];
  ASSERT_TRUE(l.contains("outbox")) << run.out;
  const nlohmann::json& outbox = l["outbox"];
  ASSERT_TRUE(outbox.is_object()) << run.out;
  for (const char* field :
       {"emitted", "acknowledged", "pending", "ack_latency"}) {
    ASSERT_TRUE(outbox.contains(field)) << field;
  }
  // One entry per processed message, all acknowledged after the last batch.
  const int64_t processed = l["processed"].get<int64_t>();
  EXPECT_GT(processed, 4000);
  EXPECT_EQ(outbox["emitted"].get<int64_t>(), processed);
  EXPECT_EQ(outbox["acknowledged"].get<int64_t>(), processed);
  EXPECT_EQ(outbox["pending"].get<int64_t>(), 0);
  EXPECT_EQ(outbox["ack_latency"]["count"].get<int64_t>(), 50);
  EXPECT_GT(outbox["ack_latency"]["p50_us"].get<double>(), 0);
  // Write amplification is reported from RocksDB's counters, as without
  // emits.
  EXPECT_GE(l["write_amplification"].get<double>(), 1.0);
}

TEST(IdemBenchTest, OutboxAcknowledgedEveryKBatchesLeavesTheRestPending) {
  util::TempDir dir;
  BenchOptions o = Tiny(dir.path());
  o.messages = 5000;  // 50 batches of 100
  o.lookups = 0;
  o.emit = 2;
  o.outbox_ack_every = 7;  // after batches 7, 14, ..., 49
  absl::StatusOr<BenchReport> report = RunBench(o, nullptr);
  ASSERT_TRUE(report.ok()) << report.status();
  const LayoutReport& r = report->layouts[0];
  ASSERT_TRUE(r.outbox.has_value());
  EXPECT_EQ(r.outbox->emitted, static_cast<uint64_t>(2 * r.processed));
  EXPECT_EQ(r.outbox->ack_latency.count, 7);
  EXPECT_GT(r.outbox->pending, 0u);  // batch 50's entries
  EXPECT_LE(r.outbox->pending, 200u);
  EXPECT_EQ(r.outbox->acknowledged + r.outbox->pending, r.outbox->emitted);

  o.outbox_ack_every = 0;  // never: everything stays, and a note says so
  report = RunBench(o, nullptr);
  ASSERT_TRUE(report.ok()) << report.status();
  const LayoutReport& never = report->layouts[0];
  ASSERT_TRUE(never.outbox.has_value());
  EXPECT_EQ(never.outbox->ack_latency.count, 0);
  EXPECT_EQ(never.outbox->pending, never.outbox->emitted);
  EXPECT_THAT(never.notes, Contains(HasSubstr("never acknowledged")));
}

TEST(IdemBenchTest, CsvHasOneRowPerSample) {
  util::TempDir dir;
  BenchToolArgs args = TinyArgs(dir.path());
  args.csv = dir.Sub("series.csv");
  const ToolRun run = RunTool(args);
  ASSERT_EQ(run.rc, cli::kExitOk) << run.err;
  EXPECT_THAT(run.out, HasSubstr("[engine]"));
  std::ifstream f(args.csv);
  std::vector<std::string> lines;
  for (std::string line; std::getline(f, line);) lines.push_back(line);
  ASSERT_GT(lines.size(), 20u);  // window / 10 over 2.8 windows, plus ends
  EXPECT_THAT(lines[0], HasSubstr("clock_seconds"));
  EXPECT_THAT(lines[0], HasSubstr("disk_bytes"));
  EXPECT_THAT(lines[0], HasSubstr("live_records"));
  EXPECT_THAT(lines[0], HasSubstr("cumulative_wa"));
  const std::vector<std::string> last = absl::StrSplit(lines.back(), ',');
  EXPECT_EQ(last[0], "engine");
  EXPECT_EQ(last[3], "60000");  // messages
}

// Regression: a --csv into a missing directory used to fail only after the
// whole run.
TEST(IdemBenchTest, UnwritableOutputPathsExitWithUsageCodeBeforeRunning) {
  util::TempDir dir;
  struct Case {
    const char* flag;
    void (*mutate)(BenchToolArgs&, const std::string& dir);
  };
  const Case cases[] = {
      {"--csv",
       [](BenchToolArgs& a, const std::string& d) {
         a.csv = d + "/missing/series.csv";
       }},
      {"--csv", [](BenchToolArgs& a, const std::string& d) { a.csv = d; }},
      {"--plot",
       [](BenchToolArgs& a, const std::string& d) {
         a.plot = d + "/missing/plot.png";
       }},
      {"--dir", [](BenchToolArgs& a,
                   const std::string& d) { a.options.dir = d + "/missing"; }},
  };
  for (const Case& c : cases) {
    BenchToolArgs args = TinyArgs(dir.Sub("stores"));
    std::filesystem::create_directories(args.options.dir);
    c.mutate(args, dir.path());
    const absl::Time start = absl::Now();
    const ToolRun r = RunTool(args);
    EXPECT_EQ(r.rc, cli::kExitUsage) << c.flag << ": " << r.err;
    EXPECT_THAT(r.err, HasSubstr(c.flag));
    EXPECT_THAT(r.err, HasSubstr("idem-bench --help"));
    EXPECT_THAT(r.out, IsEmpty()) << c.flag;
    // Nothing ran: no store was made, and it took no time.
    EXPECT_TRUE(std::filesystem::is_empty(dir.Sub("stores"))) << c.flag;
    EXPECT_LT(absl::Now() - start, absl::Seconds(1)) << c.flag;
  }
}

TEST(IdemBenchTest, PlotWithoutGnuplotIsSkippedWithAMessage) {
  util::TempDir dir;
  BenchToolArgs args = TinyArgs(dir.path());
  args.options.messages = 2000;
  args.plot = dir.Sub("plot.png");
  const std::string old_path = std::getenv("PATH") ? std::getenv("PATH") : "";
  setenv("PATH", dir.path().c_str(), 1);
  const ToolRun run = RunTool(args);
  setenv("PATH", old_path.c_str(), 1);
  EXPECT_EQ(run.rc, cli::kExitOk);
  EXPECT_THAT(run.err, HasSubstr("gnuplot is not on $PATH"));
}

TEST(IdemBenchTest, ThreadedRunCountsEveryDelivery) {
  util::TempDir dir;
  BenchOptions o = Tiny(dir.path());
  o.threads = 3;
  o.messages = 9000;
  o.lookups = 0;
  absl::StatusOr<BenchReport> report = RunBench(o, nullptr);
  ASSERT_TRUE(report.ok()) << report.status();
  const LayoutReport& r = report->layouts[0];
  EXPECT_EQ(r.processed + r.duplicates, 9000);
  EXPECT_FALSE(r.dedupe_errors.has_value());  // not checkable with threads
  EXPECT_EQ(r.batch_latency.count, 90);
}

TEST(BenchWorkloadTest, IdShapes) {
  EXPECT_EQ(IdFor(IdShape::kKafka, 1, 0), "orders-0-0");
  EXPECT_EQ(IdFor(IdShape::kKafka, 1, 25), "orders-1-2");
  const std::string uuid = IdFor(IdShape::kUuid, 1, 7);
  EXPECT_THAT(uuid, SizeIs(36));
  EXPECT_EQ(uuid[14], '4');
  EXPECT_NE(uuid, IdFor(IdShape::kUuid, 2, 7));
  EXPECT_EQ(uuid, IdFor(IdShape::kUuid, 1, 7));
}

TEST(BenchWorkloadTest, RedeliveryPastTheWindowIsExpectedToBeProcessed) {
  WorkloadOptions o;
  o.duplicate_rate = 0.5;
  o.duplicate_reach = 10;
  o.window = absl::Seconds(10);
  Workload w(o);
  std::vector<Delivery> batch;
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  w.NextBatch(100, t0, &batch);
  for (const Delivery& d : batch) EXPECT_EQ(d.expect_duplicate, d.redelivery);
  batch.clear();
  w.NextBatch(100, t0 + absl::Seconds(10), &batch);  // all earlier expired
  int expected_duplicates = 0;
  for (const Delivery& d : batch) expected_duplicates += d.expect_duplicate;
  EXPECT_GT(w.expired_redeliveries(), 0);
  EXPECT_LT(expected_duplicates, w.redeliveries());
}

// Guards the dedupe check itself: a store answer that differs from the
// expected one must be counted, or "dedupe errors 0" would prove nothing.
TEST(BenchLayoutTest, CountsAnswersThatDifferFromTheExpectedOnes) {
  util::TempDir dir;
  for (Layout layout : {Layout::kEngine, Layout::kLeveled, Layout::kFifo}) {
    SCOPED_TRACE(LayoutName(layout));
    ManualClock clock(absl::FromUnixSeconds(1700000000));
    std::unique_ptr<rocksdb::Env> env =
        NewClockEnv(rocksdb::Env::Default(), &clock);
    TargetOptions t;
    t.layout = layout;
    t.durability = Durability::kBuffered;
    t.ack_durable = false;
    t.write_buffer_bytes = size_t{1} << 20;
    t.clock = &clock;
    t.env = env.get();
    absl::StatusOr<std::unique_ptr<Target>> target =
        OpenTarget(dir.Sub(LayoutName(layout)), t);
    ASSERT_TRUE(target.ok()) << target.status();
    // "a" is new but claimed to be a duplicate; the second "b" is a real
    // duplicate (same batch) but claimed to be new.
    std::vector<Delivery> batch = {
        {.id = "a", .expect_duplicate = true}, {.id = "b"}, {.id = "b"}};
    absl::StatusOr<BatchOutcome> first = (*target)->ProcessBatch(batch);
    ASSERT_TRUE(first.ok()) << first.status();
    EXPECT_EQ(first->processed, 2);
    EXPECT_EQ(first->duplicates, 1);
    EXPECT_EQ(first->missed_duplicates, 1);
    EXPECT_EQ(first->false_duplicates, 1);
    // One window later both records have expired.
    clock.Advance(absl::Hours(1));
    std::vector<Delivery> again = {{.id = "a"}, {.id = "b"}};
    absl::StatusOr<BatchOutcome> second = (*target)->ProcessBatch(again);
    ASSERT_TRUE(second.ok()) << second.status();
    EXPECT_EQ(second->processed, 2);
    EXPECT_EQ(second->missed_duplicates + second->false_duplicates, 0);
    ASSERT_TRUE((*target)->Close().ok());
  }
}

TEST(BenchLayoutTest, ParsesTheSumRowOfRocksDbStats) {
  const std::string stats =
      "\n** Compaction Stats [idem.dedupe] **\n"
      "Level    Files   Size     Score Read(GB)  Rn(GB) Rnp1(GB) Write(GB) "
      "Wnew(GB) Moved(GB) W-Amp Rd(MB/s) Wr(MB/s) Comp(sec)\n"
      "-------------------------------------------------------------------\n"
      "  L0      2/0    1.22 MB   0.5      0.0     0.0      0.0       0.0"
      "      0.0       0.0   1.0      0.0     12.1      0.10\n"
      "  Sum     9/0   10.97 MB   0.0      0.1     0.0      0.1       0.1"
      "      0.0       0.0   4.7     30.0     33.3      1.20\n";
  EXPECT_EQ(ParseSumWriteAmp(stats), std::optional<double>(4.7));
  EXPECT_EQ(ParseSumWriteAmp("no table here"), std::nullopt);
}

}  // namespace
}  // namespace idem::bench
