// State that expires (PutOptions::ttl, Options::state_ttl; docs/state.md,
// "State that expires"): a value is returned until its expiry and never
// from then on, by every read (Txn::Get and Scan, GetState, ScanState,
// exports), judged by the engine's clock; values with and without a TTL
// mix; a merge keeps the expiry of the value it folds onto, starts fresh
// over an expired one, and under Options::state_ttl sets a new expiry;
// compaction drops expired values from disk, also after a commit threw in
// flight; a zero or negative TTL is kInvalidArgument; a store of an older
// format, holding a value whose bytes look like an envelope, reads the same
// after the upgrade to format 5 (also when the upgrade was interrupted); and
// the broken variant that skips the read-time check is caught.

#include <atomic>
#include <functional>
#include <memory>
#include <new>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "engine/engine_hooks.h"
#include "engine/merge_operator.h"
#include "engine/state_value.h"
#include "engine/store.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "idem/clock.h"
#include "idem/engine.h"
#include "idem/partition_state.h"
#include "rocksdb/db.h"
#include "tests/testing/engine_test_util.h"
#include "util/temp_dir.h"

namespace idem {
namespace {

using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::Not;
using ::testing::Pair;

// A value that ends as an envelope does (engine/state_value.h) with an
// expiry long past: a format-5 reader that took it for one would hide it.
std::string EnvelopeLookalike() {
  std::string v = "user bytes";
  v.append(8, '\0');  // expiry 0: the epoch
  v.append(kEnvelopeMagic);
  return v;
}

// The column families of the closed store at `path`.
std::vector<std::string> TtlStoreFamilies(const std::string& path) {
  std::vector<std::string> names;
  rocksdb::Status s =
      rocksdb::DB::ListColumnFamilies(rocksdb::DBOptions(), path, &names);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return names;
}

// Runs `body` on the closed store at `path`, opened directly with RocksDB,
// with the handle of idem.state (its merge operator reads every value raw).
void WithRawStateFamily(
    const std::string& path,
    const std::function<void(rocksdb::DB*, rocksdb::ColumnFamilyHandle*)>&
        body) {
  std::vector<std::string> names = TtlStoreFamilies(path);
  std::vector<rocksdb::ColumnFamilyDescriptor> families;
  for (const std::string& name : names) {
    rocksdb::ColumnFamilyOptions options;
    if (name == kStateColumnFamily) {
      options.merge_operator = NewStateMergeOperator();
    }
    families.emplace_back(name, options);
  }
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::DB* db = nullptr;
  rocksdb::Status s =
      rocksdb::DB::Open(rocksdb::DBOptions(), path, families, &handles, &db);
  ASSERT_TRUE(s.ok()) << s.ToString();
  for (size_t i = 0; i < names.size(); ++i) {
    if (names[i] == kStateColumnFamily) body(db, handles[i]);
  }
  for (rocksdb::ColumnFamilyHandle* h : handles) {
    EXPECT_TRUE(db->DestroyColumnFamilyHandle(h).ok());
  }
  EXPECT_TRUE(db->Close().ok());
  delete db;
}

// The keys idem.state holds on disk, expired or not.
size_t RawStateKeys(const std::string& path) {
  size_t keys = 0;
  WithRawStateFamily(path,
                     [&](rocksdb::DB* db, rocksdb::ColumnFamilyHandle* h) {
                       std::unique_ptr<rocksdb::Iterator> it(
                           db->NewIterator(rocksdb::ReadOptions(), h));
                       for (it->SeekToFirst(); it->Valid(); it->Next()) ++keys;
                       EXPECT_TRUE(it->status().ok());
                     });
  return keys;
}

class StateTtlTest : public ::testing::Test {
 protected:
  void SetUp() override { Open(); }

  void Open(EngineHooks hooks = {},
            absl::Duration state_ttl = absl::InfiniteDuration(),
            bool read_only = false) {
    engine_.reset();
    Options options;
    options.durability = Durability::kBuffered;
    options.clock = &clock_;
    options.state_ttl = state_ttl;
    options.read_only = read_only;
    absl::StatusOr<std::unique_ptr<Engine>> opened =
        OpenEngineWithHooks(path(), options, hooks);
    ASSERT_TRUE(opened.ok()) << opened.status();
    engine_ = *std::move(opened);
  }

  std::string path() const { return dir_.Sub("db"); }

  // Runs `body` as the handler of a new message; returns its result.
  Result Run(std::function<absl::Status(Txn&)> body) {
    absl::StatusOr<Result> r =
        engine_->Process(Message{.id = "m" + std::to_string(++messages_)},
                         [&](const Message&, Txn& txn) { return body(txn); });
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *std::move(r) : Result();
  }

  // Puts `key` = `value` with `ttl` in a message of its own.
  void PutWithTtl(const std::string& key, const std::string& value,
                  absl::Duration ttl) {
    Result r = Run(
        [&](Txn& txn) { return txn.Put(key, value, PutOptions{.ttl = ttl}); });
    ASSERT_EQ(r.outcome, Outcome::kProcessed) << r.error;
  }

  void PutPlain(const std::string& key, const std::string& value) {
    Result r = Run([&](Txn& txn) {
      txn.Put(key, value);
      return absl::OkStatus();
    });
    ASSERT_EQ(r.outcome, Outcome::kProcessed) << r.error;
  }

  std::optional<std::string> Committed(const std::string& key) {
    absl::StatusOr<std::optional<std::string>> v = engine_->GetState(key);
    EXPECT_TRUE(v.ok()) << v.status();
    return v.ok() ? *v : std::nullopt;
  }

  // What a handler's Txn::Get sees of `key`.
  std::optional<std::string> ReadInHandler(const std::string& key) {
    std::optional<std::string> seen;
    Run([&](Txn& txn) {
      absl::StatusOr<std::optional<std::string>> v = txn.Get(key);
      if (!v.ok()) return v.status();
      seen = *v;
      return absl::OkStatus();
    });
    return seen;
  }

  // The keys and values ScanState visits (reverse: last first).
  std::vector<std::pair<std::string, std::string>> Scanned(bool reverse) {
    std::vector<std::pair<std::string, std::string>> seen;
    absl::Status s = engine_->ScanState(
        "", "",
        [&](std::string_view k, std::string_view v) {
          seen.emplace_back(k, v);
          return true;
        },
        ScanOptions{.reverse = reverse});
    EXPECT_TRUE(s.ok()) << s;
    return seen;
  }

  // The keys and values a handler's Txn::Scan visits.
  std::vector<std::pair<std::string, std::string>> ScannedInHandler() {
    std::vector<std::pair<std::string, std::string>> seen;
    Run([&](Txn& txn) {
      return txn.Scan("", "", [&](std::string_view k, std::string_view v) {
        seen.emplace_back(k, v);
        return true;
      });
    });
    return seen;
  }

  bool HasFamily(const std::string& name) {
    engine_.reset();
    std::vector<std::string> names = TtlStoreFamilies(path());
    bool found = false;
    for (const std::string& n : names) found = found || n == name;
    Open();
    return found;
  }

  util::TempDir dir_;
  ManualClock clock_{test::kStart};
  std::unique_ptr<Engine> engine_;
  int messages_ = 0;
};

TEST_F(StateTtlTest, ValueIsReadUntilItsTtlAndNeverFromItsExpiryOn) {
  PutWithTtl("k", "v", absl::Seconds(10));
  clock_.Advance(absl::Seconds(10) - absl::Microseconds(1));
  EXPECT_EQ(Committed("k"), "v");
  EXPECT_EQ(ReadInHandler("k"), "v");
  EXPECT_THAT(Scanned(false), ElementsAre(Pair("k", "v")));
  EXPECT_THAT(ScannedInHandler(), ElementsAre(Pair("k", "v")));

  clock_.Advance(absl::Microseconds(1));
  EXPECT_EQ(Committed("k"), std::nullopt);
  EXPECT_EQ(ReadInHandler("k"), std::nullopt);
  EXPECT_THAT(Scanned(false), ElementsAre());
  EXPECT_THAT(Scanned(true), ElementsAre());
  EXPECT_THAT(ScannedInHandler(), ElementsAre());
}

TEST_F(StateTtlTest, BrokenVariantWithoutTheReadTimeCheckReturnsExpiredValue) {
  // The twin of the test above: without the check the value outlives its
  // TTL until compaction, as in RocksDB's DBWithTTL; that test would fail.
  Open(EngineHooks{.skip_state_expiry_check = true});
  PutWithTtl("k", "v", absl::Seconds(10));
  clock_.Advance(absl::Seconds(11));
  EXPECT_EQ(Committed("k"), "v");
  EXPECT_EQ(ReadInHandler("k"), "v");
  EXPECT_THAT(Scanned(false), ElementsAre(Pair("k", "v")));
}

TEST_F(StateTtlTest, ValuesWithAndWithoutTtlMixInReadsAndScans) {
  PutPlain("a", "plain");
  PutWithTtl("b", "short", absl::Seconds(5));
  PutWithTtl("c", "long", absl::Seconds(20));
  PutPlain("d", EnvelopeLookalike());
  Result r = Run([&](Txn& txn) {
    // A TTL value read back in the handler that wrote it, and by a later
    // message of the same batch through the overlay.
    if (absl::Status s =
            txn.Put("e", "own", PutOptions{.ttl = absl::Seconds(5)});
        !s.ok()) {
      return s;
    }
    absl::StatusOr<std::optional<std::string>> v = txn.Get("e");
    if (!v.ok() || *v != "own") return absl::InternalError("own write unseen");
    return absl::OkStatus();
  });
  ASSERT_EQ(r.outcome, Outcome::kProcessed) << r.error;
  EXPECT_THAT(
      Scanned(false),
      ElementsAre(Pair("a", "plain"), Pair("b", "short"), Pair("c", "long"),
                  Pair("d", EnvelopeLookalike()), Pair("e", "own")));

  clock_.Advance(absl::Seconds(5));
  EXPECT_THAT(Scanned(false), ElementsAre(Pair("a", "plain"), Pair("c", "long"),
                                          Pair("d", EnvelopeLookalike())));
  EXPECT_THAT(Scanned(true),
              ElementsAre(Pair("d", EnvelopeLookalike()), Pair("c", "long"),
                          Pair("a", "plain")));
  EXPECT_THAT(ScannedInHandler(),
              ElementsAre(Pair("a", "plain"), Pair("c", "long"),
                          Pair("d", EnvelopeLookalike())));
  EXPECT_EQ(Committed("d"), EnvelopeLookalike());

  // A plain write replaces a TTL value and its expiry.
  PutPlain("c", "now plain");
  clock_.Advance(absl::Hours(1));
  EXPECT_EQ(Committed("c"), "now plain");
  engine_.reset();
  Open();
  EXPECT_THAT(Scanned(false),
              ElementsAre(Pair("a", "plain"), Pair("c", "now plain"),
                          Pair("d", EnvelopeLookalike())));
}

TEST_F(StateTtlTest,
       MergeKeepsTheExpiryOfItsBaseAndStartsFreshOverAnExpiredOne) {
  auto add = [&](int64_t x) {
    Result r = Run([&](Txn& txn) {
      return txn.Merge("n", MergeOp::kAddInt64, Int64Operand(x));
    });
    ASSERT_EQ(r.outcome, Outcome::kProcessed) << r.error;
  };
  PutWithTtl("n", Int64Operand(1), absl::Seconds(10));
  clock_.Advance(absl::Seconds(5));
  add(2);
  clock_.Advance(absl::Seconds(5) - absl::Microseconds(1));
  ASSERT_TRUE(Committed("n").has_value());
  EXPECT_EQ(ReadInt64(*Committed("n")), 3);
  clock_.Advance(absl::Microseconds(1));
  EXPECT_EQ(Committed("n"), std::nullopt);  // the merge kept the expiry

  add(4);  // over the expired value: starts from nothing, without a TTL
  ASSERT_TRUE(Committed("n").has_value());
  EXPECT_EQ(ReadInt64(*Committed("n")), 4);
  EXPECT_EQ(ReadInt64(ReadInHandler("n").value_or("")), 4);
  clock_.Advance(absl::Hours(24));
  engine_.reset();
  Open();
  ASSERT_EQ(engine_->CompactExpired(), absl::OkStatus());
  ASSERT_TRUE(Committed("n").has_value());
  EXPECT_EQ(ReadInt64(*Committed("n")), 4);
}

TEST_F(StateTtlTest, MergeWrittenBeforeExpiryStaysExpiredThroughCompaction) {
  // The value is compacted to the bottom, the merge stays above it until
  // after the expiry: folded then, it still belongs to the expired value.
  PutWithTtl("n", Int64Operand(1), absl::Seconds(10));
  ASSERT_EQ(engine_->CompactExpired(), absl::OkStatus());
  clock_.Advance(absl::Seconds(5));
  Result r = Run([&](Txn& txn) {
    return txn.Merge("n", MergeOp::kAddInt64, Int64Operand(2));
  });
  ASSERT_EQ(r.outcome, Outcome::kProcessed) << r.error;
  clock_.Advance(absl::Seconds(5));
  EXPECT_EQ(Committed("n"), std::nullopt);
  ASSERT_EQ(engine_->CompactExpired(), absl::OkStatus());
  EXPECT_EQ(Committed("n"), std::nullopt);
  engine_.reset();
  EXPECT_EQ(RawStateKeys(path()), 0u);
  Open();
  EXPECT_EQ(Committed("n"), std::nullopt);
  EXPECT_EQ(ReadInHandler("n"), std::nullopt);
}

TEST_F(StateTtlTest, StateTtlOptionGivesEveryWriteAnExpiryAndMergesRefreshIt) {
  Open({}, /*state_ttl=*/absl::Seconds(10));
  PutPlain("p", "v");
  Result r = Run([&](Txn& txn) {
    return txn.Merge("m", MergeOp::kAddInt64, Int64Operand(1));
  });
  ASSERT_EQ(r.outcome, Outcome::kProcessed) << r.error;
  clock_.Advance(absl::Seconds(8));
  r = Run([&](Txn& txn) {
    return txn.Merge("m", MergeOp::kAddInt64, Int64Operand(1));
  });
  ASSERT_EQ(r.outcome, Outcome::kProcessed) << r.error;
  PutWithTtl("own", "v", absl::Seconds(60));  // its own TTL wins

  clock_.Advance(absl::Seconds(2));  // t = 10 s
  EXPECT_EQ(Committed("p"), std::nullopt);
  ASSERT_TRUE(Committed("m").has_value());
  EXPECT_EQ(ReadInt64(*Committed("m")), 2);
  clock_.Advance(absl::Seconds(8));  // t = 18 s: 10 s after the last write
  EXPECT_EQ(Committed("m"), std::nullopt);
  EXPECT_EQ(Committed("own"), "v");
}

TEST_F(StateTtlTest, ZeroOrNegativeTtlIsInvalidArgumentAndFailsTheMessage) {
  for (absl::Duration ttl :
       {absl::ZeroDuration(), absl::Seconds(-1), -absl::InfiniteDuration()}) {
    absl::Status returned;
    Result r = Run([&](Txn& txn) {
      returned = txn.Put("k", "v", PutOptions{.ttl = ttl});
      return absl::OkStatus();  // the handler goes on regardless
    });
    EXPECT_EQ(returned.code(), absl::StatusCode::kInvalidArgument) << ttl;
    EXPECT_EQ(r.outcome, Outcome::kFailed);
    EXPECT_EQ(r.error.code(), absl::StatusCode::kInvalidArgument);
  }
  EXPECT_EQ(Committed("k"), std::nullopt);

  for (absl::Duration ttl : {absl::ZeroDuration(), absl::Seconds(-5)}) {
    Options options;
    options.state_ttl = ttl;
    EXPECT_EQ(Engine::Open(dir_.Sub("other"), options).status().code(),
              absl::StatusCode::kInvalidArgument);
  }
}

TEST_F(StateTtlTest, CompactionDropsExpiredValuesFromDisk) {
  constexpr int kExpiring = 40;
  constexpr int kPlain = 25;
  Run([&](Txn& txn) {
    for (int i = 0; i < kExpiring; ++i) {
      if (absl::Status s = txn.Put("t" + std::to_string(i), "v",
                                   PutOptions{.ttl = absl::Seconds(10)});
          !s.ok()) {
        return s;
      }
    }
    for (int i = 0; i < kPlain; ++i) txn.Put("p" + std::to_string(i), "v");
    return absl::OkStatus();
  });
  clock_.Advance(absl::Seconds(9));
  ASSERT_EQ(engine_->CompactExpired(), absl::OkStatus());
  engine_.reset();
  EXPECT_EQ(RawStateKeys(path()), size_t{kExpiring + kPlain});

  Open();
  clock_.Advance(absl::Seconds(1));
  ASSERT_EQ(engine_->CompactExpired(), absl::OkStatus());
  engine_.reset();
  EXPECT_EQ(RawStateKeys(path()), size_t{kPlain});
}

TEST_F(StateTtlTest, CompactExpiredStillRemovesValuesAfterACommitThrew) {
  // A commit that throws once queued (as an allocation failing there would)
  // leaves the commit-time watermark too (engine/commit_time_watermark.h):
  // left in it, its time would hold every later removal horizon back, and
  // expired values would stay on disk as markers.
  std::atomic<bool> armed{false};
  EngineHooks hooks;
  hooks.after_queue = [&] {
    if (armed.exchange(false)) throw std::bad_alloc();
  };
  Open(hooks);
  PutWithTtl("t", "v", absl::Seconds(10));
  armed.store(true);
  EXPECT_THROW((void)engine_->Process(
                   Message{.id = "thrown"},
                   [](const Message&, Txn&) { return absl::OkStatus(); }),
               std::bad_alloc);
  clock_.Advance(absl::Seconds(10));
  ASSERT_EQ(engine_->CompactExpired(), absl::OkStatus());
  engine_.reset();
  EXPECT_EQ(RawStateKeys(path()), 0u);
}

TEST_F(StateTtlTest, OldFormatStoreReadsTheSameAfterTheUpgradeToFormat5) {
  PutPlain("a", "plain");
  PutPlain("d", EnvelopeLookalike());
  EXPECT_FALSE(HasFamily(FormatColumnFamilyName(kStateTtlFormatVersion)));
  EXPECT_EQ(Committed("d"), EnvelopeLookalike());

  PutWithTtl("t", "v", absl::Seconds(10));  // marks the store
  EXPECT_TRUE(HasFamily(FormatColumnFamilyName(kStateTtlFormatVersion)));
  clock_.Advance(absl::Seconds(10));
  ASSERT_EQ(engine_->CompactExpired(), absl::OkStatus());
  EXPECT_EQ(Committed("a"), "plain");
  EXPECT_EQ(Committed("d"), EnvelopeLookalike());
  EXPECT_EQ(Committed("t"), std::nullopt);
  PutPlain("e", EnvelopeLookalike());  // written wrapped from now on
  engine_.reset();
  Open();
  EXPECT_THAT(Scanned(false),
              ElementsAre(Pair("a", "plain"), Pair("d", EnvelopeLookalike()),
                          Pair("e", EnvelopeLookalike())));
}

TEST_F(StateTtlTest, InterruptedUpgradeIsFinishedByTheNextWritableOpen) {
  PutPlain("d", EnvelopeLookalike());
  engine_.reset();
  // A crash after the marker family was created, before the wrapping write.
  WithRawStateFamily(path(), [&](rocksdb::DB* db,
                                 rocksdb::ColumnFamilyHandle*) {
    rocksdb::ColumnFamilyHandle* marker = nullptr;
    ASSERT_TRUE(db->CreateColumnFamily(
                      rocksdb::ColumnFamilyOptions(),
                      FormatColumnFamilyName(kStateTtlFormatVersion), &marker)
                    .ok());
    EXPECT_TRUE(db->DestroyColumnFamilyHandle(marker).ok());
  });
  Options read_only;
  read_only.read_only = true;
  EXPECT_EQ(Engine::Open(path(), read_only).status().code(),
            absl::StatusCode::kFailedPrecondition);
  Open();
  EXPECT_EQ(Committed("d"), EnvelopeLookalike());
  engine_.reset();
  Open({}, absl::InfiniteDuration(), /*read_only=*/true);
  EXPECT_EQ(Committed("d"), EnvelopeLookalike());
}

TEST_F(StateTtlTest, ExportCarriesExpiriesSoAnImportedCopyExpiresWithIt) {
  Result r = Run([&](Txn& txn) {
    PartitionTxn scoped(txn, "orders", 3);
    scoped.Put("plain", "p");
    return scoped.Put("short", "s", PutOptions{.ttl = absl::Seconds(5)});
  });
  ASSERT_EQ(r.outcome, Outcome::kProcessed) << r.error;
  absl::StatusOr<PartitionSnapshot> snapshot =
      engine_->ExportPartition("orders", 3);
  ASSERT_TRUE(snapshot.ok()) << snapshot.status();
  EXPECT_THAT(snapshot->entries,
              ElementsAre(Pair("plain", "p"), Pair("short", "s")));
  EXPECT_THAT(snapshot->expires_at,
              ElementsAre(Pair("short", test::kStart + absl::Seconds(5))));

  // A new store (format 1) on the same clock: the import marks it.
  Options options;
  options.clock = &clock_;
  absl::StatusOr<std::unique_ptr<Engine>> copy =
      Engine::Open(dir_.Sub("copy"), options);
  ASSERT_TRUE(copy.ok()) << copy.status();
  ASSERT_EQ((*copy)->ImportPartition(*snapshot), absl::OkStatus());
  const std::string prefix = PartitionStatePrefix("orders", 3);
  EXPECT_EQ(*(*copy)->GetState(prefix + "short"),
            std::optional<std::string>("s"));
  clock_.Advance(absl::Seconds(5));
  EXPECT_EQ(*(*copy)->GetState(prefix + "short"), std::nullopt);
  EXPECT_EQ(*(*copy)->GetState(prefix + "plain"),
            std::optional<std::string>("p"));
  snapshot = engine_->ExportPartition("orders", 3);
  ASSERT_TRUE(snapshot.ok()) << snapshot.status();
  EXPECT_THAT(snapshot->entries, ElementsAre(Pair("plain", "p")));
}

TEST_F(StateTtlTest, DumpShowsAValuesExpiry) {
  PutWithTtl("k", "v", absl::Seconds(10));
  PutPlain("p", "q");
  clock_.Advance(absl::Seconds(10));
  std::vector<DumpEntry> state;
  ASSERT_EQ(engine_->Dump([&](const DumpEntry& e) {
    if (e.kind == DumpEntry::Kind::kState) state.push_back(e);
    return absl::OkStatus();
  }),
            absl::OkStatus());
  ASSERT_EQ(state.size(), 2u);
  EXPECT_EQ(state[0].value, "v");
  EXPECT_EQ(state[0].expires_at, test::kStart + absl::Seconds(10));
  EXPECT_TRUE(state[0].expired);
  EXPECT_EQ(state[1].expires_at, absl::InfiniteFuture());
  EXPECT_FALSE(state[1].expired);
}

}  // namespace
}  // namespace idem
