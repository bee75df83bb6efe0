#include "cli/idemctl.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "cli/partition_file.h"
#include "engine/record.h"
#include "engine/store.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "idem/clock.h"
#include "idem/engine.h"
#include "idem/partition_snapshot.h"
#include "idem/partition_state.h"
#include "nlohmann/json.hpp"
#include "rocksdb/db.h"
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

struct CtlOutput {
  int code = -1;
  std::string out;
  std::string err;
};

CtlOutput RunArgs(const IdemctlArgs& args) {
  std::ostringstream out, err;
  CtlOutput result;
  result.code = RunIdemctl(args, out, err);
  result.out = out.str();
  result.err = err.str();
  return result;
}

// Parses `out` as exactly one JSON object on one line.
json ParseObjectLine(const std::string& out) {
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << out;
  json v = json::parse(out, /*cb=*/nullptr, /*allow_exceptions=*/false);
  EXPECT_FALSE(v.is_discarded()) << "not JSON: " << out;
  if (v.is_discarded()) return json();
  EXPECT_TRUE(v.is_object()) << out;
  return v;
}

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

  CtlOutput Run(std::vector<std::string> command, bool json = false,
                std::optional<std::string> db_path = std::nullopt) {
    IdemctlArgs args;
    args.store = db_path.has_value() ? *db_path : db();
    args.json = json;
    args.command = std::move(command);
    return RunArgs(args);
  }

  util::TempDir dir_;
};

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
TEST_F(IdemctlTest, DumpShowsTheDedupePoliciesFields) {
  const std::string path = dir_.Sub("policies");
  {
    Options options;
    options.detect_conflicts = true;
    auto engine = Engine::Open(path, options);
    ASSERT_TRUE(engine.ok()) << engine.status();
    ASSERT_TRUE(
        (*engine)->Process({.id = "fine", .payload = "p"}, Record).ok());
    ASSERT_TRUE((*engine)
                    ->Process({.id = "bad"},
                              [](const Message&, Txn&) {
                                return PermanentError(
                                    absl::InvalidArgumentError("no account"));
                              })
                    .ok());
  }
  CtlOutput r = Run({"dump"}, /*json=*/false, path);
  ASSERT_EQ(r.code, kExitOk) << r.err;
  int records = 0;
  for (const std::string& line : std::vector<std::string>(
           absl::StrSplit(r.out, '\n', absl::SkipEmpty()))) {
    const json v = json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (BytesAt(v, "kind") != "dedupe") continue;
    ++records;
    EXPECT_EQ(v.value("record_version", 0), 2) << line;
    EXPECT_TRUE(v.contains("first_processed_at")) << line;
    EXPECT_EQ(BytesAt(v, "fingerprint").size(), 16u) << line;
    if (BytesAt(v, "key") == test::HexOfIdHash("bad")) {
      EXPECT_EQ(BytesAt(v, "failure_code"), "INVALID_ARGUMENT") << line;
      EXPECT_EQ(BytesAt(v, "failure"), "no account") << line;
    } else {
      EXPECT_FALSE(v.contains("failure")) << line;
    }
  }
  EXPECT_EQ(records, 2);
}

TEST_F(IdemctlTest, DumpWritesOneJsonObjectPerStoredItem) {
  CtlOutput r = Run({"dump"});
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

TEST_F(IdemctlTest, VerifyCountsAnIntactStore) {
  CtlOutput r = Run({"verify"});
  ASSERT_EQ(r.code, kExitOk) << r.err;
  EXPECT_THAT(r.out, HasSubstr("intact"));
  r = Run({"verify"}, /*json=*/true);
  ASSERT_EQ(r.code, kExitOk) << r.err;
  const json v = ParseObjectLine(r.out);
  EXPECT_EQ(v.value("intact", json()), true);
  EXPECT_EQ(v.value("dedupe_records", json()), 3);
  EXPECT_EQ(v.value("expired_dedupe_records", json()), 1);
  EXPECT_EQ(v.value("state_entries", json()), 4);
  EXPECT_EQ(v.value("offsets", json()), 1);
  EXPECT_EQ(v.value("outbox_entries", json()), 1);
}

// A dedupe record that no longer decodes (written past the engine, as a
// damaged block would read) is reported with its key.
TEST_F(IdemctlTest, VerifyReportsADamagedRecordAndExitsNonZero) {
  ASSERT_NO_FATAL_FAILURE(test::ChangeRawFamily(
      db(), kDedupeColumnFamily,
      [](rocksdb::DB* raw, rocksdb::ColumnFamilyHandle* family) {
        ASSERT_NE(family, nullptr);
        ASSERT_TRUE(raw->Put(rocksdb::WriteOptions(), family,
                             std::string(KeyView(HashMessageId("order-1"))),
                             "garbage")
                        .ok());
      }));
  CtlOutput r = Run({"verify"});
  EXPECT_EQ(r.code, kExitStoreFailure);
  EXPECT_THAT(r.err, HasSubstr("DATA_LOSS"));
  EXPECT_THAT(r.err, HasSubstr(test::HexOfIdHash("order-1")));
  r = Run({"verify"}, /*json=*/true);
  EXPECT_EQ(r.code, kExitStoreFailure);
  const json v = ParseObjectLine(r.out);
  EXPECT_EQ(v.value("intact", json()), false);
  EXPECT_THAT(v.value("error", ""), HasSubstr(test::HexOfIdHash("order-1")));
}

TEST_F(IdemctlTest, VerifyReportsADamagedOffset) {
  ASSERT_NO_FATAL_FAILURE(test::ChangeRawFamily(
      db(), kOffsetsColumnFamily,
      [](rocksdb::DB* raw, rocksdb::ColumnFamilyHandle* family) {
        ASSERT_NE(family, nullptr);
        ASSERT_TRUE(raw->Put(rocksdb::WriteOptions(), family,
                             EncodeOffsetKey("orders", 3), "x")
                        .ok());
      }));
  CtlOutput r = Run({"verify"});
  EXPECT_EQ(r.code, kExitStoreFailure);
  EXPECT_THAT(r.err, HasSubstr("DATA_LOSS"));
  EXPECT_THAT(r.err, HasSubstr("\"orders\" partition 3"));
}

TEST_F(IdemctlTest, ExportOfAnEmptyPartitionWritesNothing) {
  const std::string file = dir_.Sub("empty.jsonl");
  IdemctlArgs args;
  args.store = db();
  args.partition = "orders:4";
  args.command = {"export", file};
  CtlOutput r = RunArgs(args);
  EXPECT_EQ(r.code, kExitNotFound);
  EXPECT_THAT(r.err, HasSubstr("nothing stored for orders:4"));
  EXPECT_FALSE(std::filesystem::exists(file));
}

TEST_F(IdemctlTest, ExportIntoAnExistingFileFails) {
  IdemctlArgs args;
  args.store = db();
  args.source = "orders";
  args.partition = "3";
  args.command = {"export", dir_.path()};
  CtlOutput r = RunArgs(args);
  EXPECT_EQ(r.code, kExitStoreFailure);
  EXPECT_THAT(r.err, HasSubstr("already exists"));
}

// Stores whose dedupe records are kept per partition (DedupeScope::kPartition):
// the source store holds partition ("orders", 3) and ("orders", 4).
class IdemctlPartitionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto engine = Engine::Open(source(), ScopedOptions());
    ASSERT_TRUE(engine.ok()) << engine.status();
    for (int64_t offset = 0; offset < 3; ++offset) {
      const std::string id = absl::StrCat("m", offset);
      for (int32_t partition : {3, 4}) {
        ASSERT_TRUE((*engine)
                        ->Process({.id = id,
                                   .source = "orders",
                                   .partition = partition,
                                   .offset = offset},
                                  Write)
                        .ok());
      }
    }
  }

  // Writes the partition's "last" (the message ID) and a binary key, and
  // returns a binary result.
  static absl::Status Write(const Message& m, Txn& txn) {
    PartitionTxn state(txn, m.source, m.partition);
    state.Put("last", m.id);
    state.Put(kBinaryKey, kBinaryValue);
    state.SetResult(kBinaryValue + std::string(m.id));
    return absl::OkStatus();
  }

  static Options ScopedOptions() {
    Options options;
    options.dedupe_scope = DedupeScope::kPartition;
    return options;
  }

  std::string source() const { return dir_.Sub("source"); }
  std::string target() const { return dir_.Sub("target"); }

  // An empty partition-scoped store at target().
  void CreateTarget() {
    auto engine = Engine::Open(target(), ScopedOptions());
    ASSERT_TRUE(engine.ok()) << engine.status();
  }

  static CtlOutput Run(const std::string& store,
                       std::vector<std::string> command,
                       std::optional<std::string> partition = std::nullopt,
                       bool json = false) {
    IdemctlArgs args;
    args.store = store;
    args.json = json;
    args.partition = std::move(partition);
    args.command = std::move(command);
    return RunArgs(args);
  }

  static PartitionSnapshot Export(const std::string& store, int32_t partition) {
    Options options;
    options.read_only = true;
    auto engine = Engine::Open(store, options);
    EXPECT_TRUE(engine.ok()) << engine.status();
    if (!engine.ok()) return {};
    absl::StatusOr<PartitionSnapshot> snapshot =
        (*engine)->ExportPartition("orders", partition);
    EXPECT_TRUE(snapshot.ok()) << snapshot.status();
    return snapshot.ok() ? *snapshot : PartitionSnapshot{};
  }

  util::TempDir dir_;
};

TEST_F(IdemctlPartitionTest, SeenAndForgetNameThePartition) {
  // Without it the command line is incomplete: a usage error.
  CtlOutput r = Run(source(), {"seen", "m1"});
  EXPECT_EQ(r.code, kExitUsage);
  EXPECT_THAT(r.err, HasSubstr("--source=S --partition=P"));
  EXPECT_EQ(Run(source(), {"forget", "m1"}).code, kExitUsage);
  EXPECT_EQ(Run(source(), {"seen", "m1"}, "orders:3").code, kExitOk);
  EXPECT_EQ(Run(source(), {"seen", "m1"}, "orders:5").code, kExitNotFound);

  // Writable: the store's scope is found, not assumed.
  r = Run(source(), {"forget", "m1"}, "orders:3", /*json=*/true);
  ASSERT_EQ(r.code, kExitOk) << r.err;
  const json v = ParseObjectLine(r.out);
  EXPECT_EQ(BytesAt(v, "source"), "orders");
  EXPECT_EQ(v.value("partition", json()), 3);
  EXPECT_EQ(v.value("was_seen", json()), true);
  EXPECT_EQ(Run(source(), {"seen", "m1"}, "orders:3").code, kExitNotFound);
  EXPECT_EQ(Run(source(), {"seen", "m1"}, "orders:4").code, kExitOk);
}

TEST_F(IdemctlPartitionTest, WritableSubcommandsOpenAPartitionScopedStore) {
  EXPECT_EQ(Run(source(), {"compact"}).code, kExitOk);
  EXPECT_EQ(Run(source(), {"set-offset", "orders", "3", "0"}).code, kExitOk);
  EXPECT_EQ(Run(source(), {"checkpoint", dir_.Sub("copy")}).code, kExitOk);
}

TEST_F(IdemctlPartitionTest, ExportThenImportMovesThePartitionExactly) {
  const std::string file = dir_.Sub("orders-3.jsonl");
  CtlOutput r = Run(source(), {"export", file}, "orders:3", /*json=*/true);
  ASSERT_EQ(r.code, kExitOk) << r.err;
  json v = ParseObjectLine(r.out);
  EXPECT_EQ(v.value("state_entries", json()), 2);
  EXPECT_EQ(v.value("dedupe_records", json()), 3);
  EXPECT_EQ(v.value("offset", json()), 2);

  ASSERT_NO_FATAL_FAILURE(CreateTarget());
  r = Run(target(), {"import", file}, std::nullopt, /*json=*/true);
  ASSERT_EQ(r.code, kExitOk) << r.err;
  v = ParseObjectLine(r.out);
  EXPECT_EQ(v.value("already_imported", json()), false);

  const PartitionSnapshot want = Export(source(), 3);
  const PartitionSnapshot got = Export(target(), 3);
  EXPECT_EQ(got.offset, std::optional<int64_t>(2));
  EXPECT_EQ(got.entries, want.entries);
  // Every record, byte for byte; the import adds its own (ImportPartition).
  EXPECT_EQ(got.records.size(), want.records.size() + 1);
  for (const PartitionRecord& w : want.records) {
    EXPECT_TRUE(std::any_of(got.records.begin(), got.records.end(),
                            [&w](const PartitionRecord& g) {
                              return g.id_hash == w.id_hash &&
                                     g.expires_at == w.expires_at &&
                                     g.result == w.result;
                            }))
        << "record missing: result " << w.result;
  }
  EXPECT_EQ(Export(target(), 4).offset, std::nullopt);  // only partition 3

  r = Run(target(), {"import", file});
  ASSERT_EQ(r.code, kExitOk) << r.err;
  EXPECT_THAT(r.out, HasSubstr("already imported"));
}

TEST_F(IdemctlPartitionTest, ImportOverAHigherOffsetFails) {
  const std::string file = dir_.Sub("orders-3.jsonl");
  ASSERT_EQ(Run(source(), {"export", file}, "orders:3").code, kExitOk);
  ASSERT_EQ(Run(source(), {"set-offset", "orders", "3", "7"}).code, kExitOk);
  CtlOutput r = Run(source(), {"import", file});
  EXPECT_EQ(r.code, kExitStoreFailure);
  EXPECT_THAT(r.err, HasSubstr("FAILED_PRECONDITION"));
  EXPECT_THAT(r.err, HasSubstr("nothing imported"));
}

struct BadImport {
  std::string name;
  // The file's lines; "$P" stands for a valid partition line, "$END" for a
  // valid end line of a file with one state entry.
  std::vector<std::string> lines;
  std::string message;  // names the line
};

class IdemctlBadImportTest : public IdemctlPartitionTest,
                             public ::testing::WithParamInterface<BadImport> {};

TEST_P(IdemctlBadImportTest, ExitsThreeNamingTheLineAndImportsNothing) {
  ASSERT_NO_FATAL_FAILURE(CreateTarget());
  const std::string file = dir_.Sub("bad.jsonl");
  {
    std::ofstream out(file, std::ios::binary);
    for (std::string line : GetParam().lines) {
      if (line == "$P") {
        line = R"({"kind":"partition","source":"orders","partition":3,)"
               R"("offset":9})";
      } else if (line == "$END") {
        line = R"({"kind":"end","state_entries":1,"dedupe_records":0})";
      }
      out << line << "\n";
    }
  }
  CtlOutput r = Run(target(), {"import", file});
  EXPECT_EQ(r.code, kExitStoreFailure);
  EXPECT_THAT(r.err, HasSubstr(GetParam().message));
  EXPECT_THAT(r.err, HasSubstr("nothing imported"));
  EXPECT_THAT(r.out, IsEmpty());
  const PartitionSnapshot after = Export(target(), 3);
  EXPECT_EQ(after.offset, std::nullopt);
  EXPECT_THAT(after.entries, IsEmpty());
}

const char kState[] = R"({"kind":"state","key":"k","value":"v"})";

INSTANTIATE_TEST_SUITE_P(
    MalformedFiles, IdemctlBadImportTest,
    ::testing::Values(
        BadImport{"Empty", {}, "line 1: missing the \"end\" line"},
        BadImport{
            "NotJson", {"$P", "{\"kind\":", "$END"}, "line 2: not a JSON"},
        BadImport{"NoPartitionLine", {kState, "$END"}, "line 1: the first"},
        BadImport{"TwoPartitionLines",
                  {"$P", "$P", kState, "$END"},
                  "line 2: a second \"partition\" line"},
        BadImport{"Truncated", {"$P", kState}, "line 3: missing the \"end\""},
        BadImport{
            "Miscounted", {"$P", kState, kState, "$END"}, "line 4: counts"},
        BadImport{"AfterEnd", {"$P", kState, "$END", kState}, "line 4: a line"},
        BadImport{"UnknownKind",
                  {"$P", R"({"kind":"outbox"})", "$END"},
                  "line 2: unknown kind \"outbox\""},
        BadImport{"UnknownMember",
                  {"$P", R"({"kind":"state","key":"k","vaule":"v"})", "$END"},
                  "line 2: missing member \"value\""},
        BadImport{
            "ExtraMember",
            {"$P", R"({"kind":"state","key":"k","value":"v","x":1})", "$END"},
            "line 2: unexpected member \"x\""},
        BadImport{
            "NotAByte",
            {"$P", R"({"kind":"state","key":"k","value":"\u0100"})", "$END"},
            "line 2: \"value\" must be a string of code points up to"},
        BadImport{"ValueNotAString",
                  {"$P", R"({"kind":"state","key":"k","value":1})", "$END"},
                  "line 2: \"value\" must be a string"},
        BadImport{"BadIdHash",
                  {"$P", kState,
                   R"({"kind":"dedupe","id_hash":"00ff","result":"",)"
                   R"("expires_at_unix_micros":1})",
                   R"({"kind":"end","state_entries":1,"dedupe_records":1})"},
                  "line 3: \"id_hash\" must be 32 lowercase hex digits"},
        BadImport{"BadExpiry",
                  {"$P", kState,
                   R"({"kind":"dedupe","id_hash":")" + std::string(32, 'a') +
                       R"(","result":"","expires_at_unix_micros":"soon"})",
                   R"({"kind":"end","state_entries":1,"dedupe_records":1})"},
                  "line 3: \"expires_at_unix_micros\" must be an integer"},
        BadImport{"NegativeOffset",
                  {R"({"kind":"partition","source":"orders","partition":3,)"
                   R"("offset":-1})",
                   kState, "$END"},
                  "line 1: \"offset\" must be an integer from 0"},
        BadImport{"PartitionOutOfRange",
                  {R"({"kind":"partition","source":"orders",)"
                   R"("partition":4294967296,"offset":null})",
                   kState, "$END"},
                  "line 1: \"partition\" must be an integer"},
        BadImport{"OffsetWithoutASuccessor",
                  {R"({"kind":"partition","source":"orders","partition":3,)"
                   R"("offset":9223372036854775807})",
                   kState, "$END"},
                  "line 1: \"offset\" must be an integer from 0"},
        BadImport{
            "RepeatedMember",
            {"$P", R"({"kind":"end","kind":"state","key":"k","value":"v"})",
             "$END"},
            "line 2: a member appears twice"},
        BadImport{"RepeatedStateKey",
                  {"$P", kState, kState,
                   R"({"kind":"end","state_entries":2,"dedupe_records":0})"},
                  "appears twice"},
        BadImport{"EmptySource",
                  {R"({"kind":"partition","source":"","partition":3,)"
                   R"("offset":null})",
                   kState, "$END"},
                  "line 1: \"source\" must not be empty"}),
    [](const ::testing::TestParamInfo<BadImport>& info) {
      return info.param.name;
    });

// A line over the limit is refused once the limit is read past, not read
// whole into memory (a 1 GB line took 4 GB before the limit).
TEST_F(IdemctlPartitionTest, ImportRefusesALineOverTheLimit) {
  ASSERT_NO_FATAL_FAILURE(CreateTarget());
  const std::string file = dir_.Sub("long.jsonl");
  {
    std::ofstream out(file, std::ios::binary);
    out << R"({"kind":"partition","source":"orders","partition":3,)"
        << R"("offset":9})"
        << "\n";
    out << R"({"kind":"state","key":"k","value":")"
        << std::string(kMaxPartitionFileLineBytes, 'v') << "\"}\n";
    out << R"({"kind":"end","state_entries":1,"dedupe_records":0})"
        << "\n";
  }
  CtlOutput r = Run(target(), {"import", file});
  EXPECT_EQ(r.code, kExitStoreFailure);
  EXPECT_THAT(r.err, HasSubstr("line 2: longer than the limit of 67108864"));
  EXPECT_EQ(Export(target(), 3).offset, std::nullopt);
}

TEST_F(IdemctlPartitionTest, ImportOfAMissingFileFails) {
  ASSERT_NO_FATAL_FAILURE(CreateTarget());
  CtlOutput r = Run(target(), {"import", dir_.Sub("missing.jsonl")});
  EXPECT_EQ(r.code, kExitStoreFailure);
  EXPECT_THAT(r.err, HasSubstr("cannot open"));
}

struct UsageCase {
  std::string name;
  std::string store;
  std::vector<std::string> command;
  std::string message;
  std::optional<std::string> source;     // --source
  std::optional<std::string> partition;  // --partition
};

class IdemctlUsageTest : public ::testing::TestWithParam<UsageCase> {};

TEST_P(IdemctlUsageTest, ExitsWithUsageCodeAndTouchesNothing) {
  util::TempDir dir;
  const UsageCase& c = GetParam();
  IdemctlArgs args;
  args.store = c.store.empty() ? "" : dir.Sub(c.store);
  args.command = c.command;
  args.source = c.source;
  args.partition = c.partition;
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
                  "ID must be 1 to"},
        UsageCase{"GetWithoutKey", "db", {"get"}, "exactly one argument, KEY"},
        UsageCase{"SetOffsetWithTwoArguments",
                  "db",
                  {"set-offset", "orders", "3"},
                  "takes 3 arguments, SOURCE PARTITION OFFSET"},
        UsageCase{"SetOffsetWithEmptySource",
                  "db",
                  {"set-offset", "", "3", "10"},
                  "SOURCE must be 1 to"},
        UsageCase{"SetOffsetWithBadPartition",
                  "db",
                  {"set-offset", "orders", "-1", "10"},
                  "PARTITION: '-1' is not a partition number"},
        UsageCase{"SetOffsetWithNegativeOffset",
                  "db",
                  {"set-offset", "orders", "3", "-1"},
                  "OFFSET: '-1' is not an offset"},
        UsageCase{"SetOffsetWithoutASuccessor",
                  "db",
                  {"set-offset", "orders", "3", "9223372036854775807"},
                  "OFFSET: '9223372036854775807' is not an offset"},
        UsageCase{"SetOffsetWithTextOffset",
                  "db",
                  {"set-offset", "orders", "3", "ten"},
                  "OFFSET: 'ten' is not an offset"},
        UsageCase{"ExportWithoutFile", "db", {"export"}, "argument, FILE"},
        UsageCase{"ExportWithEmptyFile",
                  "db",
                  {"export", ""},
                  "FILE must not be empty"},
        UsageCase{"ImportWithoutFile", "db", {"import"}, "argument, FILE"},
        UsageCase{
            "VerifyWithArgument", "db", {"verify", "x"}, "takes no arguments"},
        UsageCase{"StatsWithPartition",
                  "db",
                  {"stats"},
                  "'stats' takes neither --source nor --partition",
                  std::nullopt,
                  "1"},
        UsageCase{"SetOffsetWithPartitionFlag",
                  "db",
                  {"set-offset", "orders", "3", "10"},
                  "takes neither --source nor --partition",
                  std::nullopt,
                  "orders:3"},
        UsageCase{"SourceWithoutPartition",
                  "db",
                  {"seen", "order-1"},
                  "--source needs --partition",
                  "orders"},
        UsageCase{"SourceTwice",
                  "db",
                  {"forget", "order-1"},
                  "not both",
                  "orders",
                  "orders:3"},
        UsageCase{"PartitionNotANumber",
                  "db",
                  {"seen", "order-1"},
                  "--partition: 'orders:x' is not P or SOURCE:P",
                  std::nullopt,
                  "orders:x"},
        UsageCase{"NegativePartition",
                  "db",
                  {"seen", "order-1"},
                  "is not P or SOURCE:P",
                  "orders",
                  "-3"},
        UsageCase{"ExportWithoutPartition",
                  "db",
                  {"export", "out.jsonl"},
                  "'export' needs --partition=SOURCE:P"},
        UsageCase{"ExportWithoutSource",
                  "db",
                  {"export", "out.jsonl"},
                  "'export' needs a source",
                  std::nullopt,
                  "3"}),
    [](const ::testing::TestParamInfo<UsageCase>& info) {
      return info.param.name;
    });

TEST(IdemctlUsageTextTest, ListsEverySubcommand) {
  const std::string usage = IdemctlUsage();
  for (const char* sub :
       {"stats", "seen ID", "forget ID", "get KEY", "offsets",
        "set-offset SOURCE PARTITION OFFSET", "compact", "checkpoint DIR",
        "dump", "verify", "metrics", "export --partition=SOURCE:P FILE",
        "import FILE", "scan [--prefix=P]"}) {
    EXPECT_THAT(usage, HasSubstr(sub));
  }
  // The list tools/idemctl_main.cc declares is the one RunIdemctl runs.
  for (const IdemctlSubcommand& sub : IdemctlSubcommands()) {
    EXPECT_THAT(usage, HasSubstr(std::string(sub.name)));
    EXPECT_THAT(sub.help, Not(IsEmpty())) << sub.name;
  }
  EXPECT_EQ(IdemctlSubcommands().size(), 14u);
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
