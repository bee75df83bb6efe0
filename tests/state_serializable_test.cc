// Scans are serializable (idem/txn.h, Txn::Scan): handlers that count the
// rows of a range and insert one while the count is below a limit never
// commit more rows than the limit together, however they interleave (no
// write skew through a phantom), because the range a scan read is
// validated at commit. The same check must fail against the broken variant
// that skips range validation (EngineHooks::skip_range_validation).
// A range deletion likewise makes a handler that read a key in its range
// run again.

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "engine/engine_hooks.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "idem/engine.h"
#include "tests/testing/findings.h"
#include "tests/testing/parallel.h"
#include "util/temp_dir.h"

namespace idem {
namespace {

using ::testing::HasSubstr;

constexpr int kSkewThreads = 8;
constexpr int kSkewLimit = 2;
constexpr int kMaxSkewRounds = 20;

absl::StatusOr<std::unique_ptr<Engine>> OpenSkewEngine(
    const util::TempDir& dir, const EngineHooks& hooks) {
  Options options;
  options.durability = Durability::kBuffered;
  return OpenEngineWithHooks(dir.Sub("db"), options, hooks);
}

// kSkewThreads handlers each count the rows under `prefix` and, while fewer
// than kSkewLimit, insert their own after a pause that lets the others
// scan too. Fails if more than kSkewLimit rows committed.
::testing::AssertionResult CheckNoWriteSkew(Engine& engine,
                                            const std::string& prefix) {
  test::Findings f;
  test::RunTogether(kSkewThreads, [&](int t) {
    const std::string id = absl::StrCat(prefix, "insert-", t);
    absl::StatusOr<Result> r =
        engine.Process(Message{.id = id}, [&](const Message&, Txn& txn) {
          int rows = 0;
          absl::Status s =
              txn.ScanPrefix(prefix, [&](std::string_view, std::string_view) {
                ++rows;
                return true;
              });
          if (!s.ok()) return s;
          absl::SleepFor(absl::Milliseconds(2));
          if (rows < kSkewLimit) txn.Put(absl::StrCat(prefix, t), "row");
          return absl::OkStatus();
        });
    f.Ok(r.status(), id);
  });
  int rows = 0;
  absl::Status s = engine.ScanState(prefix, prefix + "\xff",
                                    [&](std::string_view, std::string_view) {
                                      ++rows;
                                      return true;
                                    });
  f.Ok(s, "ScanState");
  f.Expect(rows <= kSkewLimit,
           absl::StrCat("write skew: ", rows, " rows committed, limit ",
                        kSkewLimit));
  return f.Result();
}

TEST(StateSerializableTest, CountThenInsertNeverExceedsTheLimit) {
  util::TempDir dir;
  absl::StatusOr<std::unique_ptr<Engine>> engine = OpenSkewEngine(dir, {});
  ASSERT_TRUE(engine.ok()) << engine.status();
  for (int round = 0; round < 3; ++round) {
    EXPECT_TRUE(CheckNoWriteSkew(**engine, absl::StrCat("slots", round, "/")));
  }
}

TEST(StateSerializableBrokenVariantTest, WithoutRangeValidationSkewHappens) {
  util::TempDir dir;
  EngineHooks hooks;
  hooks.skip_range_validation = true;
  absl::StatusOr<std::unique_ptr<Engine>> engine = OpenSkewEngine(dir, hooks);
  ASSERT_TRUE(engine.ok()) << engine.status();
  ::testing::AssertionResult detected = ::testing::AssertionSuccess();
  for (int round = 0; round < kMaxSkewRounds && detected; ++round) {
    detected = CheckNoWriteSkew(**engine, absl::StrCat("broken", round, "/"));
  }
  ASSERT_FALSE(detected) << "the check never caught the broken variant";
  EXPECT_THAT(detected.message(), HasSubstr("write skew"));
}

TEST(StateSerializableTest, RangeDeletionMakesAReaderOfItsRangeRunAgain) {
  util::TempDir dir;
  absl::StatusOr<std::unique_ptr<Engine>> engine = OpenSkewEngine(dir, {});
  ASSERT_TRUE(engine.ok()) << engine.status();
  ASSERT_TRUE((*engine)
                  ->Process(Message{.id = "seed"},
                            [](const Message&, Txn& txn) {
                              txn.Put("r/x", "1");
                              return absl::OkStatus();
                            })
                  .ok());
  std::atomic<int> reader_runs{0};
  std::atomic<bool> read_once{false};
  std::string copied;
  std::thread reader([&] {
    absl::StatusOr<Result> r = (*engine)->Process(
        Message{.id = "reader"}, [&](const Message&, Txn& txn) {
          reader_runs.fetch_add(1);
          absl::StatusOr<std::optional<std::string>> v = txn.Get("r/x");
          if (!v.ok()) return v.status();
          read_once.store(true);
          // Long enough for the deletion below to commit meanwhile.
          absl::SleepFor(absl::Milliseconds(100));
          copied = v->value_or("absent");
          txn.Put("copy", copied);
          return absl::OkStatus();
        });
    EXPECT_TRUE(r.ok());
  });
  while (!read_once.load()) absl::SleepFor(absl::Milliseconds(1));
  ASSERT_TRUE((*engine)
                  ->Process(Message{.id = "deleter"},
                            [](const Message&, Txn& txn) {
                              return txn.DeleteRange("r/", "r0");
                            })
                  .ok());
  reader.join();
  EXPECT_EQ(reader_runs.load(), 2);
  EXPECT_EQ(*(*engine)->GetState("copy"), std::optional<std::string>("absent"));
}

}  // namespace
}  // namespace idem
