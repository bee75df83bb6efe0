// ProcessRecords without Kafka: retries, per-partition order behind a failed
// record, dead-lettering and offsets, on hand-made Records.

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

TEST_F(BatchProcessorTest, GivesUpAfterMaxAttemptsAndMovesPastTheRecord) {
  specs_ = {{0, 0, "a", "x"}, {0, 1, "poison", "x"}, {0, 2, "b", "x"}};
  options_.max_attempts = 3;
  std::vector<std::string> dead;
  dead_letter_ = [&](const Record& r, const absl::Status& error) {
    dead.push_back(absl::StrCat(r.offset, " ", error.message()));
    return absl::OkStatus();
  };
  int poison_calls = 0;
  auto ok = Process([&](const Record& r, Txn& txn) {
    if (r.id == "poison") {
      ++poison_calls;
      return absl::InternalError("bad payload");
    }
    txn.Put(std::string(r.id), "done");
    return absl::OkStatus();
  });
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(poison_calls, 3);
  EXPECT_THAT(dead, ElementsAre("1 bad payload"));
  EXPECT_EQ(ok->report.processed, 2);
  EXPECT_EQ(ok->report.dead_lettered, 1);
  EXPECT_EQ(Offset(0), 2);
  auto seen = engine_->Seen("poison");
  ASSERT_TRUE(seen.ok());
  EXPECT_FALSE(*seen);  // a corrected redelivery will run
  auto b = engine_->GetState("b");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(*b, "done");
}

// A handler error with a non-retriable code (ConsumerOptions::
// non_retriable_codes) is dead-lettered at its first attempt; other codes
// are retried. Clearing the list retries every code.
TEST_F(BatchProcessorTest, NonRetriableHandlerErrorsAreDeadLetteredAtOnce) {
  specs_ = {{0, 0, "bad", "x"}, {1, 0, "flaky", "x"}, {2, 0, "ok", "x"}};
  options_.max_attempts = 3;
  std::map<std::string, int> calls;
  std::vector<std::pair<std::string, absl::StatusCode>> dead;
  dead_letter_ = [&](const Record& r, const absl::Status& error) {
    dead.emplace_back(std::string(r.id), error.code());
    return absl::OkStatus();
  };
  auto handler = [&](const Record& r, Txn&) {
    ++calls[std::string(r.id)];
    if (r.id == "bad") return absl::InvalidArgumentError("no such account");
    if (r.id == "flaky") return absl::UnavailableError("try later");
    return absl::OkStatus();
  };
  auto ok = Process(handler);
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(calls["bad"], 1);
  EXPECT_EQ(calls["flaky"], 3);
  EXPECT_EQ(ok->report.non_retriable, 1);
  EXPECT_EQ(ok->report.dead_lettered, 2);
  EXPECT_EQ(ok->report.retries, 2);
  EXPECT_THAT(dead, ElementsAre(Pair("bad", absl::StatusCode::kInvalidArgument),
                                Pair("flaky", absl::StatusCode::kUnavailable)));

  // With no non-retriable codes, kInvalidArgument is retried too (a
  // dead-lettered ID is not marked seen, so "bad" runs again).
  options_.non_retriable_codes.clear();
  calls.clear();
  dead.clear();
  specs_ = {{3, 0, "bad", "x"}};
  auto retried = Process(handler);
  ASSERT_TRUE(retried.ok()) << retried.status();
  EXPECT_EQ(calls["bad"], 3);
  EXPECT_EQ(retried->report.non_retriable, 0);
  EXPECT_EQ(retried->report.dead_lettered, 1);
}

// A handler's PermanentError (idem/message.h) is dead-lettered at its
// first attempt, whatever its code, through the non-retriable path.
TEST_F(BatchProcessorTest, PermanentErrorsAreDeadLetteredAtOnce) {
  specs_ = {{0, 0, "bad", "x"}, {0, 1, "ok", "x"}};
  options_.max_attempts = 3;
  std::vector<std::string> dead;
  dead_letter_ = [&](const Record& r, const absl::Status& error) {
    dead.push_back(std::string(r.id) + " " + std::string(error.message()));
    return absl::OkStatus();
  };
  int bad_calls = 0;
  auto ok = Process([&](const Record& r, Txn&) {
    if (r.id != "bad") return absl::OkStatus();
    ++bad_calls;
    // kUnavailable would be retried; permanent wins.
    return PermanentError(absl::UnavailableError("never valid"));
  });
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(bad_calls, 1);
  EXPECT_THAT(dead, ElementsAre("bad never valid"));
  EXPECT_EQ(ok->report.non_retriable, 1);
  EXPECT_EQ(ok->report.dead_lettered, 1);
  EXPECT_EQ(ok->report.retries, 0);
  EXPECT_EQ(Offset(0), 1);
}

// Under Options::detect_conflicts, a record whose ID was processed with
// other content is dead-lettered with reason "conflict"; the offset moves
// past it and its handler does not run.
TEST_F(BatchProcessorTest, ConflictsAreDeadLettered) {
  ASSERT_NO_FATAL_FAILURE(UseConflictDetectingEngine());
  specs_ = {{0, 0, "a", "first"}, {0, 1, "a", "second"}, {0, 2, "b", "x"}};
  std::vector<std::pair<std::string, std::string>> dead;
  dead_letter_ = [&](const Record& r, const absl::Status& error) {
    dead.emplace_back(absl::StrCat(r.offset),
                      std::string(error.message().substr(0, 9)));
    return absl::OkStatus();
  };
  std::vector<std::string> ran;
  auto ok = Process([&](const Record& r, Txn&) {
    ran.push_back(std::string(r.value));
    return absl::OkStatus();
  });
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_THAT(ran, ElementsAre("first", "x"));
  EXPECT_THAT(dead, ElementsAre(Pair("1", "conflict:")));
  EXPECT_EQ(ok->report.processed, 2);
  EXPECT_EQ(ok->report.dead_lettered, 1);
  EXPECT_EQ(Offset(0), 2);
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
