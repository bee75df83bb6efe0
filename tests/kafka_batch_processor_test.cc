// ProcessRecords without Kafka, on hand-made Records: what the Kafka adapter
// adds to the retry machine (retry/retry_rounds.h, whose rules
// tests/retry_rounds_test.cc holds): record IDs, per-partition order,
// the dead-letter function and topic, offsets.

#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "idem/engine.h"
#include "kafka/batch_processor.h"
#include "tests/testing/engine_test_util.h"
#include "util/temp_dir.h"

namespace idem::kafka {
namespace {

using ::idem::util::TempDir;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pair;

// Records of topic "t": (partition, offset, id header, value).
struct Spec {
  int32_t partition;
  int64_t offset;
  std::string id;
  std::string value;
};

class BatchProcessorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto engine = Engine::Open(dir_.Sub("store"), Options());
    ASSERT_TRUE(engine.ok()) << engine.status();
    engine_ = *std::move(engine);
    options_.retry_backoff = absl::ZeroDuration();
  }

  std::vector<Record> Records() {
    std::vector<Record> records;
    for (const Spec& spec : specs_) {
      Record r;
      r.topic = "t";
      r.partition = spec.partition;
      r.offset = spec.offset;
      r.value = spec.value;
      if (!spec.id.empty() || spec.value == "empty-id") {
        r.headers.emplace_back("message-id", spec.id);
      }
      records.push_back(r);
    }
    return records;
  }

  absl::StatusOr<ProcessedBatch> Process(Handler handler) {
    std::vector<Record> records = Records();
    return ProcessRecords(*engine_, absl::MakeSpan(records), options_,
                          dead_letter_, handler);
  }

  // Replaces the engine by one with Options::detect_conflicts.
  void UseConflictDetectingEngine() {
    engine_.reset();
    Options options;
    options.detect_conflicts = true;
    auto engine = Engine::Open(dir_.Sub("conflicts"), options);
    ASSERT_TRUE(engine.ok()) << engine.status();
    engine_ = *std::move(engine);
  }

  std::optional<int64_t> Offset(int32_t partition) {
    auto offset = engine_->CommittedOffset("t", partition);
    EXPECT_TRUE(offset.ok());
    return offset.ok() ? *offset : std::nullopt;
  }

  TempDir dir_;
  std::unique_ptr<Engine> engine_;
  ConsumerOptions options_;
  DeadLetterFunction dead_letter_;
  std::vector<Spec> specs_;
};

TEST_F(BatchProcessorTest, RetriesAFailingRecordUntilItSucceeds) {
  specs_ = {{0, 0, "a", "x"}, {0, 1, "b", "x"}};
  int calls_b = 0;
  auto ok = Process([&](const Record& r, Txn&) {
    if (r.id == "b" && ++calls_b < 3) return absl::UnavailableError("flaky");
    return absl::OkStatus();
  });
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->report.processed, 2);
  EXPECT_EQ(ok->report.retries, 2);
  EXPECT_EQ(ok->report.dead_lettered, 0);
  EXPECT_EQ(Offset(0), 1);
  EXPECT_THAT(ok->next_offsets, ElementsAre(Pair(Pair("t", 0), 2)));
}

TEST_F(BatchProcessorTest, LaterRecordsOfAPartitionWaitForAFailedOne) {
  // Partition 0: a fails once, then b must not run before a.
  // Partition 1: c runs in the first round.
  specs_ = {{0, 0, "a", "x"}, {1, 0, "c", "x"}, {0, 1, "b", "x"}};
  std::vector<std::string> order;
  bool failed_once = false;
  auto ok = Process([&](const Record& r, Txn&) {
    if (r.id == "a" && !failed_once) {
      failed_once = true;
      order.push_back("a-failed");
      return absl::UnavailableError("flaky");
    }
    order.push_back(std::string(r.id));
    return absl::OkStatus();
  });
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_THAT(order, ElementsAre("a-failed", "c", "a", "b"));
  EXPECT_EQ(ok->report.processed, 3);
  EXPECT_EQ(ok->report.retries, 1);  // deferred b is not an attempt
  EXPECT_EQ(Offset(0), 1);
  EXPECT_EQ(Offset(1), 0);
}

// ConsumerOptions' max_attempts and non_retriable_codes are the retry
// machine's policy.
TEST_F(BatchProcessorTest, ConsumerOptionsSetHowOftenARecordIsTried) {
  specs_ = {{0, 0, "missing", "x"}, {1, 0, "flaky", "x"}};
  options_.max_attempts = 2;
  options_.non_retriable_codes = {absl::StatusCode::kNotFound};
  std::map<std::string, int> calls;
  std::vector<std::string> dead;
  dead_letter_ = [&](const Record& r, const absl::Status&) {
    dead.push_back(std::string(r.id));
    return absl::OkStatus();
  };
  auto ok = Process([&](const Record& r, Txn&) {
    ++calls[std::string(r.id)];
    if (r.id == "missing") return absl::NotFoundError("no such account");
    return absl::UnavailableError("try later");
  });
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(calls["missing"], 1);
  EXPECT_EQ(calls["flaky"], 2);
  EXPECT_THAT(dead, ElementsAre("missing", "flaky"));
  EXPECT_EQ(ok->report.records, 2);
  EXPECT_EQ(ok->report.non_retriable, 1);
  EXPECT_EQ(ok->report.retries, 1);
  EXPECT_EQ(ok->report.dead_lettered, 2);
}

// Through dead_letter_topic the conflict's dead letter is emitted in a commit
// of its own, after the one that moved the offset, with idem.reason
// "conflict".
TEST_F(BatchProcessorTest, ConflictsGoToTheDeadLetterTopicWithTheirReason) {
  ASSERT_NO_FATAL_FAILURE(UseConflictDetectingEngine());
  options_.dead_letter_topic = "dlq";
  specs_ = {{0, 0, "a", "first"}, {0, 1, "a", "second"}};
  auto ok = Process([](const Record&, Txn&) { return absl::OkStatus(); });
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->report.dead_lettered, 1);
  EXPECT_EQ(Offset(0), 1);
  absl::StatusOr<std::vector<OutboxEntry>> entries = engine_->ReadOutbox(10);
  ASSERT_TRUE(entries.ok()) << entries.status();
  ASSERT_EQ(entries->size(), 1u);
  EXPECT_EQ((*entries)[0].destination, "dlq");
  EXPECT_EQ((*entries)[0].value, "second");
  std::map<std::string, std::string> headers((*entries)[0].headers.begin(),
                                             (*entries)[0].headers.end());
  EXPECT_EQ(headers["idem.reason"], "conflict");
  EXPECT_THAT(headers["idem.error"], HasSubstr("conflict:"));
  EXPECT_EQ(headers["idem.source.offset"], "1");
}

TEST_F(BatchProcessorTest, WithoutADeadLetterPathGivingUpAbortsTheBatch) {
  specs_ = {{0, 0, "a", "x"}, {0, 1, "poison", "x"}, {0, 2, "b", "x"}};
  options_.max_attempts = 2;
  auto result = Process([&](const Record& r, Txn&) {
    return r.id == "poison" ? absl::InternalError("bad payload")
                            : absl::OkStatus();
  });
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), absl::StatusCode::kAborted);
  EXPECT_THAT(result.status().message(), HasSubstr("t/0/1"));
  EXPECT_THAT(result.status().message(), HasSubstr("bad payload"));
  EXPECT_EQ(Offset(0), 0);  // not past the record
}

TEST_F(BatchProcessorTest, UnusableIdsAreDeadLetteredWithoutAttempts) {
  specs_ = {{0, 0, "", "empty-id"},
            {0, 1, std::string(kMaxIdBytes + 1, 'x'), "x"},
            {0, 2, "fine", "x"}};
  std::vector<std::string> dead;
  dead_letter_ = [&](const Record& r, const absl::Status& error) {
    EXPECT_EQ(error.code(), absl::StatusCode::kInvalidArgument);
    dead.push_back(absl::StrCat(r.offset));
    return absl::OkStatus();
  };
  int calls = 0;
  auto ok = Process([&](const Record&, Txn&) {
    ++calls;
    return absl::OkStatus();
  });
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_THAT(dead, ElementsAre("0", "1"));
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(Offset(0), 2);
}

TEST_F(BatchProcessorTest, RecordsWithoutTheHeaderAreIdentifiedByPosition) {
  specs_ = {{0, 0, "", "x"}, {0, 0, "", "x"}};  // the same record twice
  std::vector<std::string> ids;
  auto ok = Process([&](const Record& r, Txn&) {
    ids.push_back(std::string(r.id));
    return absl::OkStatus();
  });
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_THAT(ids, ElementsAre("t/0/0"));
  EXPECT_EQ(ok->report.duplicates, 1);
}

TEST_F(BatchProcessorTest, AFailingDeadLetterPathFailsTheBatch) {
  specs_ = {{0, 0, "poison", "x"}};
  options_.max_attempts = 1;
  dead_letter_ = [](const Record&, const absl::Status&) {
    return absl::UnavailableError("dead-letter topic down");
  };
  auto result = Process(
      [](const Record&, Txn&) { return absl::InternalError("bad payload"); });
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(result.status().message(), HasSubstr("t/0/0"));
  EXPECT_EQ(Offset(0), std::nullopt);
}

TEST_F(BatchProcessorTest, IdFunctionErrorsAreDeadLettered) {
  specs_ = {{0, 0, "a", "x"}};
  options_.id_function = [](const Record&) -> absl::StatusOr<std::string> {
    return absl::InvalidArgumentError("no business key");
  };
  std::vector<std::string> errors;
  dead_letter_ = [&](const Record&, const absl::Status& error) {
    errors.push_back(std::string(error.message()));
    return absl::OkStatus();
  };
  auto ok = Process([](const Record&, Txn&) { return absl::OkStatus(); });
  ASSERT_TRUE(ok.ok()) << ok.status();
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_THAT(errors[0], HasSubstr("no business key"));
  EXPECT_EQ(Offset(0), 0);
}

TEST_F(BatchProcessorTest, ThrowingUserCodeBecomesAnError) {
  specs_ = {{0, 0, "a", "x"}};
  options_.id_function = [](const Record&) -> absl::StatusOr<std::string> {
    throw std::runtime_error("boom");
  };
  std::vector<absl::StatusCode> codes;
  dead_letter_ = [&](const Record&, const absl::Status& error) -> absl::Status {
    codes.push_back(error.code());
    throw std::runtime_error("dead-letter store down");
  };
  auto result = Process([](const Record&, Txn&) { return absl::OkStatus(); });
  EXPECT_THAT(codes, ElementsAre(absl::StatusCode::kInternal));  // id_function
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(result.status().message(), HasSubstr("dead-letter store down"));
}

}  // namespace
}  // namespace idem::kafka
