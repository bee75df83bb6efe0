// idemctl dump and verify: every stored item as JSON, and the damage verify
// finds.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "cli/idemctl.h"
#include "engine/record.h"
#include "engine/store.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "rocksdb/db.h"
#include "tests/idemctl_test_util.h"
#include "tests/testing/engine_test_util.h"

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
using ::idem::test::Latin1Bytes;
using ::testing::HasSubstr;

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

TEST_F(IdemctlTest, DumpShowsAStateValuesExpiryAndGetHidesItOnceExpired) {
  const std::string path = dir_.Sub("ttl");
  ManualClock clock(test::kStart);
  {
    Options options;
    options.clock = &clock;
    auto engine = Engine::Open(path, options);
    ASSERT_TRUE(engine.ok()) << engine.status();
    auto r = (*engine)->Process({.id = "m"}, [](const Message&, Txn& txn) {
      txn.Put("plain", "p");
      return txn.Put("short", "s", PutOptions{.ttl = absl::Seconds(1)});
    });
    ASSERT_TRUE(r.ok() && r->outcome == Outcome::kProcessed);
  }
  // idem-ctl reads the system clock, long past test::kStart + 1 s.
  CtlOutput got = Run({"get", "short"}, /*json=*/false, path);
  EXPECT_EQ(got.code, kExitNotFound) << got.out << got.err;
  CtlOutput r = Run({"dump"}, /*json=*/false, path);
  ASSERT_EQ(r.code, kExitOk) << r.err;
  int state = 0;
  for (const std::string& line : std::vector<std::string>(
           absl::StrSplit(r.out, '\n', absl::SkipEmpty()))) {
    const json v = json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (BytesAt(v, "kind") != "state") continue;
    ++state;
    if (BytesAt(v, "key") == "short") {
      EXPECT_EQ(BytesAt(v, "value"), "s") << line;
      EXPECT_EQ(v.value("expires_at_unix_micros", int64_t{0}),
                absl::ToUnixMicros(test::kStart + absl::Seconds(1)))
          << line;
      EXPECT_TRUE(v.value("expired", false)) << line;
    } else {
      EXPECT_FALSE(v.contains("expires_at")) << line;
    }
  }
  EXPECT_EQ(state, 2);
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

}  // namespace
}  // namespace idem::cli
