// A malformed stored record is kDataLoss, never a crash: values written
// straight into a closed store with plain RocksDB (an undecodable dedupe
// record, an offset of the wrong length, a bad format marker) make every
// engine call that reads them fail with the documented code, leave the store
// as it was, and leave the rest of the store readable. The TTL filter keeps
// what it cannot decode (docs/design.md, "Expiry"). The decoders themselves
// are fuzzed by tests/fuzz/.

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "engine/record.h"
#include "engine/store.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "idem/clock.h"
#include "idem/engine.h"
#include "rocksdb/db.h"
#include "tests/testing/engine_test_util.h"
#include "util/temp_dir.h"

namespace idem {
namespace {

using test::AddOne;
using test::kStart;
using test::SnapshotTree;
using ::testing::HasSubstr;

// ---- The store as plain RocksDB sees it ----------------------------------

using Families = std::map<std::string, rocksdb::ColumnFamilyHandle*>;

// Opens the closed store at `path` with every column family it has (plain
// RocksDB options, no idem code), runs `use`, and closes it again.
absl::Status WithRawStore(
    const std::string& path, bool read_only,
    absl::FunctionRef<rocksdb::Status(rocksdb::DB&, const Families&)> use) {
  rocksdb::DBOptions db_options;
  std::vector<std::string> names;
  rocksdb::Status s = rocksdb::DB::ListColumnFamilies(db_options, path, &names);
  if (!s.ok()) return absl::InternalError(s.ToString());
  std::vector<rocksdb::ColumnFamilyDescriptor> descriptors;
  for (const std::string& name : names) {
    descriptors.emplace_back(name, rocksdb::ColumnFamilyOptions());
  }
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::DB* raw = nullptr;
  s = read_only
          ? rocksdb::DB::OpenForReadOnly(db_options, path, descriptors,
                                         &handles, &raw)
          : rocksdb::DB::Open(db_options, path, descriptors, &handles, &raw);
  if (!s.ok()) return absl::InternalError(s.ToString());
  std::unique_ptr<rocksdb::DB> db(raw);
  Families families;
  for (size_t i = 0; i < names.size(); ++i) families[names[i]] = handles[i];
  s = use(*db, families);
  for (rocksdb::ColumnFamilyHandle* handle : handles) {
    rocksdb::Status destroyed = db->DestroyColumnFamilyHandle(handle);
    if (s.ok()) s = destroyed;
  }
  if (rocksdb::Status closed = db->Close(); s.ok()) s = closed;
  return s.ok() ? absl::OkStatus() : absl::InternalError(s.ToString());
}

// Writes `value` under `key` in `family` and flushes it into a table file.
absl::Status RawPut(const std::string& path, const std::string& family,
                    const std::string& key, const std::string& value) {
  return WithRawStore(
      path, /*read_only=*/false, [&](rocksdb::DB& db, const Families& cfs) {
        auto cf = cfs.find(family);
        if (cf == cfs.end()) return rocksdb::Status::NotFound(family);
        rocksdb::Status s =
            db.Put(rocksdb::WriteOptions(), cf->second, key, value);
        return s.ok() ? db.Flush(rocksdb::FlushOptions(), cf->second) : s;
      });
}

// Every key and value of every column family, by family name.
using Contents = std::map<std::string, std::map<std::string, std::string>>;
Contents ReadAll(const std::string& path) {
  Contents contents;
  absl::Status s = WithRawStore(
      path, /*read_only=*/true, [&](rocksdb::DB& db, const Families& cfs) {
        for (const auto& [name, cf] : cfs) {
          std::unique_ptr<rocksdb::Iterator> it(
              db.NewIterator(rocksdb::ReadOptions(), cf));
          auto& family = contents[name];
          for (it->SeekToFirst(); it->Valid(); it->Next()) {
            family[it->key().ToString()] = it->value().ToString();
          }
          if (!it->status().ok()) return it->status();
        }
        return rocksdb::Status::OK();
      });
  EXPECT_TRUE(s.ok()) << s;
  return contents;
}

std::string KeyOf(const std::string& id) {
  return std::string(KeyView(HashMessageId(id)));
}

// Runs Dump to the end or the first error; the entries it reached are
// counted in `visited`.
absl::Status DumpAll(Engine& engine, int* visited) {
  return engine.Dump([visited](const DumpEntry&) {
    ++*visited;
    return absl::OkStatus();
  });
}

// ---- Fixture ---------------------------------------------------------------

// A store holding two committed messages: "good" (offset 5 of t/0) and
// "victim" (offset 9 of t/1), each counted in state key "counter".
class MalformedRecordTest : public ::testing::Test {
 protected:
  MalformedRecordTest() : clock_(kStart) { options_.clock = &clock_; }

  void CommitTwoMessages() {
    ASSERT_OPEN(engine, path(), options_);
    const std::vector<Message> batch = {
        {.id = "good", .source = "t", .partition = 0, .offset = 5},
        {.id = "victim", .source = "t", .partition = 1, .offset = 9}};
    auto results = engine->ProcessBatch(batch, AddOne);
    ASSERT_TRUE(results.ok()) << results.status();
  }

  // What the undamaged part of the store answers, through `engine`.
  void ExpectCommittedDataReadable(Engine& engine) {
    auto good = engine.Seen("good");
    ASSERT_TRUE(good.ok()) << good.status();
    EXPECT_TRUE(*good);
    auto counter = engine.GetState("counter");
    ASSERT_TRUE(counter.ok()) << counter.status();
    EXPECT_EQ(*counter, std::optional<std::string>("2"));
  }

  std::string path() const { return dir_.Sub("db"); }

  util::TempDir dir_;
  ManualClock clock_;
  Options options_;
  int handler_calls_ = 0;
  // AddOne, counting its calls in handler_calls_.
  const std::function<absl::Status(const Message&, Txn&)> counting_ =
      [this](const Message& m, Txn& txn) {
        ++handler_calls_;
        return AddOne(m, txn);
      };
};

struct Malformed {
  const char* name;
  std::string value;
};

std::string MalformedName(const ::testing::TestParamInfo<Malformed>& info) {
  return info.param.name;
}

// ---- Dedupe records
// ----------------------------------------------------------

class MalformedDedupeRecordTest
    : public MalformedRecordTest,
      public ::testing::WithParamInterface<Malformed> {};

std::vector<Malformed> MalformedDedupeValues() {
  const std::string valid =
      EncodeDedupeRecord(absl::ToUnixMicros(kStart + absl::Hours(1)), "r");
  std::string wrong_version = valid;
  wrong_version[0] = static_cast<char>(kRecordVersion + 1);
  return {{"Empty", ""},
          {"ShorterThanTheHeader", valid.substr(0, kRecordHeaderBytes - 1)},
          {"UnknownRecordVersion", wrong_version},
          {"Garbage", std::string(32, '\xff')}};
}

INSTANTIATE_TEST_SUITE_P(Values, MalformedDedupeRecordTest,
                         ::testing::ValuesIn(MalformedDedupeValues()),
                         MalformedName);

TEST_P(MalformedDedupeRecordTest, CallsThatReadItAreDataLossAndChangeNothing) {
  ASSERT_NO_FATAL_FAILURE(CommitTwoMessages());
  ASSERT_TRUE(
      RawPut(path(), kDedupeColumnFamily, KeyOf("victim"), GetParam().value)
          .ok());
  const Contents before = ReadAll(path());
  {
    ASSERT_OPEN(engine, path(), options_);
    EXPECT_EQ(engine->Seen("victim").status().code(),
              absl::StatusCode::kDataLoss);
    EXPECT_EQ(engine->Process({.id = "victim"}, counting_).status().code(),
              absl::StatusCode::kDataLoss);
    // The batch's other message is not processed either: nothing runs.
    const std::vector<Message> batch = {
        {.id = "fresh", .source = "t", .partition = 0, .offset = 6},
        {.id = "victim", .source = "t", .partition = 1, .offset = 10}};
    auto results = engine->ProcessBatch(batch, counting_);
    EXPECT_EQ(results.status().code(), absl::StatusCode::kDataLoss)
        << results.status();
    EXPECT_EQ(handler_calls_, 0);
    int visited = 0;
    absl::Status dumped = DumpAll(*engine, &visited);
    EXPECT_EQ(dumped.code(), absl::StatusCode::kDataLoss) << dumped;
    EXPECT_THAT(dumped.message(), HasSubstr(test::HexOfIdHash("victim")));
    // GetStats reads counters and RocksDB properties, no record.
    EXPECT_TRUE(engine->GetStats().ok());
    ASSERT_NO_FATAL_FAILURE(ExpectCommittedDataReadable(*engine));
    EXPECT_FALSE(*engine->Seen("fresh"));
    EXPECT_EQ(*engine->CommittedOffset("t", 0), std::optional<int64_t>(5));
    EXPECT_EQ(*engine->CommittedOffset("t", 1), std::optional<int64_t>(9));
  }
  {
    Options read_only = options_;
    read_only.read_only = true;
    ASSERT_OPEN(engine, path(), read_only);
    EXPECT_EQ(engine->Seen("victim").status().code(),
              absl::StatusCode::kDataLoss);
    int visited = 0;
    EXPECT_EQ(DumpAll(*engine, &visited).code(), absl::StatusCode::kDataLoss);
  }
  EXPECT_EQ(ReadAll(path()), before);
  // Other IDs go on being processed.
  ASSERT_OPEN(engine, path(), options_);
  auto fresh = engine->Process({.id = "fresh"}, counting_);
  ASSERT_TRUE(fresh.ok()) << fresh.status();
  EXPECT_EQ(fresh->outcome, Outcome::kProcessed);
  EXPECT_EQ(engine->Seen("victim").status().code(),
            absl::StatusCode::kDataLoss);
}

TEST_F(MalformedRecordTest, UndecodableRecordInAnExpiryBucketIsDataLoss) {
  options_.expiry_buckets = 4;
  ASSERT_NO_FATAL_FAILURE(CommitTwoMessages());
  // The victim's record went to a bucket; overwrite it there.
  std::string bucket;
  for (const auto& [name, records] : ReadAll(path())) {
    if (ParseBucketFamilyName(name).has_value() &&
        records.contains(KeyOf("victim"))) {
      bucket = name;
    }
  }
  ASSERT_FALSE(bucket.empty()) << "no bucket holds the victim's record";
  ASSERT_TRUE(RawPut(path(), bucket, KeyOf("victim"), "garbage").ok());
  const Contents before = ReadAll(path());
  {
    ASSERT_OPEN(engine, path(), options_);
    EXPECT_EQ(engine->Seen("victim").status().code(),
              absl::StatusCode::kDataLoss);
    EXPECT_EQ(engine->Process({.id = "victim"}, counting_).status().code(),
              absl::StatusCode::kDataLoss);
    EXPECT_EQ(handler_calls_, 0);
    int visited = 0;
    EXPECT_EQ(DumpAll(*engine, &visited).code(), absl::StatusCode::kDataLoss);
    ASSERT_NO_FATAL_FAILURE(ExpectCommittedDataReadable(*engine));
  }
  EXPECT_EQ(ReadAll(path()), before);
}

TEST_F(MalformedRecordTest, CompactExpiredKeepsAnUndecodableRecord) {
  ASSERT_NO_FATAL_FAILURE(CommitTwoMessages());
  const std::string garbage(32, '\xff');
  ASSERT_TRUE(
      RawPut(path(), kDedupeColumnFamily, KeyOf("victim"), garbage).ok());
  {
    ASSERT_OPEN(engine, path(), options_);
    // Every decodable record has expired.
    clock_.Advance(options_.dedupe_window + absl::Hours(1));
    ASSERT_TRUE(engine->CompactExpired().ok());
    EXPECT_FALSE(*engine->Seen("good"));
    EXPECT_EQ(engine->Seen("victim").status().code(),
              absl::StatusCode::kDataLoss);
  }
  const Contents after = ReadAll(path());
  const std::map<std::string, std::string> kept = {{KeyOf("victim"), garbage}};
  EXPECT_EQ(after.at(kDedupeColumnFamily), kept)
      << "the expired record of 'good' should be gone, the undecodable one "
         "kept";
}

TEST_F(MalformedRecordTest, ForgetRemovesAnUndecodableRecord) {
  ASSERT_NO_FATAL_FAILURE(CommitTwoMessages());
  ASSERT_TRUE(
      RawPut(path(), kDedupeColumnFamily, KeyOf("victim"), "garbage").ok());
  ASSERT_OPEN(engine, path(), options_);
  ASSERT_EQ(engine->Seen("victim").status().code(),
            absl::StatusCode::kDataLoss);
  ASSERT_TRUE(engine->Forget("victim").ok());
  EXPECT_FALSE(*engine->Seen("victim"));
  auto again = engine->Process({.id = "victim"}, counting_);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->outcome, Outcome::kProcessed);
  EXPECT_EQ(handler_calls_, 1);
}

// ---- Offsets -------------------------------------------------------------

class MalformedOffsetValueTest
    : public MalformedRecordTest,
      public ::testing::WithParamInterface<Malformed> {
 protected:
  // The malformed offset is the one of source "t", partition 0.
  static void ExpectNamesT0(const absl::Status& status) {
    EXPECT_THAT(status.message(), HasSubstr("source \"t\" partition 0"))
        << status;
  }
};

INSTANTIATE_TEST_SUITE_P(Values, MalformedOffsetValueTest,
                         ::testing::ValuesIn(std::vector<Malformed>{
                             {"Empty", ""},
                             {"SevenBytes", EncodeOffsetValue(5).substr(0, 7)},
                             {"NineBytes", EncodeOffsetValue(5) + "x"},
                             {"DecimalText", "5"}}),
                         MalformedName);

TEST_P(MalformedOffsetValueTest, CallsThatReadItAreDataLossAndChangeNothing) {
  ASSERT_NO_FATAL_FAILURE(CommitTwoMessages());
  ASSERT_TRUE(RawPut(path(), kOffsetsColumnFamily, EncodeOffsetKey("t", 0),
                     GetParam().value)
                  .ok());
  const Contents before = ReadAll(path());
  {
    ASSERT_OPEN(engine, path(), options_);
    EXPECT_EQ(engine->CommittedOffset("t", 0).status().code(),
              absl::StatusCode::kDataLoss);
    EXPECT_EQ(*engine->CommittedOffset("t", 1), std::optional<int64_t>(9));
    // A message of t/0 would move its offset: the commit reads the stored
    // one with the dedupe records, before any handler runs, and fails
    // without running a handler or writing anything.
    absl::Status processed =
        engine
            ->Process(
                {.id = "fresh", .source = "t", .partition = 0, .offset = 6},
                counting_)
            .status();
    EXPECT_EQ(processed.code(), absl::StatusCode::kDataLoss) << processed;
    ExpectNamesT0(processed);
    // In a batch, the message of t/1 does not run either.
    const std::vector<Message> batch = {
        {.id = "other", .source = "t", .partition = 1, .offset = 10},
        {.id = "fresh", .source = "t", .partition = 0, .offset = 7}};
    auto results = engine->ProcessBatch(batch, counting_);
    EXPECT_EQ(results.status().code(), absl::StatusCode::kDataLoss)
        << results.status();
    ExpectNamesT0(results.status());
    EXPECT_EQ(handler_calls_, 0)
        << "a handler ran before the malformed offset was found";
    ExpectNamesT0(engine->CommittedOffset("t", 0).status());
    int visited = 0;
    absl::Status dumped = DumpAll(*engine, &visited);
    EXPECT_EQ(dumped.code(), absl::StatusCode::kDataLoss);
    ExpectNamesT0(dumped);
    EXPECT_TRUE(engine->GetStats().ok());
    ASSERT_NO_FATAL_FAILURE(ExpectCommittedDataReadable(*engine));
    EXPECT_FALSE(*engine->Seen("fresh"));
    EXPECT_FALSE(*engine->Seen("other"));
    EXPECT_EQ(*engine->CommittedOffset("t", 1), std::optional<int64_t>(9));
  }
  EXPECT_EQ(ReadAll(path()), before);
  // A message on another partition still processes and moves its offset.
  ASSERT_OPEN(engine, path(), options_);
  auto other = engine->Process(
      {.id = "other", .source = "t", .partition = 1, .offset = 10}, counting_);
  ASSERT_TRUE(other.ok()) << other.status();
  EXPECT_EQ(other->outcome, Outcome::kProcessed);
  EXPECT_EQ(handler_calls_, 1);
  EXPECT_EQ(*engine->CommittedOffset("t", 1), std::optional<int64_t>(10));
  EXPECT_EQ(engine->CommittedOffset("t", 0).status().code(),
            absl::StatusCode::kDataLoss);
}

// Without an offset, a message of t/0 does not read the stored one.
TEST_P(MalformedOffsetValueTest, MessageWithoutAnOffsetStillProcesses) {
  ASSERT_NO_FATAL_FAILURE(CommitTwoMessages());
  ASSERT_TRUE(RawPut(path(), kOffsetsColumnFamily, EncodeOffsetKey("t", 0),
                     GetParam().value)
                  .ok());
  ASSERT_OPEN(engine, path(), options_);
  auto fresh = engine->Process(
      {.id = "fresh", .source = "t", .partition = 0, .offset = -1}, counting_);
  ASSERT_TRUE(fresh.ok()) << fresh.status();
  EXPECT_EQ(fresh->outcome, Outcome::kProcessed);
  EXPECT_EQ(handler_calls_, 1);
}

TEST_F(MalformedRecordTest, OffsetKeyShorterThanAPartitionIsDataLossForDump) {
  ASSERT_NO_FATAL_FAILURE(CommitTwoMessages());
  ASSERT_TRUE(
      RawPut(path(), kOffsetsColumnFamily, "ab", EncodeOffsetValue(1)).ok());
  ASSERT_OPEN(engine, path(), options_);
  int visited = 0;
  absl::Status dumped = DumpAll(*engine, &visited);
  EXPECT_EQ(dumped.code(), absl::StatusCode::kDataLoss);
  // Too short to name a source and partition: the key is shown in hex.
  EXPECT_THAT(dumped.message(), HasSubstr("6162")) << dumped;
  EXPECT_EQ(*engine->CommittedOffset("t", 0), std::optional<int64_t>(5));
  ASSERT_NO_FATAL_FAILURE(ExpectCommittedDataReadable(*engine));
}

// ---- The format marker -----------------------------------------------------

class BadFormatMarkerTest : public MalformedRecordTest,
                            public ::testing::WithParamInterface<Malformed> {};

INSTANTIATE_TEST_SUITE_P(Names, BadFormatMarkerTest,
                         ::testing::ValuesIn(std::vector<Malformed>{
                             {"NoDigits", "idem.format."},
                             {"Letters", "idem.format.x"},
                             {"Zero", "idem.format.0"},
                             {"Negative", "idem.format.-1"},
                             {"LeadingZero", "idem.format.01"},
                             {"Plus", "idem.format.+1"},
                             {"OutOfRange", "idem.format.99999999999"}}),
                         MalformedName);

// Engine::Open: "kFailedPrecondition, changing nothing on disk, if `path`
// is not an idem store".
TEST_P(BadFormatMarkerTest, OpenIsFailedPreconditionAndChangesNothing) {
  ASSERT_NO_FATAL_FAILURE(CommitTwoMessages());
  const std::string marker = GetParam().value;
  ASSERT_TRUE(WithRawStore(path(), /*read_only=*/false,
                           [&](rocksdb::DB& db, const Families&) {
                             rocksdb::ColumnFamilyHandle* cf = nullptr;
                             rocksdb::Status s = db.CreateColumnFamily(
                                 rocksdb::ColumnFamilyOptions(), marker, &cf);
                             if (!s.ok()) return s;
                             return db.DestroyColumnFamilyHandle(cf);
                           })
                  .ok());
  const auto before = SnapshotTree(path());
  for (bool read_only : {false, true}) {
    Options options = options_;
    options.read_only = read_only;
    auto engine = Engine::Open(path(), options);
    EXPECT_EQ(engine.status().code(), absl::StatusCode::kFailedPrecondition)
        << engine.status();
    EXPECT_THAT(engine.status().message(), HasSubstr("unreadable format"));
    EXPECT_THAT(engine.status().message(), HasSubstr(marker));
  }
  EXPECT_TRUE(SnapshotTree(path()) == before);
}

// Raw changes of the column family set: dropping the marker, or a family
// every store has.
absl::Status RawDropFamily(const std::string& path, const std::string& name) {
  return WithRawStore(path, /*read_only=*/false,
                      [&](rocksdb::DB& db, const Families& cfs) {
                        auto cf = cfs.find(name);
                        if (cf == cfs.end()) {
                          return rocksdb::Status::NotFound(name);
                        }
                        return db.DropColumnFamily(cf->second);
                      });
}

TEST_F(MalformedRecordTest, StoreWithoutAFormatMarkerIsRefusedUnchanged) {
  ASSERT_NO_FATAL_FAILURE(CommitTwoMessages());
  ASSERT_TRUE(RawDropFamily(path(), FormatColumnFamilyName(1)).ok());
  const auto before = SnapshotTree(path());
  auto engine = Engine::Open(path(), options_);
  EXPECT_EQ(engine.status().code(), absl::StatusCode::kFailedPrecondition)
      << engine.status();
  EXPECT_TRUE(SnapshotTree(path()) == before);
}

// Engine::Open: "kDataLoss if the store is corrupt".
TEST_F(MalformedRecordTest, StoreMissingARequiredFamilyIsDataLossUnchanged) {
  for (const char* family :
       {kDedupeColumnFamily, kStateColumnFamily, kOffsetsColumnFamily}) {
    SCOPED_TRACE(family);
    util::TempDir dir;
    const std::string path = dir.Sub("db");
    {
      ASSERT_OPEN(engine, path, options_);
      ASSERT_TRUE(engine->Process({.id = "a"}, AddOne).ok());
    }
    ASSERT_TRUE(RawDropFamily(path, family).ok());
    const auto before = SnapshotTree(path);
    auto engine = Engine::Open(path, options_);
    EXPECT_EQ(engine.status().code(), absl::StatusCode::kDataLoss)
        << engine.status();
    EXPECT_THAT(engine.status().message(), HasSubstr(family));
    EXPECT_TRUE(SnapshotTree(path) == before);
  }
}

}  // namespace
}  // namespace idem
