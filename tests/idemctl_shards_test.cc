// idem-ctl on a sharded store (Options::shards > 1): every subcommand opens
// it with its shard count; stats, offsets, compact, dump, verify and metrics
// cover every shard or --shard=N alone; get and scan read one shard, named by
// --shard or by a partition, and say so when given neither; the subcommands
// that find a partition's shard themselves take no --shard.

#include <algorithm>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "cli/idemctl.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "idem/engine.h"
#include "nlohmann/json.hpp"
#include "tests/idemctl_test_util.h"
#include "util/temp_dir.h"

namespace idem::cli {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using json = nlohmann::json;

constexpr int kShards = 2;
constexpr int32_t kPartitions = 4;  // partition p commits in shard p % 2

using ctl_test::CtlOutput;

// Flags beyond --store and the subcommand.
struct Flags {
  std::optional<std::string> shard;
  std::optional<std::string> partition;
  bool json = false;
};

class IdemctlShardsTest : public ::testing::Test {
 protected:
  // Message m<p> of ("orders", p) at offset 5, for each partition p, writes
  // "key/<p>" and "last" = its ID: shard 0 holds key/0, key/2 and last = m2,
  // shard 1 key/1, key/3 and last = m3.
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<Engine>> engine =
        Engine::Open(store(), ShardedOptions());
    ASSERT_TRUE(engine.ok()) << engine.status();
    for (int32_t p = 0; p < kPartitions; ++p) {
      const std::string id = absl::StrCat("m", p);
      ASSERT_TRUE(
          (*engine)
              ->Process(
                  {.id = id, .source = "orders", .partition = p, .offset = 5},
                  [](const Message& m, Txn& txn) {
                    txn.Put(absl::StrCat("key/", m.partition), "v");
                    txn.Put("last", m.id);
                    return absl::OkStatus();
                  })
              .ok());
    }
  }

  static Options ShardedOptions() {
    Options options;
    options.shards = kShards;
    options.dedupe_scope = DedupeScope::kPartition;
    return options;
  }

  std::string store() const { return dir_.Sub("store"); }

  CtlOutput Run(std::vector<std::string> command, Flags flags = {}) const {
    IdemctlArgs args;
    args.store = store();
    args.json = flags.json;
    args.shard = flags.shard;
    args.partition = flags.partition;
    args.command = std::move(command);
    return ctl_test::RunArgs(args);
  }

  json RunJson(std::vector<std::string> command, Flags flags = {}) const {
    flags.json = true;
    const CtlOutput r = Run(std::move(command), flags);
    EXPECT_EQ(r.code, kExitOk) << r.err;
    return json::parse(r.out, nullptr, /*allow_exceptions=*/false);
  }

  util::TempDir dir_;
};

TEST_F(IdemctlShardsTest, GetNeedsTheShardOrThePartitionOnAShardedStore) {
  const CtlOutput r = Run({"get", "last"});
  EXPECT_EQ(r.code, kExitUsage);
  EXPECT_THAT(r.err, HasSubstr("'get' reads one shard"));
  EXPECT_THAT(r.err, HasSubstr("has 2 shards (0 to 1)"));
  EXPECT_THAT(r.err, HasSubstr("--shard=N"));
  EXPECT_THAT(r.err, HasSubstr("--source=S --partition=P"));
  EXPECT_EQ(r.out, "");
}

TEST_F(IdemctlShardsTest, GetReadsTheShardItIsGivenOrThePartitionsShard) {
  EXPECT_EQ(Run({"get", "last"}, {.shard = "0"}).out, "m2\n");
  EXPECT_EQ(Run({"get", "last"}, {.shard = "1"}).out, "m3\n");
  EXPECT_EQ(Run({"get", "last"}, {.partition = "orders:1"}).out, "m3\n");
  const json v = RunJson({"get", "last"}, {.partition = "orders:2"});
  EXPECT_EQ(v.value("value", ""), "m2");
  EXPECT_EQ(v.value("shard", -1), 0);
  // key/1 lives in shard 1 only.
  EXPECT_EQ(Run({"get", "key/1"}, {.shard = "0"}).code, kExitNotFound);
  EXPECT_EQ(Run({"get", "key/1"}, {.shard = "1"}).code, kExitOk);
}

TEST_F(IdemctlShardsTest, RefusesAShardOutOfRangeMalformedOrBesideAPartition) {
  CtlOutput r = Run({"get", "last"}, {.shard = "2"});
  EXPECT_EQ(r.code, kExitUsage);
  EXPECT_THAT(r.err, HasSubstr("--shard=2: the store at"));
  EXPECT_THAT(r.err, HasSubstr("has 2 shards (0 to 1)"));
  r = Run({"stats"}, {.shard = "one"});
  EXPECT_EQ(r.code, kExitUsage);
  EXPECT_THAT(r.err, HasSubstr("--shard: 'one' is not a shard number"));
  r = Run({"get", "last"}, {.shard = "0", .partition = "orders:1"});
  EXPECT_EQ(r.code, kExitUsage);
  EXPECT_THAT(r.err, HasSubstr("not both"));
}

TEST_F(IdemctlShardsTest, StatsSumEveryShardOrShowOne) {
  const json total = RunJson({"stats"});
  EXPECT_EQ(total.value("shards", 0), kShards);
  EXPECT_FALSE(total.contains("shard"));
  uint64_t sum = 0;
  for (int i = 0; i < kShards; ++i) {
    const json one = RunJson({"stats"}, {.shard = absl::StrCat(i)});
    EXPECT_EQ(one.value("shard", -1), i);
    EXPECT_GT(one.value("estimated_live_records", uint64_t{0}), 0u) << i;
    sum += one.value("estimated_live_records", uint64_t{0});
  }
  EXPECT_EQ(total.value("estimated_live_records", uint64_t{0}), sum);
  EXPECT_THAT(Run({"stats"}).out, HasSubstr("all 2 (figures summed)"));
  EXPECT_THAT(Run({"stats"}, {.shard = "1"}).out, HasSubstr("1 of 2"));
}

TEST_F(IdemctlShardsTest, DumpLabelsEachLineWithItsShard) {
  const CtlOutput all = Run({"dump"});
  ASSERT_EQ(all.code, kExitOk) << all.err;
  std::map<int, int> lines_per_shard;
  std::istringstream lines(all.out);
  for (std::string line; std::getline(lines, line);) {
    const json v = json::parse(line, nullptr, /*allow_exceptions=*/false);
    ASSERT_TRUE(v.contains("shard")) << line;
    const int shard = v.at("shard").get<int>();
    ++lines_per_shard[shard];
    if (v.value("kind", "") == "offset" || v.value("kind", "") == "dedupe") {
      EXPECT_EQ(v.value("partition", -1) % kShards, shard) << line;
    }
  }
  EXPECT_EQ(lines_per_shard.size(), static_cast<size_t>(kShards));
  const CtlOutput one = Run({"dump"}, {.shard = "1"});
  ASSERT_EQ(one.code, kExitOk) << one.err;
  EXPECT_EQ(std::count(one.out.begin(), one.out.end(), '\n'),
            lines_per_shard[1]);
  EXPECT_THAT(one.out, Not(HasSubstr("\"shard\":0")));
}

TEST_F(IdemctlShardsTest, VerifyAndOffsetsCoverEveryShardOrOne) {
  const json total = RunJson({"verify"});
  EXPECT_TRUE(total.value("intact", false));
  uint64_t state = 0;
  for (int i = 0; i < kShards; ++i) {
    state += RunJson({"verify"}, {.shard = absl::StrCat(i)})
                 .value("state_entries", uint64_t{0});
  }
  EXPECT_EQ(total.value("state_entries", uint64_t{0}), state);
  EXPECT_EQ(state, uint64_t{kPartitions} + kShards);  // key/<p>, and last

  EXPECT_EQ(RunJson({"offsets"}).at("offsets").size(), size_t{kPartitions});
  std::set<int32_t> partitions;
  const json shard_offsets = RunJson({"offsets"}, {.shard = "0"});
  for (const json& o : shard_offsets.at("offsets")) {
    partitions.insert(o.value("partition", -1));
  }
  EXPECT_EQ(partitions, (std::set<int32_t>{0, 2}));
}

TEST_F(IdemctlShardsTest, ScanReadsOneShard) {
  CtlOutput r = Run({"scan"});
  EXPECT_EQ(r.code, kExitUsage);
  EXPECT_THAT(r.err, HasSubstr("'scan' reads one shard"));
  const json v = RunJson({"scan"}, {.partition = "orders:3"});
  EXPECT_EQ(v.value("shard", -1), 1);
  std::vector<std::string> keys;
  for (const json& e : v.at("entries")) keys.push_back(e.value("key", ""));
  EXPECT_EQ(keys, (std::vector<std::string>{"key/1", "key/3", "last"}));
  r = Run({"scan"}, {.shard = "0"});
  EXPECT_EQ(r.code, kExitOk) << r.err;
  EXPECT_THAT(r.out, HasSubstr("key/0\tv\nkey/2\tv\nlast\tm2\n3 keys\n"));
}

// seen, forget, set-offset, export and import find the partition's shard
// themselves, and checkpoint copies every shard: --shard is refused.
TEST_F(IdemctlShardsTest, WholeStoreSubcommandsFindThePartitionsShard) {
  EXPECT_EQ(Run({"seen", "m1"}, {.partition = "orders:1"}).code, kExitOk);
  EXPECT_EQ(Run({"seen", "m1"}, {.partition = "orders:3"}).code, kExitNotFound);
  EXPECT_EQ(Run({"set-offset", "orders", "3", "9"}).code, kExitOk);
  bool found = false;
  const json offsets = RunJson({"offsets"}, {.shard = "1"});
  for (const json& o : offsets.at("offsets")) {
    if (o.value("partition", -1) == 3) {
      found = true;
      EXPECT_EQ(o.value("offset", int64_t{-1}), 9);
    }
  }
  EXPECT_TRUE(found);
  const json exported =
      RunJson({"export", dir_.Sub("p1.jsonl")}, {.partition = "orders:1"});
  EXPECT_EQ(exported.value("state_entries", uint64_t{0}), 0u)
      << "the test writes no partition-prefixed state";
  EXPECT_EQ(exported.value("dedupe_records", uint64_t{0}), 1u);

  for (std::vector<std::string> command :
       {std::vector<std::string>{"seen", "m1"},
        std::vector<std::string>{"checkpoint", dir_.Sub("copy")},
        std::vector<std::string>{"set-offset", "orders", "3", "1"}}) {
    const CtlOutput r = Run(command, {.shard = "0"});
    EXPECT_EQ(r.code, kExitUsage) << command[0];
    EXPECT_THAT(r.err, HasSubstr("takes no --shard")) << command[0];
  }
}

TEST_F(IdemctlShardsTest, CompactRunsOnEveryShardOrOne) {
  EXPECT_EQ(Run({"compact"}).code, kExitOk);
  const CtlOutput r = Run({"compact"}, {.shard = "1", .json = true});
  EXPECT_EQ(r.code, kExitOk) << r.err;
  EXPECT_THAT(r.out, HasSubstr("\"compacted\":true"));
}

#if IDEM_HAVE_PROMETHEUS
TEST_F(IdemctlShardsTest, MetricsOfOneShardCarryItsNumber) {
  const CtlOutput total = Run({"metrics"});
  ASSERT_EQ(total.code, kExitOk) << total.err;
  EXPECT_THAT(total.out, Not(HasSubstr("shard=")));
  const CtlOutput one = Run({"metrics"}, {.shard = "1"});
  ASSERT_EQ(one.code, kExitOk) << one.err;
  EXPECT_THAT(one.out, HasSubstr("shard=\"1\""));
}
#endif

// An unsharded store is its own shard 0.
TEST(IdemctlUnshardedTest, ShardZeroIsTheStoreItselfAndNoOtherExists) {
  util::TempDir dir;
  {
    absl::StatusOr<std::unique_ptr<Engine>> engine =
        Engine::Open(dir.Sub("store"), Options());
    ASSERT_TRUE(engine.ok()) << engine.status();
  }
  IdemctlArgs args;
  args.store = dir.Sub("store");
  args.command = {"stats"};
  args.shard = "0";
  std::ostringstream out, err;
  EXPECT_EQ(RunIdemctl(args, out, err), kExitOk) << err.str();
  args.shard = "1";
  EXPECT_EQ(RunIdemctl(args, out, err), kExitUsage);
  EXPECT_THAT(err.str(), HasSubstr("has 1 shard (0)"));
}

}  // namespace
}  // namespace idem::cli
