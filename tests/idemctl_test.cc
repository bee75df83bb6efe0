#include "cli/idemctl.h"

#include <algorithm>
#include <filesystem>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "idem/clock.h"
#include "idem/engine.h"
#include "nlohmann/json.hpp"
#include "tests/testing/engine_test_util.h"
#include "tests/testing/json_bytes.h"
#include "util/temp_dir.h"

namespace idem::cli {
namespace {

using json = nlohmann::json;

using ::idem::test::Latin1Bytes;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

// A state key and value with every awkward byte class: quote, backslash,
// control characters, NUL and non-ASCII.
const std::string kBinaryKey("bin\"\\\n\x00\x7f\xff", 9);
const std::string kBinaryValue("\x01\xc3\xa9z", 4);

absl::Status Record(const Message& m, Txn& txn) {
  txn.Put(absl::StrCat("state/", std::string(m.id)), "v");
  if (m.id == "order-1") txn.Put(kBinaryKey, kBinaryValue);
  if (m.id == "order-2") {
    const Txn::Header headers[] = {{"trace", kBinaryValue}};
    txn.EmitWithHeaders("shipments", kBinaryKey, "ship", headers);
  }
  txn.SetResult(absl::StrCat("ok:", std::string(m.id)));
  return absl::OkStatus();
}

// The bytes of the string member `key` of `v`, written in JsonQuoteBytes's
// one-code-point-per-byte convention; "" if it is missing or not a string.
std::string BytesAt(const json& v, const char* key) {
  const auto it = v.find(key);
  if (it == v.end() || !it->is_string()) return "";
  return Latin1Bytes(it->get<std::string>());
}

struct Output {
  int code = -1;
  std::string out;
  std::string err;
};

class IdemctlTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // A store holding two live records, one expired record, three state
    // entries plus the binary one, one offset and one outbox entry. The expired
    // record is written through a clock a day behind, so it has already expired
    // by the system clock that idemctl uses.
    ManualClock past(absl::Now() - absl::Hours(24));
    Options options;
    options.clock = &past;
    auto engine = Engine::Open(db(), options);
    ASSERT_TRUE(engine.ok()) << engine.status();
    ASSERT_TRUE((*engine)
                    ->Process({.id = "stale", .ttl = absl::Hours(1)}, Record)
                    .ok());
    ASSERT_TRUE((*engine)
                    ->Process({.id = "order-1",
                               .source = "orders",
                               .partition = 3,
                               .offset = 41},
                              Record)
                    .ok());
    ASSERT_TRUE((*engine)
                    ->Process({.id = "order-2",
                               .source = "orders",
                               .partition = 3,
                               .offset = 42},
                              Record)
                    .ok());
  }

  std::string db() const { return dir_.Sub("db"); }

  Output Run(std::vector<std::string> command, bool json = false,
             std::optional<std::string> db_path = std::nullopt) {
    IdemctlArgs args;
    args.store = db_path.has_value() ? *db_path : db();
    args.json = json;
    args.command = std::move(command);
    std::ostringstream out, err;
    Output result;
    result.code = RunIdemctl(args, out, err);
    result.out = out.str();
    result.err = err.str();
    return result;
  }

  // Parses `out` as exactly one JSON object on one line.
  static json ParseObjectLine(const std::string& out) {
    EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << out;
    json v = json::parse(out, /*cb=*/nullptr, /*allow_exceptions=*/false);
    EXPECT_FALSE(v.is_discarded()) << "not JSON: " << out;
    if (v.is_discarded()) return json();
    EXPECT_TRUE(v.is_object()) << out;
    return v;
  }

  util::TempDir dir_;
};

TEST_F(IdemctlTest, StatsPrintsFiguresForPeople) {
  Output r = Run({"stats"});
  EXPECT_EQ(r.code, kExitOk) << r.err;
  EXPECT_THAT(r.out, HasSubstr("estimated dedupe records"));
  EXPECT_THAT(r.out, HasSubstr("live SST bytes"));
  EXPECT_THAT(r.err, IsEmpty());
}

TEST_F(IdemctlTest, StatsAsJsonHasEveryStatsField) {
  Output r = Run({"stats"}, /*json=*/true);
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
  Output r = Run({"seen", "order-1"}, /*json=*/true);
  EXPECT_EQ(r.code, kExitOk) << r.err;
  const json v = ParseObjectLine(r.out);
  ASSERT_TRUE(v.contains("id"));
  EXPECT_EQ(BytesAt(v, "id"), "order-1");
  ASSERT_TRUE(v.contains("seen"));
  EXPECT_EQ(v.at("seen"), true);
}

TEST_F(IdemctlTest, ForgetLetsTheNextDeliveryRunAgain) {
  Output r = Run({"forget", "order-1"}, /*json=*/true);
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
  Output r = Run({"forget", "never-delivered"});
  EXPECT_EQ(r.code, kExitOk) << r.err;
  EXPECT_THAT(r.out, HasSubstr("not seen"));
}

TEST_F(IdemctlTest, CompactDropsExpiredRecords) {
  Output r = Run({"compact"}, /*json=*/true);
  ASSERT_EQ(r.code, kExitOk) << r.err;
  const json v = ParseObjectLine(r.out);
  ASSERT_TRUE(v.contains("expired_dropped")) << r.out;
  EXPECT_EQ(v.at("expired_dropped"), 1);
  ASSERT_TRUE(v.contains("live_sst_bytes_after")) << r.out;

  Output dump = Run({"dump"});
  ASSERT_EQ(dump.code, kExitOk) << dump.err;
  EXPECT_THAT(dump.out, Not(HasSubstr("\"expired\":true")));
  EXPECT_EQ(Run({"seen", "order-2"}).out, "seen\n");
}

TEST_F(IdemctlTest, CheckpointWritesACopyTheEngineOpens) {
  const std::string copy = dir_.Sub("copy");
  Output r = Run({"checkpoint", copy});
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
  Output r = Run({"checkpoint", dir_.path()}, /*json=*/true);
  EXPECT_EQ(r.code, kExitStoreFailure);
  EXPECT_THAT(r.err, HasSubstr("already exists"));
  EXPECT_THAT(r.out, IsEmpty());
}

TEST_F(IdemctlTest, DumpWritesOneJsonObjectPerStoredItem) {
  Output r = Run({"dump"});
  ASSERT_EQ(r.code, kExitOk) << r.err;
  for (char c : r.out) {
    if (c != '\n') {
      EXPECT_TRUE(c >= 0x20 && c <= 0x7e) << int{c};
    }
  }
  int dedupe = 0, state = 0, offset = 0, expired = 0, outbox = 0;
  bool saw_binary = false, saw_result = false;
  const std::vector<std::string> lines =
      absl::StrSplit(r.out, '\n', absl::SkipEmpty());
  for (const std::string& line : lines) {
    const json v =
        json::parse(line, /*cb=*/nullptr, /*allow_exceptions=*/false);
    ASSERT_TRUE(v.is_object()) << "not a JSON object: " << line;
    ASSERT_TRUE(v.contains("kind")) << line;
    const std::string kind = BytesAt(v, "kind");
    if (kind == "dedupe") {
      ++dedupe;
      ASSERT_TRUE(v.contains("key")) << line;
      EXPECT_EQ(BytesAt(v, "key").size(), 32u) << line;
      ASSERT_TRUE(v.contains("expires_at")) << line;
      ASSERT_TRUE(v.contains("expires_at_unix_micros")) << line;
      ASSERT_TRUE(v.contains("expired")) << line;
      if (v.at("expired") == true) ++expired;
      ASSERT_TRUE(v.contains("result")) << line;
      if (BytesAt(v, "result") == "ok:order-1") saw_result = true;
    } else if (kind == "state") {
      ++state;
      ASSERT_TRUE(v.contains("key")) << line;
      ASSERT_TRUE(v.contains("value")) << line;
      if (BytesAt(v, "key") == kBinaryKey) {
        saw_binary = true;
        EXPECT_EQ(BytesAt(v, "value"), kBinaryValue);
      }
    } else if (kind == "offset") {
      ++offset;
      ASSERT_TRUE(v.contains("source")) << line;
      EXPECT_EQ(BytesAt(v, "source"), "orders");
      EXPECT_EQ(v.value("partition", json()), 3) << line;
      EXPECT_EQ(v.value("offset", json()), 42) << line;
    } else if (kind == "outbox") {
      ++outbox;
      EXPECT_EQ(v.value("position", json()), 1) << line;
      EXPECT_EQ(BytesAt(v, "message_id"), test::HexOfIdHash("order-2") + "-0");
      EXPECT_EQ(BytesAt(v, "destination"), "shipments");
      EXPECT_EQ(BytesAt(v, "key"), kBinaryKey);
      EXPECT_EQ(BytesAt(v, "value"), "ship");
      ASSERT_TRUE(v.contains("headers")) << line;
      const json& headers = v.at("headers");
      ASSERT_TRUE(headers.is_array() && headers.size() == 1) << line;
      EXPECT_EQ(Latin1Bytes(headers[0][0].get<std::string>()), "trace");
      EXPECT_EQ(Latin1Bytes(headers[0][1].get<std::string>()), kBinaryValue);
    } else {
      ADD_FAILURE() << "unknown kind in " << line;
    }
  }
  EXPECT_EQ(dedupe, 3);
  EXPECT_EQ(expired, 1);
  EXPECT_EQ(state, 4);
  EXPECT_EQ(offset, 1);
  EXPECT_EQ(outbox, 1);
  EXPECT_TRUE(saw_binary);
  EXPECT_TRUE(saw_result);
}

TEST_F(IdemctlTest, MissingStoreIsAnErrorAndIsNotCreated) {
  const std::string missing = dir_.Sub("missing");
  Output r = Run({"stats"}, /*json=*/false, missing);
  EXPECT_EQ(r.code, kExitStoreFailure);
  EXPECT_THAT(r.err, HasSubstr("cannot open store"));
  EXPECT_THAT(r.err, HasSubstr("NOT_FOUND"));
  EXPECT_THAT(r.out, IsEmpty());
  EXPECT_FALSE(std::filesystem::exists(missing));
}

TEST_F(IdemctlTest, ChangingAStoreOpenInAnotherEngineIsAnError) {
  auto engine = Engine::Open(db(), Options{});
  ASSERT_TRUE(engine.ok()) << engine.status();
  Output r = Run({"compact"});
  EXPECT_EQ(r.code, kExitStoreFailure);
  EXPECT_THAT(r.err, HasSubstr("cannot open store"));
  // Inspecting it works (read-only).
  EXPECT_EQ(Run({"stats"}).code, 0);
}

struct UsageCase {
  std::string name;
  std::string store;
  std::vector<std::string> command;
  std::string message;
};

class IdemctlUsageTest : public ::testing::TestWithParam<UsageCase> {};

TEST_P(IdemctlUsageTest, ExitsWithUsageCodeAndTouchesNothing) {
  util::TempDir dir;
  const UsageCase& c = GetParam();
  IdemctlArgs args;
  args.store = c.store.empty() ? "" : dir.Sub(c.store);
  args.command = c.command;
  std::ostringstream out, err;
  EXPECT_EQ(RunIdemctl(args, out, err), kExitUsage);
  EXPECT_THAT(err.str(), HasSubstr(c.message));
  EXPECT_THAT(err.str(), HasSubstr("--help"));
  EXPECT_THAT(out.str(), IsEmpty());
  EXPECT_TRUE(std::filesystem::is_empty(dir.path()));
}

INSTANTIATE_TEST_SUITE_P(
    BadCommandLines, IdemctlUsageTest,
    ::testing::Values(
        UsageCase{"MissingDb", "", {"stats"}, "--store=PATH is required"},
        UsageCase{"NoSubcommand", "db", {}, "no subcommand"},
        UsageCase{"UnknownSubcommand",
                  "db",
                  {"frobnicate"},
                  "unknown subcommand 'frobnicate'"},
        UsageCase{"SeenWithoutId", "db", {"seen"}, "exactly one argument, ID"},
        UsageCase{"ForgetWithTwoIds",
                  "db",
                  {"forget", "a", "b"},
                  "exactly one argument, ID"},
        UsageCase{
            "StatsWithArgument", "db", {"stats", "x"}, "takes no arguments"},
        UsageCase{"CheckpointWithoutDir",
                  "db",
                  {"checkpoint"},
                  "exactly one argument, DIR"},
        UsageCase{"EmptyId", "db", {"seen", ""}, "ID must be 1 to"},
        UsageCase{"TooLongId",
                  "db",
                  {"seen", std::string(1025, 'x')},
                  "ID must be 1 to"}),
    [](const ::testing::TestParamInfo<UsageCase>& info) {
      return info.param.name;
    });

TEST(IdemctlUsageTextTest, ListsEverySubcommand) {
  const std::string usage = IdemctlUsage();
  for (const char* sub :
       {"stats", "seen ID", "forget ID", "compact", "checkpoint DIR", "dump"}) {
    EXPECT_THAT(usage, HasSubstr(sub));
  }
}

}  // namespace
}  // namespace idem::cli

namespace idem::cli {
namespace {

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
