// Txn::Scan, Txn::ScanPrefix and Engine::ScanState (idem/txn.h,
// idem/engine.h): byte order over [begin, end), no upper bound for an empty
// end, reverse and limit, a visitor that stops; a scan sees the handler's
// own writes, earlier messages of its batch and the store, merged in order
// with deletes hidden; bad ranges are kInvalidArgument; a visitor that
// throws fails the message and commits nothing; PartitionTxn scans stay
// inside their partition and show relative keys.

#include <sys/mman.h>

#include <cstdint>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "idem/engine.h"
#include "idem/partition_state.h"
#include "util/temp_dir.h"

namespace idem {
namespace {

using ::testing::ElementsAre;
using ::testing::Pair;

using KeyValues = std::vector<std::pair<std::string, std::string>>;

class StateScanTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Options options;
    options.durability = Durability::kBuffered;
    absl::StatusOr<std::unique_ptr<Engine>> opened =
        Engine::Open(dir_.Sub("db"), options);
    ASSERT_TRUE(opened.ok()) << opened.status();
    engine_ = *std::move(opened);
  }

  // Commits `writes` (value "" deletes) as one message.
  void Seed(const KeyValues& writes) {
    absl::StatusOr<Result> r =
        engine_->Process(Message{.id = "seed-" + std::to_string(++seeds_)},
                         [&](const Message&, Txn& txn) {
                           for (const auto& [key, value] : writes) {
                             if (value.empty()) {
                               txn.Delete(key);
                             } else {
                               txn.Put(key, value);
                             }
                           }
                           return absl::OkStatus();
                         });
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_EQ(r->outcome, Outcome::kProcessed);
  }

  // What a handler's Scan(begin, end, options) visits, after `before` ran
  // in the same handler.
  KeyValues ScanInHandler(
      std::string_view begin, std::string_view end,
      const ScanOptions& options = ScanOptions(),
      std::function<void(Txn&)> before = [](Txn&) {}) {
    KeyValues seen;
    absl::StatusOr<Result> r =
        engine_->Process(Message{.id = "scan-" + std::to_string(++seeds_)},
                         [&](const Message&, Txn& txn) {
                           before(txn);
                           return txn.Scan(
                               begin, end,
                               [&](std::string_view k, std::string_view v) {
                                 seen.emplace_back(k, v);
                                 return true;
                               },
                               options);
                         });
    EXPECT_TRUE(r.ok()) << r.status();
    if (r.ok()) {
      EXPECT_EQ(r->outcome, Outcome::kProcessed) << r->error;
    }
    return seen;
  }

  KeyValues ScanCommitted(std::string_view begin, std::string_view end,
                          const ScanOptions& options = ScanOptions()) {
    KeyValues seen;
    absl::Status s = engine_->ScanState(
        begin, end,
        [&](std::string_view k, std::string_view v) {
          seen.emplace_back(k, v);
          return true;
        },
        options);
    EXPECT_TRUE(s.ok()) << s;
    return seen;
  }

  util::TempDir dir_;
  std::unique_ptr<Engine> engine_;
  int seeds_ = 0;
};

TEST_F(StateScanTest, VisitsTheRangeInByteOrderWithItsEndExcluded) {
  Seed({{"b", "2"}, {"a", "1"}, {"c", "3"}, {"d", "4"}});
  EXPECT_THAT(ScanInHandler("b", "d"),
              ElementsAre(Pair("b", "2"), Pair("c", "3")));
  EXPECT_THAT(ScanCommitted("b", "d"),
              ElementsAre(Pair("b", "2"), Pair("c", "3")));
  EXPECT_TRUE(ScanInHandler("b", "b").empty());
}

TEST_F(StateScanTest, EmptyEndMeansNoUpperBound) {
  Seed({{"a", "1"}, {"zz", "2"}, {"\xff\xff", "3"}});
  EXPECT_THAT(ScanInHandler("b", ""),
              ElementsAre(Pair("zz", "2"), Pair("\xff\xff", "3")));
  EXPECT_EQ(ScanCommitted("", "").size(), 3u);
}

TEST_F(StateScanTest, ReverseAndLimit) {
  Seed({{"a", "1"}, {"b", "2"}, {"c", "3"}, {"d", "4"}});
  EXPECT_THAT(ScanInHandler("a", "d", ScanOptions{.reverse = true}),
              ElementsAre(Pair("c", "3"), Pair("b", "2"), Pair("a", "1")));
  EXPECT_THAT(ScanInHandler("a", "", ScanOptions{.limit = 2}),
              ElementsAre(Pair("a", "1"), Pair("b", "2")));
  EXPECT_THAT(ScanInHandler("a", "", ScanOptions{.reverse = true, .limit = 1}),
              ElementsAre(Pair("d", "4")));
  EXPECT_THAT(ScanCommitted("b", "", ScanOptions{.reverse = true, .limit = 2}),
              ElementsAre(Pair("d", "4"), Pair("c", "3")));
}

TEST_F(StateScanTest, VisitorReturningFalseStopsTheScan) {
  Seed({{"a", "1"}, {"b", "2"}, {"c", "3"}});
  std::vector<std::string> seen;
  ASSERT_TRUE(engine_
                  ->ScanState("", "",
                              [&](std::string_view k, std::string_view) {
                                seen.emplace_back(k);
                                return k != "b";
                              })
                  .ok());
  EXPECT_THAT(seen, ElementsAre("a", "b"));
}

TEST_F(StateScanTest, SeesItsOwnWritesAndDeletesMergedWithTheStore) {
  Seed({{"a", "1"}, {"b", "2"}, {"c", "3"}, {"e", "5"}});
  KeyValues seen = ScanInHandler("a", "z", ScanOptions(), [](Txn& txn) {
    txn.Put("b", "two");
    txn.Delete("c");
    txn.Put("d", "4");
    txn.Delete("never-there");
  });
  EXPECT_THAT(seen, ElementsAre(Pair("a", "1"), Pair("b", "two"),
                                Pair("d", "4"), Pair("e", "5")));
  seen = ScanInHandler("a", "z", ScanOptions{.reverse = true}, [](Txn& txn) {
    txn.Delete("e");
    txn.Put("f", "6");
  });
  // The first handler's writes committed.
  EXPECT_THAT(seen, ElementsAre(Pair("f", "6"), Pair("d", "4"),
                                Pair("b", "two"), Pair("a", "1")));
}

TEST_F(StateScanTest, SeesTheWritesOfEarlierMessagesOfItsBatch) {
  Seed({{"k1", "store"}, {"k3", "store"}});
  std::vector<Message> batch = {{.id = "m1"}, {.id = "m2"}, {.id = "m3"}};
  std::vector<KeyValues> seen(3);
  absl::StatusOr<std::vector<Result>> results =
      engine_->ProcessBatch(batch, [&](const Message& m, Txn& txn) {
        const int i = m.id.back() - '1';
        if (i == 0) txn.Put("k2", "m1");
        if (i == 1) txn.Delete("k1");
        return txn.ScanPrefix("k", [&](std::string_view k, std::string_view v) {
          seen[i].emplace_back(k, v);
          return true;
        });
      });
  ASSERT_TRUE(results.ok()) << results.status();
  EXPECT_THAT(seen[0], ElementsAre(Pair("k1", "store"), Pair("k2", "m1"),
                                   Pair("k3", "store")));
  EXPECT_THAT(seen[2], ElementsAre(Pair("k2", "m1"), Pair("k3", "store")));
}

TEST_F(StateScanTest, ScanPrefixVisitsOnlyKeysWithThePrefix) {
  Seed({{"order/1/a", "x"},
        {"order/1/b", "y"},
        {"order/10", "no"},
        {"order/2/a", "no"},
        {"\xff\xff"
         "a",
         "ff"},
        {"\xff\xfe", "no"}});
  std::vector<std::string> keys;
  ASSERT_TRUE(engine_
                  ->Process(Message{.id = "p"},
                            [&](const Message&, Txn& txn) {
                              absl::Status s = txn.ScanPrefix(
                                  "order/1/",
                                  [&](std::string_view k, std::string_view) {
                                    keys.emplace_back(k);
                                    return true;
                                  });
                              if (!s.ok()) return s;
                              return txn.ScanPrefix(
                                  "\xff\xff",
                                  [&](std::string_view k, std::string_view) {
                                    keys.emplace_back(k);
                                    return true;
                                  });
                            })
                  .ok());
  EXPECT_THAT(keys, ElementsAre("order/1/a", "order/1/b",
                                "\xff\xff"
                                "a"));
}

// A default-constructed view has a null data pointer, which RocksDB's
// comparisons assert against: it must read as the empty key.
TEST_F(StateScanTest, NullEmptyViewsAreTheEmptyKey) {
  Seed({{"a", "1"}});
  KeyValues seen = ScanInHandler(
      std::string_view(), std::string_view(), ScanOptions(),
      [](Txn& txn) { EXPECT_TRUE(txn.Get(std::string_view()).ok()); });
  EXPECT_THAT(seen, ElementsAre(Pair("a", "1")));
  EXPECT_THAT(ScanCommitted(std::string_view(), std::string_view()),
              ElementsAre(Pair("a", "1")));
  EXPECT_TRUE(engine_->GetState(std::string_view()).ok());
}

TEST_F(StateScanTest, RangeWithEndBelowBeginIsInvalidArgument) {
  absl::Status in_handler;
  absl::StatusOr<Result> r =
      engine_->Process(Message{.id = "bad"}, [&](const Message&, Txn& txn) {
        in_handler = txn.Scan(
            "b", "a", [](std::string_view, std::string_view) { return true; });
        return absl::OkStatus();
      });
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(in_handler.code(), absl::StatusCode::kInvalidArgument)
      << in_handler;
  EXPECT_EQ(
      engine_
          ->ScanState("b", "a",
                      [](std::string_view, std::string_view) { return true; })
          .code(),
      absl::StatusCode::kInvalidArgument);
}

// A bound one byte over 4 GiB, the largest a state key may be: the view
// points into a reserved mapping that is never touched (MAP_NORESERVE), so
// the test costs address space, not memory; the range is refused by its
// size before any byte of it is read.
TEST_F(StateScanTest, BoundOverFourGibIsInvalidArgument) {
  const size_t size = size_t{std::numeric_limits<uint32_t>::max()} + 1;
  void* mapped = mmap(nullptr, size, PROT_READ,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (mapped == MAP_FAILED)
    GTEST_SKIP() << "cannot reserve 4 GiB of address space";
  const std::string_view huge(static_cast<const char*>(mapped), size);
  auto visit = [](std::string_view, std::string_view) { return true; };
  absl::Status as_begin;
  absl::Status as_end;
  absl::StatusOr<Result> r =
      engine_->Process(Message{.id = "huge"}, [&](const Message&, Txn& txn) {
        as_begin = txn.Scan(huge, "", visit);
        as_end = txn.Scan("", huge, visit);
        return absl::OkStatus();
      });
  const absl::Status committed = engine_->ScanState(huge, "", visit);
  munmap(mapped, size);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(as_begin.code(), absl::StatusCode::kInvalidArgument) << as_begin;
  EXPECT_THAT(std::string(as_begin.message()), ::testing::HasSubstr("4 GiB"));
  EXPECT_EQ(as_end.code(), absl::StatusCode::kInvalidArgument) << as_end;
  EXPECT_EQ(committed.code(), absl::StatusCode::kInvalidArgument) << committed;
}

TEST_F(StateScanTest, VisitorThatThrowsFailsTheMessageAndCommitsNothing) {
  Seed({{"a", "1"}});
  absl::StatusOr<Result> r =
      engine_->Process(Message{.id = "throws"}, [&](const Message&, Txn& txn) {
        txn.Put("written", "x");
        return txn.Scan("", "", [](std::string_view, std::string_view) -> bool {
          throw std::runtime_error("visitor exploded");
        });
      });
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->outcome, Outcome::kFailed);
  EXPECT_EQ(*engine_->GetState("written"), std::nullopt);
  // The engine stays usable, and the message runs again when redelivered.
  EXPECT_THAT(ScanInHandler("", ""), ElementsAre(Pair("a", "1")));
  absl::StatusOr<bool> seen = engine_->Seen("throws");
  ASSERT_TRUE(seen.ok());
  EXPECT_FALSE(*seen);
}

TEST_F(StateScanTest, ScanStateSeesOnlyCommittedState) {
  Seed({{"a", "1"}});
  KeyValues inside;
  ASSERT_TRUE(engine_
                  ->Process(Message{.id = "reads-committed"},
                            [&](const Message&, Txn& txn) {
                              txn.Put("b", "uncommitted");
                              return engine_->ScanState(
                                  "", "",
                                  [&](std::string_view k, std::string_view v) {
                                    inside.emplace_back(k, v);
                                    return true;
                                  });
                            })
                  .ok());
  EXPECT_THAT(inside, ElementsAre(Pair("a", "1")));
  EXPECT_THAT(ScanCommitted("", ""),
              ElementsAre(Pair("a", "1"), Pair("b", "uncommitted")));
}

TEST_F(StateScanTest, PartitionTxnScansStayInsideThePartition) {
  absl::StatusOr<Result> r =
      engine_->Process(Message{.id = "p", .source = "t", .partition = 1},
                       [&](const Message&, Txn& txn) {
                         PartitionTxn one(txn, "t", 1);
                         PartitionTxn two(txn, "t", 2);
                         one.Put("a", "1");
                         one.Put("b", "2");
                         two.Put("a", "other");
                         return absl::OkStatus();
                       });
  ASSERT_TRUE(r.ok()) << r.status();
  KeyValues seen;
  absl::Status deleted;
  r = engine_->Process(
      Message{.id = "q", .source = "t", .partition = 1},
      [&](const Message&, Txn& txn) {
        // The store's first merge runs the handler again (format 4).
        seen.clear();
        PartitionTxn one(txn, "t", 1);
        absl::Status s =
            one.Scan("", "", [&](std::string_view k, std::string_view v) {
              seen.emplace_back(k, v);
              return true;
            });
        if (!s.ok()) return s;
        deleted = one.DeleteRange("a", "b");
        return one.Merge("n", MergeOp::kAddInt64, Int64Operand(3));
      });
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(seen, ElementsAre(Pair("a", "1"), Pair("b", "2")));
  EXPECT_TRUE(deleted.ok()) << deleted;
  const std::string one = PartitionStatePrefix("t", 1);
  EXPECT_EQ(*engine_->GetState(one + "a"), std::nullopt);
  EXPECT_EQ(*engine_->GetState(one + "b"), std::optional<std::string>("2"));
  EXPECT_EQ(ReadInt64(engine_->GetState(one + "n")->value_or("")), 3);
  EXPECT_EQ(*engine_->GetState(PartitionStatePrefix("t", 2) + "a"),
            std::optional<std::string>("other"));
}

}  // namespace
}  // namespace idem
