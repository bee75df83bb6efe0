// idemctl's subcommands on a whole store: stats, seen, forget, compact,
// checkpoint, get, offsets and set-offset, and a store held open elsewhere.
// The other subcommands' tests are in tests/idemctl_*_test.cc.
#include "cli/idemctl.h"

#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "engine/record.h"
#include "engine/store.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "idem/engine.h"
#include "rocksdb/db.h"
#include "tests/idemctl_test_util.h"
#include "util/temp_dir.h"

namespace idem::cli {
namespace {

using ctl_test::BytesAt;
using ctl_test::CtlOutput;
using ctl_test::IdemctlTest;
using ctl_test::json;
using ctl_test::kBinaryKey;
using ctl_test::kBinaryValue;
using ctl_test::ParseObjectLine;
using ctl_test::Record;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

TEST_F(IdemctlTest, StatsPrintsFiguresForPeople) {
  CtlOutput r = Run({"stats"});
  EXPECT_EQ(r.code, kExitOk) << r.err;
  EXPECT_THAT(r.out, HasSubstr("estimated dedupe records"));
  EXPECT_THAT(r.out, HasSubstr("live SST bytes"));
  EXPECT_THAT(r.err, IsEmpty());
}

TEST_F(IdemctlTest, StatsAsJsonHasEveryStatsField) {
  CtlOutput r = Run({"stats"}, /*json=*/true);
  ASSERT_EQ(r.code, kExitOk) << r.err;
  const json v = ParseObjectLine(r.out);
  for (const char* field : {"processed",
                            "duplicates",
                            "failed",
                            "expired_dropped",
                            "user_bytes",
                            "wal_bytes",
                            "flush_bytes",
                            "compaction_bytes",
                            "write_amplification",
                            "live_sst_bytes",
                            "estimated_live_records",
                            "expiry_buckets",
                            "expiry_buckets_dropped",
                            "dedupe_compaction_write_amplification",
                            "memtable_bytes",
                            "block_cache_bytes",
                            "table_reader_bytes",
                            "bloom_filter_useful",
                            "bloom_filter_positive",
                            "data_blocks_read",
                            "outbox_pending",
                            "outbox_emitted",
                            "outbox_acknowledged"}) {
    ASSERT_TRUE(v.contains(field)) << field << " missing in " << r.out;
    EXPECT_TRUE(v.at(field).is_number()) << field;
  }
  // Counters run from when idemctl opened the store: it processed nothing.
  EXPECT_EQ(v.at("processed"), 0);
  EXPECT_EQ(v.at("outbox_pending"), 1);  // a figure of the store
}

// `seen` answers in its exit code too: 0 seen, 1 not seen, 3 a failure.
TEST_F(IdemctlTest, SeenExitsZeroIfSeenAndOneIfNot) {
  EXPECT_EQ(Run({"seen", "order-1"}).code, kExitOk);
  EXPECT_EQ(Run({"seen", "never-delivered"}).code, kExitNotSeen);
  EXPECT_EQ(Run({"seen", "stale"}).code, kExitNotSeen);
  EXPECT_EQ(Run({"seen", "never-delivered"}, /*json=*/true).code, kExitNotSeen);
  EXPECT_EQ(kExitNotSeen, 1);
  EXPECT_EQ(kExitStoreFailure, 3);
}

TEST_F(IdemctlTest, SeenReportsLiveRecordsOnly) {
  EXPECT_EQ(Run({"seen", "order-1"}).out, "seen\n");
  EXPECT_EQ(Run({"seen", "never-delivered"}).out, "not seen\n");
  // Expired by the system clock, though still stored.
  EXPECT_EQ(Run({"seen", "stale"}).out, "not seen\n");
  CtlOutput r = Run({"seen", "order-1"}, /*json=*/true);
  EXPECT_EQ(r.code, kExitOk) << r.err;
  const json v = ParseObjectLine(r.out);
  ASSERT_TRUE(v.contains("id"));
  EXPECT_EQ(BytesAt(v, "id"), "order-1");
  ASSERT_TRUE(v.contains("seen"));
  EXPECT_EQ(v.at("seen"), true);
}

TEST_F(IdemctlTest, ForgetLetsTheNextDeliveryRunAgain) {
  CtlOutput r = Run({"forget", "order-1"}, /*json=*/true);
  ASSERT_EQ(r.code, kExitOk) << r.err;
  const json v = ParseObjectLine(r.out);
  ASSERT_TRUE(v.contains("was_seen"));
  EXPECT_EQ(v.at("was_seen"), true);
  EXPECT_EQ(Run({"seen", "order-1"}).out, "not seen\n");

  auto engine = Engine::Open(db(), Options{});
  ASSERT_TRUE(engine.ok()) << engine.status();
  auto again = (*engine)->Process({.id = "order-1"}, Record);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->outcome, Outcome::kProcessed);
  auto other = (*engine)->Process({.id = "order-2"}, Record);
  ASSERT_TRUE(other.ok()) << other.status();
  EXPECT_EQ(other->outcome, Outcome::kDuplicate);
}

TEST_F(IdemctlTest, ForgetOfAnUnknownIdSucceeds) {
  CtlOutput r = Run({"forget", "never-delivered"});
  EXPECT_EQ(r.code, kExitOk) << r.err;
  EXPECT_THAT(r.out, HasSubstr("not seen"));
}

TEST_F(IdemctlTest, CompactDropsExpiredRecords) {
  CtlOutput r = Run({"compact"}, /*json=*/true);
  ASSERT_EQ(r.code, kExitOk) << r.err;
  const json v = ParseObjectLine(r.out);
  ASSERT_TRUE(v.contains("expired_dropped")) << r.out;
  EXPECT_EQ(v.at("expired_dropped"), 1);
  ASSERT_TRUE(v.contains("live_sst_bytes_after")) << r.out;

  CtlOutput dump = Run({"dump"});
  ASSERT_EQ(dump.code, kExitOk) << dump.err;
  EXPECT_THAT(dump.out, Not(HasSubstr("\"expired\":true")));
  EXPECT_EQ(Run({"seen", "order-2"}).out, "seen\n");
}

TEST_F(IdemctlTest, CheckpointWritesACopyTheEngineOpens) {
  const std::string copy = dir_.Sub("copy");
  CtlOutput r = Run({"checkpoint", copy});
  ASSERT_EQ(r.code, kExitOk) << r.err;
  EXPECT_THAT(r.out, HasSubstr(copy));

  Options options;
  options.create_if_missing = false;
  auto engine = Engine::Open(copy, options);
  ASSERT_TRUE(engine.ok()) << engine.status();
  EXPECT_EQ(*(*engine)->GetState(kBinaryKey),
            std::optional<std::string>(kBinaryValue));
  EXPECT_TRUE(*(*engine)->Seen("order-2"));
}

TEST_F(IdemctlTest, CheckpointIntoAnExistingDirectoryFails) {
  CtlOutput r = Run({"checkpoint", dir_.path()}, /*json=*/true);
  EXPECT_EQ(r.code, kExitStoreFailure);
  EXPECT_THAT(r.err, HasSubstr("already exists"));
  EXPECT_THAT(r.out, IsEmpty());
}

// The dedupe policies' fields (record version 2): when the ID was first
// processed, its fingerprint (Options::detect_conflicts) and a remembered
// permanent failure.

TEST_F(IdemctlTest, MissingStoreIsAnErrorAndIsNotCreated) {
  const std::string missing = dir_.Sub("missing");
  CtlOutput r = Run({"stats"}, /*json=*/false, missing);
  EXPECT_EQ(r.code, kExitStoreFailure);
  EXPECT_THAT(r.err, HasSubstr("cannot open store"));
  EXPECT_THAT(r.err, HasSubstr("NOT_FOUND"));
  EXPECT_THAT(r.out, IsEmpty());
  EXPECT_FALSE(std::filesystem::exists(missing));
}

TEST_F(IdemctlTest, ChangingAStoreOpenInAnotherEngineIsAnError) {
  auto engine = Engine::Open(db(), Options{});
  ASSERT_TRUE(engine.ok()) << engine.status();
  CtlOutput r = Run({"compact"});
  EXPECT_EQ(r.code, kExitStoreFailure);
  EXPECT_THAT(r.err, HasSubstr("cannot open store"));
  // Inspecting it works (read-only).
  EXPECT_EQ(Run({"stats"}).code, 0);
}

TEST_F(IdemctlTest, GetPrintsTheStoredValue) {
  CtlOutput r = Run({"get", "state/order-1"});
  EXPECT_EQ(r.code, kExitOk) << r.err;
  EXPECT_EQ(r.out, "v\n");
  r = Run({"get", kBinaryKey}, /*json=*/true);
  ASSERT_EQ(r.code, kExitOk) << r.err;
  const json v = ParseObjectLine(r.out);
  EXPECT_EQ(BytesAt(v, "key"), kBinaryKey);
  EXPECT_EQ(v.value("found", json()), true);
  EXPECT_EQ(BytesAt(v, "value"), kBinaryValue);
}

TEST_F(IdemctlTest, GetOfAnAbsentKeyExitsNotFound) {
  CtlOutput r = Run({"get", "no-such-key"});
  EXPECT_EQ(r.code, kExitNotFound);
  EXPECT_EQ(kExitNotFound, kExitNotSeen);
  EXPECT_THAT(r.out, IsEmpty());
  EXPECT_THAT(r.err, HasSubstr("no state value"));
  r = Run({"get", "no-such-key"}, /*json=*/true);
  EXPECT_EQ(r.code, kExitNotFound);
  const json v = ParseObjectLine(r.out);
  EXPECT_EQ(v.value("found", json()), false);
  EXPECT_TRUE(v.value("value", json(1)).is_null());
}

TEST_F(IdemctlTest, OffsetsListsEveryStoredOffset) {
  CtlOutput r = Run({"offsets"});
  ASSERT_EQ(r.code, kExitOk) << r.err;
  EXPECT_EQ(r.out, "orders:3 42 (a consumer resumes at 43)\n");
  r = Run({"offsets"}, /*json=*/true);
  ASSERT_EQ(r.code, kExitOk) << r.err;
  const json v = ParseObjectLine(r.out);
  ASSERT_TRUE(v.contains("offsets") && v.at("offsets").is_array()) << r.out;
  ASSERT_EQ(v.at("offsets").size(), 1u);
  const json& o = v.at("offsets")[0];
  EXPECT_EQ(BytesAt(o, "source"), "orders");
  EXPECT_EQ(o.value("partition", json()), 3);
  EXPECT_EQ(o.value("offset", json()), 42);
}

TEST_F(IdemctlTest, SetOffsetRewindsAndLeavesRecordsAlone) {
  CtlOutput r = Run({"set-offset", "orders", "3", "10"}, /*json=*/true);
  ASSERT_EQ(r.code, kExitOk) << r.err;
  const json v = ParseObjectLine(r.out);
  EXPECT_EQ(v.value("previous_offset", json()), 42);
  EXPECT_EQ(v.value("offset", json()), 10);
  EXPECT_EQ(v.value("resumes_at", json()), 11);
  EXPECT_EQ(Run({"offsets"}).out, "orders:3 10 (a consumer resumes at 11)\n");
  EXPECT_EQ(Run({"seen", "order-2"}).code, kExitOk);  // still a duplicate

  r = Run({"set-offset", "orders", "9", "5"});  // a partition without one
  ASSERT_EQ(r.code, kExitOk) << r.err;
  EXPECT_THAT(r.out, HasSubstr("orders:9: offset (none) -> 5"));
  auto engine = Engine::Open(db(), Options{});
  ASSERT_TRUE(engine.ok()) << engine.status();
  EXPECT_EQ(*(*engine)->CommittedOffset("orders", 3),
            std::optional<int64_t>(10));
  EXPECT_EQ(*(*engine)->CommittedOffset("orders", 9),
            std::optional<int64_t>(5));
}

TEST_F(IdemctlTest, SetOffsetRefusesAStoreOpenElsewhere) {
  auto engine = Engine::Open(db(), Options{});
  ASSERT_TRUE(engine.ok()) << engine.status();
  CtlOutput r = Run({"set-offset", "orders", "3", "10"});
  EXPECT_EQ(r.code, kExitStoreFailure);
  EXPECT_THAT(r.err, HasSubstr("open elsewhere"));
  EXPECT_THAT(r.err, HasSubstr("FAILED_PRECONDITION"));
  EXPECT_EQ(*(*engine)->CommittedOffset("orders", 3),
            std::optional<int64_t>(42));
}

// Inspection opens the store read-only, so it works while a consumer holds
// it; changes still need the store alone.
TEST(IdemctlReadOnlyTest, InspectsAStoreThatAnEngineHoldsOpen) {
  idem::util::TempDir dir;
  const std::string db = dir.Sub("db");
  auto engine = Engine::Open(db, Options());
  ASSERT_TRUE(engine.ok()) << engine.status();
  ASSERT_TRUE((*engine)
                  ->Process({.id = "held"},
                            [](const Message&, Txn& txn) {
                              txn.Put("k", "v");
                              return absl::OkStatus();
                            })
                  .ok());
  std::ostringstream out, err;
  IdemctlArgs args;
  args.store = db;
  args.command = {"seen", "held"};
  EXPECT_EQ(RunIdemctl(args, out, err), 0) << err.str();
  EXPECT_NE(out.str().find("seen"), std::string::npos) << out.str();
  std::ostringstream out2, err2;
  args.command = {"forget", "held"};
  EXPECT_EQ(RunIdemctl(args, out2, err2), kExitStoreFailure);
  EXPECT_TRUE(*(*engine)->Seen("held"));
}

}  // namespace
}  // namespace idem::cli
