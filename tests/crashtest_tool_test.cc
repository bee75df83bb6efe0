// The idem-crashtest tool (cli/crashtest.h): flags out of bounds are
// refused before anything runs, --cycles=N runs N crash cycles and one
// final run, as its progress and report say, the pipeline workload runs
// with its outbox invariants, the windows workload with a JSON report,
// and --shards runs a sharded engine.

#include <stdlib.h>

#include <filesystem>
#include <sstream>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "cli/crashtest.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "util/temp_dir.h"

namespace idem::cli {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

struct ToolRun {
  int rc = -1;
  std::string out;
  std::string err;
};

ToolRun RunTool(const CrashtestArgs& args) {
  std::ostringstream out, err;
  ToolRun r;
  r.rc = RunCrashtest(args, out, err);
  r.out = out.str();
  r.err = err.str();
  return r;
}

int Count(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos;
       at = text.find(what, at + what.size())) {
    ++n;
  }
  return n;
}

// Regression: --threads=100000 used to start the run (and blame the engine),
// and a --messages too large for memory ended in std::bad_alloc.
TEST(CrashtestToolTest, FlagsOutOfBoundsExitWithUsageCodeAndNameTheFlag) {
  util::TempDir tmp;
  // With no --dir the tool would make a temporary directory here.
  const char* old_tmpdir = getenv("TMPDIR");
  const std::string saved = old_tmpdir != nullptr ? old_tmpdir : "";
  setenv("TMPDIR", tmp.path().c_str(), 1);
  struct Case {
    const char* message;
    void (*mutate)(CrashtestArgs&);
  };
  const Case cases[] = {
      {"--threads must be in [1, 256], got 100000",
       [](CrashtestArgs& a) { a.threads = 100000; }},
      {"--threads must be in [1, 256], got 0",
       [](CrashtestArgs& a) { a.threads = 0; }},
      {"--messages must be in [0, 2000000], got 100000000000",
       [](CrashtestArgs& a) { a.messages = 100000000000; }},
      {"--cycles must be in [0, 1000000], got -1",
       [](CrashtestArgs& a) { a.cycles = -1; }},
      {"--cycles must be in [0, 1000000], got 1000001",
       [](CrashtestArgs& a) { a.cycles = 1000001; }},
      {"--partitions must be in [1, 1024], got 0",
       [](CrashtestArgs& a) { a.partitions = 0; }},
      {"--batch must be in [1, 10000], got 100000",
       [](CrashtestArgs& a) { a.batch = 100000; }},
      {"--expiry_buckets must be in [0, 64], got 65",
       [](CrashtestArgs& a) { a.expiry_buckets = 65; }},
      {"--dedupe_scope must be store or partition, got 'shard'",
       [](CrashtestArgs& a) { a.dedupe_scope = "shard"; }},
      {"--recovery_crash_rate must be in [0, 1], got 1.5",
       [](CrashtestArgs& a) { a.recovery_crash_rate = 1.5; }},
      {"--recovery_crash_rate must be in [0, 1], got -0.1",
       [](CrashtestArgs& a) { a.recovery_crash_rate = -0.1; }},
      {"--shards must be in [1, 256], got 257",
       [](CrashtestArgs& a) { a.shards = 257; }},
      {"--shards = 4 needs dedupe_scope = partition",
       [](CrashtestArgs& a) { a.shards = 4; }},
      {"--self_test=wrong_shard needs shards >= 2",
       [](CrashtestArgs& a) { a.self_test = "wrong_shard"; }},
  };
  for (const Case& c : cases) {
    CrashtestArgs args;
    c.mutate(args);
    const ToolRun r = RunTool(args);
    EXPECT_EQ(r.rc, 2) << c.message;
    EXPECT_THAT(r.err, HasSubstr(std::string("idem-crashtest: ") + c.message));
    EXPECT_THAT(r.out, IsEmpty()) << c.message;
  }
  // Nothing started: not even the scratch directory was made.
  EXPECT_TRUE(std::filesystem::is_empty(tmp.path()));
  if (old_tmpdir != nullptr) {
    setenv("TMPDIR", saved.c_str(), 1);
  } else {
    unsetenv("TMPDIR");
  }
}

// Regression: --cycles=3 printed "[cycle 1/4]" .. "[cycle 3/4]", counted runs
// that ended without a crash as cycles and printed "final run" twice.
TEST(CrashtestToolTest, CyclesCountCrashesAndTheFinalRunIsReportedOnce) {
  util::TempDir tmp;
  CrashtestArgs args;
  args.cycles = 3;
  args.messages = 200;  // short epochs: some runs end before their kill
  args.dir = tmp.Sub("run");
  const ToolRun r = RunTool(args);
  ASSERT_EQ(r.rc, 0) << r.err << r.out;
  for (const char* line : {"[cycle 1/3] ", "[cycle 2/3] ", "[cycle 3/3] "}) {
    EXPECT_EQ(Count(r.err, line), 1) << line << " in\n" << r.err;
  }
  EXPECT_THAT(r.err, Not(HasSubstr("/4]")));
  EXPECT_EQ(Count(r.err + r.out, "final run"), 1) << r.err << r.out;
  EXPECT_EQ(Count(r.err, "[final run] "), 1);
  // The final-run line is the last progress line.
  const size_t final_run = r.err.find("[final run] ");
  for (const char* other : {"[cycle ", "[no crash] ", "[epoch "}) {
    const size_t last = r.err.rfind(other);
    if (last != std::string::npos) {
      EXPECT_GT(final_run, last) << other;
    }
  }
  EXPECT_THAT(r.out, HasSubstr("cycles:     3 crash cycles in "));
  EXPECT_THAT(r.out, HasSubstr("verdict: PASS"));
  // Every run that ended without a crash is on its own line and in the
  // report.
  const int no_crash = Count(r.err, "[no crash] ");
  EXPECT_THAT(r.out,
              HasSubstr("no crash:   " + std::to_string(no_crash) + " run(s)"));
}

// The pipeline workload (handlers emit through the outbox to a downstream
// store) runs from the tool, with its three outbox invariants.
TEST(CrashtestToolTest, RunsThePipelineWorkload) {
  util::TempDir tmp;
  CrashtestArgs args;
  args.workload = "pipeline";
  args.mode = "mixed";
  args.cycles = 2;
  args.messages = 300;
  args.dir = tmp.Sub("run");
  const ToolRun r = RunTool(args);
  ASSERT_EQ(r.rc, 0) << r.err << r.out;
  EXPECT_THAT(r.out, HasSubstr("workload=pipeline"));
  EXPECT_THAT(r.out, HasSubstr("outbox entries published"));
  for (const char* name :
       {"no_lost_emit", "one_content_per_id", "downstream_exactly_once"}) {
    EXPECT_THAT(r.out, HasSubstr(std::string("PASS ") + name)) << r.out;
  }
  EXPECT_THAT(r.out, HasSubstr("verdict: PASS"));
}

// --shards runs the worker's engine sharded; the report and the command
// that reproduces it name the count.
TEST(CrashtestToolTest, ShardedRunNamesItsShardCount) {
  util::TempDir tmp;
  CrashtestArgs args;
  args.shards = 2;
  args.dedupe_scope = "partition";
  args.cycles = 1;
  args.messages = 200;
  args.dir = tmp.Sub("run");
  const ToolRun r = RunTool(args);
  ASSERT_EQ(r.rc, 0) << r.err << r.out;
  EXPECT_THAT(r.out, HasSubstr(" shards=2 "));
  EXPECT_THAT(r.out, HasSubstr("--dedupe_scope=partition --shards=2"));
  EXPECT_THAT(r.out, HasSubstr("verdict: PASS"));
}

// The windows workload (timers fired by the worker, windows emitted through
// the outbox) runs from the tool and reports as one JSON object, as the
// others do.
TEST(CrashtestToolTest, RunsTheWindowsWorkloadWithAJsonReport) {
  util::TempDir tmp;
  CrashtestArgs args;
  args.workload = "windows";
  args.mode = "mixed";
  args.cycles = 2;
  args.messages = 600;
  args.json = true;
  args.dir = tmp.Sub("run");
  const ToolRun r = RunTool(args);
  ASSERT_EQ(r.rc, 0) << r.err << r.out;
  EXPECT_EQ(r.out.rfind("{\"seed\":1,\"shards\":1,\"passed\":true,", 0), 0u)
      << r.out;
  EXPECT_THAT(r.out, HasSubstr("{\"name\":\"exactly_once_effect\","
                               "\"passed\":true,"));
  EXPECT_EQ(Count(r.out, "\n"), 1) << r.out;
}

// A self-test the workload cannot run is refused before anything runs.
TEST(CrashtestToolTest, SelfTestsNeedAWorkloadThatCanRunThem) {
  const std::pair<const char*, const char*> cases[] = {
      {"emit_outside_commit", "needs a workload whose handler emits"},
      {"fire_outside_commit", "needs a workload whose handler sets timers"},
  };
  for (const auto& [self_test, message] : cases) {
    util::TempDir tmp;
    CrashtestArgs args;  // the ledger: no emits, no timers
    args.self_test = self_test;
    args.dir = tmp.Sub("run");
    const ToolRun r = RunTool(args);
    EXPECT_EQ(r.rc, 2) << self_test;
    EXPECT_THAT(r.err, HasSubstr(absl::StrCat("idem-crashtest: --self_test=",
                                              self_test, " ", message)));
    EXPECT_FALSE(std::filesystem::exists(args.dir)) << self_test;
  }
}

}  // namespace
}  // namespace idem::cli
