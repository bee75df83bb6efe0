// Txn::Merge and Txn::DeleteRange (idem/txn.h, idem/merge.h): each built-in
// operator folds as documented, for a later Get, a scan, GetState and
// after compaction; a Get after a Merge in the same handler sees the folded
// value; a malformed base folds as 0; an unknown operator or a wrong-sized
// operand is kInvalidArgument and fails the message; concurrent merges of
// one key never make a handler run again and lose nothing; the first merge
// marks the store as format 4, which a build of format 3 refuses; a range
// deletion removes exactly its range, in the order of the writes around
// it, and bad ranges are kInvalidArgument.

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "engine/merge_operator.h"
#include "engine/store.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "idem/engine.h"
#include "idem/partition_state.h"
#include "rocksdb/db.h"
#include "tests/testing/parallel.h"
#include "util/temp_dir.h"

namespace idem {
namespace {

using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

// The column families of the store at `path`.
std::vector<std::string> StoreFamilyNames(const std::string& path) {
  std::vector<std::string> names;
  rocksdb::Status s =
      rocksdb::DB::ListColumnFamilies(rocksdb::DBOptions(), path, &names);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return names;
}

class StateMergeTest : public ::testing::Test {
 protected:
  void SetUp() override { Reopen(); }

  void Reopen() {
    engine_.reset();
    Options options;
    options.durability = Durability::kBuffered;
    absl::StatusOr<std::unique_ptr<Engine>> opened =
        Engine::Open(path(), options);
    ASSERT_TRUE(opened.ok()) << opened.status();
    engine_ = *std::move(opened);
  }

  std::string path() const { return dir_.Sub("db"); }

  // Opens the closed store's database directly, with the state family's
  // merge operator, and flushes and compacts idem.state to its bottom.
  void CompactStateFamily() {
    std::vector<std::string> names = StoreFamilyNames(path());
    std::vector<rocksdb::ColumnFamilyDescriptor> families;
    for (const std::string& name : names) {
      rocksdb::ColumnFamilyOptions options;
      if (name == "idem.state")
        options.merge_operator = NewStateMergeOperator();
      families.emplace_back(name, options);
    }
    std::vector<rocksdb::ColumnFamilyHandle*> handles;
    rocksdb::DB* db = nullptr;
    ASSERT_TRUE(
        rocksdb::DB::Open(rocksdb::DBOptions(), path(), families, &handles, &db)
            .ok());
    for (size_t i = 0; i < names.size(); ++i) {
      if (names[i] != "idem.state") continue;
      EXPECT_TRUE(db->Flush(rocksdb::FlushOptions(), handles[i]).ok());
      rocksdb::CompactRangeOptions compact;
      compact.bottommost_level_compaction =
          rocksdb::BottommostLevelCompaction::kForce;
      EXPECT_TRUE(db->CompactRange(compact, handles[i], nullptr, nullptr).ok());
    }
    for (rocksdb::ColumnFamilyHandle* h : handles) {
      EXPECT_TRUE(db->DestroyColumnFamilyHandle(h).ok());
    }
    EXPECT_TRUE(db->Close().ok());
    delete db;
  }

  // Runs `body` as the handler of a new message; returns its result.
  Result Run(std::function<absl::Status(Txn&)> body) {
    absl::StatusOr<Result> r =
        engine_->Process(Message{.id = "m" + std::to_string(++messages_)},
                         [&](const Message&, Txn& txn) { return body(txn); });
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *std::move(r) : Result();
  }

  std::optional<int64_t> CommittedInt(const std::string& key) {
    absl::StatusOr<std::optional<std::string>> v = engine_->GetState(key);
    EXPECT_TRUE(v.ok()) << v.status();
    if (!v.ok() || !v->has_value()) return std::nullopt;
    return ReadInt64(**v);
  }

  util::TempDir dir_;
  std::unique_ptr<Engine> engine_;
  int messages_ = 0;
};

TEST_F(StateMergeTest, EachBuiltInOperatorFoldsAsDocumented) {
  for (int64_t x : {5, -2, 9}) {
    Result r = Run([&](Txn& txn) {
      for (auto [key, op] : {std::pair{"sum", MergeOp::kAddInt64},
                             std::pair{"max", MergeOp::kMaxInt64},
                             std::pair{"min", MergeOp::kMinInt64}}) {
        if (absl::Status s = txn.Merge(key, op, Int64Operand(x)); !s.ok()) {
          return s;
        }
      }
      return txn.Merge("log", MergeOp::kAppend, std::to_string(x) + ";");
    });
    ASSERT_EQ(r.outcome, Outcome::kProcessed) << r.error;
  }
  EXPECT_EQ(CommittedInt("sum"), 12);
  EXPECT_EQ(CommittedInt("max"), 9);
  EXPECT_EQ(CommittedInt("min"), -2);
  EXPECT_EQ(*engine_->GetState("log"), std::optional<std::string>("5;-2;9;"));
  // A later handler, a scan, and a reopen and full compaction all see the
  // same folded values.
  std::optional<int64_t> in_handler;
  Run([&](Txn& txn) {
    absl::StatusOr<std::optional<std::string>> v = txn.Get("sum");
    if (v.ok() && v->has_value()) in_handler = ReadInt64(**v);
    return absl::OkStatus();
  });
  EXPECT_EQ(in_handler, 12);
  std::vector<std::string> scanned;
  ASSERT_TRUE(engine_
                  ->ScanState("", "",
                              [&](std::string_view k, std::string_view v) {
                                if (k == "log") scanned.emplace_back(v);
                                return true;
                              })
                  .ok());
  EXPECT_THAT(scanned, ElementsAre("5;-2;9;"));
  // A flush and a full compaction of the state family fold the operands
  // (the merge operator's full and partial merges) into plain values.
  engine_.reset();
  CompactStateFamily();
  Reopen();
  EXPECT_EQ(CommittedInt("sum"), 12);
  EXPECT_EQ(CommittedInt("max"), 9);
  EXPECT_EQ(CommittedInt("min"), -2);
  EXPECT_EQ(*engine_->GetState("log"), std::optional<std::string>("5;-2;9;"));
}

TEST_F(StateMergeTest, GetAfterMergeInTheSameHandlerSeesTheFoldedValue) {
  Run([](Txn& txn) {
    txn.Put("n", Int64Operand(40));
    return absl::OkStatus();
  });
  std::optional<int64_t> seen_before_commit;
  Result r = Run([&](Txn& txn) {
    if (absl::Status s = txn.Merge("n", MergeOp::kAddInt64, Int64Operand(2));
        !s.ok()) {
      return s;
    }
    absl::StatusOr<std::optional<std::string>> v = txn.Get("n");
    if (!v.ok()) return v.status();
    seen_before_commit = ReadInt64(v->value_or(""));
    return absl::OkStatus();
  });
  ASSERT_EQ(r.outcome, Outcome::kProcessed) << r.error;
  EXPECT_EQ(seen_before_commit, 42);
  EXPECT_EQ(CommittedInt("n"), 42);
}

TEST_F(StateMergeTest, MergesOfABatchFoldInOrderOverPutsAndDeletes) {
  std::vector<Message> batch = {{.id = "b1"}, {.id = "b2"}, {.id = "b3"}};
  absl::StatusOr<std::vector<Result>> results = engine_->ProcessBatch(
      batch, [](const Message& m, Txn& txn) -> absl::Status {
        if (m.id == "b1") txn.Put("n", Int64Operand(100));
        if (m.id == "b2") txn.Delete("n");
        return txn.Merge("n", MergeOp::kAddInt64, Int64Operand(1));
      });
  ASSERT_TRUE(results.ok()) << results.status();
  EXPECT_EQ(CommittedInt("n"), 2);  // deleted by b2, then +1 (b2) +1 (b3)
}

TEST_F(StateMergeTest, MalformedBaseFoldsAsZero) {
  Run([](Txn& txn) {
    txn.Put("n", "not an int64");
    return absl::OkStatus();
  });
  Run([](Txn& txn) {
    return txn.Merge("n", MergeOp::kAddInt64, Int64Operand(7));
  });
  EXPECT_EQ(CommittedInt("n"), 7);
}

TEST_F(StateMergeTest, UnknownOperatorOrWrongOperandFailsTheMessage) {
  absl::Status returned;
  Result r = Run([&](Txn& txn) {
    txn.Put("other", "x");
    returned = txn.Merge("n", static_cast<MergeOp>(99), "x");
    return absl::OkStatus();  // even if the handler goes on
  });
  EXPECT_EQ(returned.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(returned.message()), HasSubstr("MergeOp"));
  EXPECT_EQ(r.outcome, Outcome::kFailed);
  EXPECT_EQ(r.error.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(*engine_->GetState("other"), std::nullopt);
  r = Run([&](Txn& txn) {
    returned = txn.Merge("n", MergeOp::kMaxInt64, "short");
    return absl::OkStatus();
  });
  EXPECT_EQ(returned.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(r.outcome, Outcome::kFailed);
}

TEST_F(StateMergeTest, ConcurrentMergesOfOneKeyNeverRunAgainAndLoseNothing) {
  constexpr int kThreads = 16;
  constexpr int kPerThread = 5;
  test::RunTogether(kThreads, [&](int t) {
    for (int i = 0; i < kPerThread; ++i) {
      absl::StatusOr<Result> r = engine_->Process(
          Message{.id = "c" + std::to_string(t) + "/" + std::to_string(i)},
          [](const Message&, Txn& txn) {
            absl::SleepFor(absl::Milliseconds(1));
            return txn.Merge("hot", MergeOp::kAddInt64, Int64Operand(1));
          });
      EXPECT_TRUE(r.ok() && r->outcome == Outcome::kProcessed);
    }
  });
  EXPECT_EQ(CommittedInt("hot"), kThreads * kPerThread);
  absl::StatusOr<Stats> stats = engine_->GetStats();
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->handler_reruns, 0u);
}

TEST_F(StateMergeTest, FirstMergeMarksTheStoreFormat4) {
  Run([](Txn& txn) {
    txn.Put("plain", "x");
    return absl::OkStatus();
  });
  engine_.reset();
  EXPECT_THAT(StoreFamilyNames(path()), Not(Contains("idem.format.4")));
  Reopen();
  Result r = Run([](Txn& txn) {
    return txn.Merge("n", MergeOp::kAddInt64, Int64Operand(1));
  });
  ASSERT_EQ(r.outcome, Outcome::kProcessed) << r.error;
  EXPECT_EQ(CommittedInt("n"), 1);  // the handler ran again: applied once
  engine_.reset();
  const std::vector<std::string> names = StoreFamilyNames(path());
  EXPECT_THAT(names, Contains("idem.format.4"));
  // A build that reads only older formats refuses it, naming both formats
  // (shown with the next format against this build).
  EXPECT_GE(kFormatVersion, kMergeFormatVersion);
  std::vector<std::string> older = names;
  older.push_back(FormatColumnFamilyName(kFormatVersion + 1));
  absl::StatusOr<int> refused = FormatVersionFromFamilies(older, path());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(refused.status().message()),
              HasSubstr("format " + std::to_string(kFormatVersion + 1)));
  Reopen();
  EXPECT_EQ(CommittedInt("n"), 1);
}

TEST_F(StateMergeTest, DeleteRangeRemovesExactlyItsRangeInWriteOrder) {
  Run([](Txn& txn) {
    for (const char* k : {"a", "b", "b1", "c", "d"}) txn.Put(k, "old");
    return absl::OkStatus();
  });
  Result r = Run([](Txn& txn) {
    txn.Put("b2", "before");  // deleted by the range below
    if (absl::Status s = txn.DeleteRange("b", "d"); !s.ok()) return s;
    txn.Put("c", "after");  // written after the range: kept
    return txn.Merge("n", MergeOp::kAddInt64, Int64Operand(1));
  });
  ASSERT_EQ(r.outcome, Outcome::kProcessed) << r.error;
  std::vector<std::string> keys;
  ASSERT_TRUE(engine_
                  ->ScanState("", "",
                              [&](std::string_view k, std::string_view v) {
                                keys.push_back(
                                    std::string(k) + "=" +
                                    std::string(v.size() == 8 ? "int" : v));
                                return true;
                              })
                  .ok());
  EXPECT_THAT(keys, ElementsAre("a=old", "c=after", "d=old", "n=int"));
}

TEST_F(StateMergeTest, PartitionExportCarriesFoldedValuesAndRangeDeletions) {
  for (int i = 0; i < 3; ++i) {
    absl::StatusOr<Result> r = engine_->Process(
        Message{.id = "p" + std::to_string(i), .source = "t", .partition = 2},
        [&](const Message&, Txn& txn) {
          PartitionTxn state(txn, "t", 2);
          if (i == 0) {
            state.Put("gone/1", "x");
            state.Put("gone/2", "y");
          }
          if (i == 2) {
            if (absl::Status s = state.DeleteRange("gone/", "gone0"); !s.ok()) {
              return s;
            }
          }
          return state.Merge("n", MergeOp::kAddInt64, Int64Operand(4));
        });
    ASSERT_TRUE(r.ok() && r->outcome == Outcome::kProcessed);
  }
  absl::StatusOr<PartitionSnapshot> snapshot = engine_->ExportPartition("t", 2);
  ASSERT_TRUE(snapshot.ok()) << snapshot.status();
  ASSERT_EQ(snapshot->entries.size(), 1u);
  EXPECT_EQ(snapshot->entries[0].first, "n");
  EXPECT_EQ(ReadInt64(snapshot->entries[0].second), 12);
  // Imported elsewhere, the folded value is a plain value there.
  util::TempDir other_dir;
  auto other = Engine::Open(other_dir.Sub("db"), Options());
  ASSERT_TRUE(other.ok());
  ASSERT_TRUE((*other)->ImportPartition(*snapshot).ok());
  EXPECT_EQ(
      ReadInt64(
          (*other)->GetState(PartitionStatePrefix("t", 2) + "n")->value_or("")),
      12);
}

TEST_F(StateMergeTest, DeleteRangeWithABadRangeFailsTheMessage) {
  for (const auto& range : {std::pair{"b", "a"}, std::pair{"a", ""}}) {
    // Named copies: clang 14 cannot capture structured bindings.
    const char* const begin = range.first;
    const char* const end = range.second;
    absl::Status returned;
    Result r = Run([&](Txn& txn) {
      txn.Put("x", "1");
      returned = txn.DeleteRange(begin, end);
      return absl::OkStatus();
    });
    EXPECT_EQ(returned.code(), absl::StatusCode::kInvalidArgument)
        << begin << ".." << end;
    EXPECT_EQ(r.outcome, Outcome::kFailed);
  }
  EXPECT_EQ(*engine_->GetState("x"), std::nullopt);
  // An empty range deletes nothing and is no error.
  Result r = Run([](Txn& txn) { return txn.DeleteRange("a", "a"); });
  EXPECT_EQ(r.outcome, Outcome::kProcessed);
}

}  // namespace
}  // namespace idem
