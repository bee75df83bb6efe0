#include "examples/ledger.h"

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"
#include "idem/engine.h"
#include "idem/partition_state.h"
#include "util/temp_dir.h"

namespace idem::examples {
namespace {

// A message with no position.
Message Payload(std::string_view id, std::string_view payload) {
  return Message{.id = id, .payload = payload};
}

TEST(LedgerTest, PaymentRoundTripsThroughItsPayload) {
  EXPECT_EQ(EncodePayment({.account = 42, .amount = 123}), "acct-00042:123");
  EXPECT_EQ(EncodePayment({.account = 7, .amount = -5}), "acct-00007:-5");
  EXPECT_EQ(EncodePayment({.account = 123456, .amount = 1}), "acct-123456:1");
  for (const Payment& p :
       std::vector<Payment>{{0, 0}, {42, -5000}, {99999, 1}}) {
    absl::StatusOr<Payment> parsed = ParsePayment(EncodePayment(p));
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(parsed->account, p.account);
    EXPECT_EQ(parsed->amount, p.amount);
  }
}

TEST(LedgerTest, RejectsPayloadsThatAreNotPayments) {
  for (const char* payload :
       {"", "not a payment", "acct-00001", "acct-00001:", "acct-:5",
        "acct--1:5", "acct-00001:5x", "account-1:5", "00001:5"}) {
    absl::StatusOr<Payment> parsed = ParsePayment(payload);
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument)
        << payload;
  }
}

TEST(LedgerTest, BalanceKeysNameTheirAccount) {
  EXPECT_EQ(BalanceKey(3), "balance/acct-00003");
  EXPECT_EQ(ParseBalanceKey(BalanceKey(3)), std::optional<int>(3));
  EXPECT_EQ(ParseBalanceKey("applied/acct-00003"), std::nullopt);
  EXPECT_EQ(ParseBalanceKey("balance/x"), std::nullopt);
}

TEST(LedgerTest, DecodesAbsentBalancesAsZeroAndRejectsNonNumbers) {
  EXPECT_EQ(*DecodeBalance("k", std::nullopt), 0);
  EXPECT_EQ(*DecodeBalance("k", "-12"), -12);
  EXPECT_EQ(DecodeBalance("k", "twelve").status().code(),
            absl::StatusCode::kDataLoss);
}

class LedgerEngineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<Engine>> engine =
        Engine::Open(dir_.Sub("store"), Options());
    ASSERT_TRUE(engine.ok()) << engine.status();
    engine_ = *std::move(engine);
  }

  util::TempDir dir_;
  std::unique_ptr<Engine> engine_;
};

TEST_F(LedgerEngineTest, HandlerAddsEachPaymentOnceAndReturnsTheBalance) {
  absl::StatusOr<std::vector<Result>> results = engine_->ProcessBatch(
      {Payload("a", "acct-00001:100"), Payload("b", "acct-00001:-30"),
       Payload("a", "acct-00001:100"), Payload("c", "acct-00002:5")},
      HandlePayment);
  ASSERT_TRUE(results.ok()) << results.status();
  EXPECT_EQ((*results)[0].result, "balance:100");
  // The second payment of the batch reads the first one's write.
  EXPECT_EQ((*results)[1].result, "balance:70");
  EXPECT_EQ((*results)[2].outcome, Outcome::kDuplicate);
  EXPECT_EQ((*results)[2].result, "balance:100");
  EXPECT_EQ(*engine_->GetState("balance/acct-00001"),
            std::optional<std::string>("70"));

  ExpectedBalances expected(3);
  expected.Add({.account = 1, .amount = 100});
  expected.Add({.account = 1, .amount = -30});
  expected.Add({.account = 2, .amount = 5});
  EXPECT_EQ(expected.balance(0), 0);
  EXPECT_EQ(expected.balance(1), 70);
  EXPECT_EQ(expected.total(), 75);
  absl::StatusOr<BalanceCheck> check = CheckBalances(*engine_, expected);
  ASSERT_TRUE(check.ok()) << check.status();
  EXPECT_TRUE(check->ok());
  EXPECT_EQ(check->actual_total, 75);
  EXPECT_EQ(check->first_mismatch, "");
}

TEST_F(LedgerEngineTest, HandlerFailsOnAPoisonPayloadAndWritesNothing) {
  absl::StatusOr<Result> r =
      engine_->Process(Payload("p", "not a payment"), HandlePayment);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->outcome, Outcome::kFailed);
  EXPECT_EQ(r->error.code(), absl::StatusCode::kInvalidArgument);
  absl::StatusOr<BalanceCheck> check =
      CheckBalances(*engine_, ExpectedBalances(100));
  ASSERT_TRUE(check.ok()) << check.status();
  EXPECT_TRUE(check->ok());
}

TEST_F(LedgerEngineTest, CheckNamesTheFirstAccountThatDiffers) {
  ASSERT_TRUE(
      engine_->Process(Payload("a", "acct-00002:10"), HandlePayment).ok());
  ExpectedBalances expected(4);
  expected.Add({.account = 2, .amount = 10});
  expected.Add({.account = 3, .amount = 7});  // never delivered
  absl::StatusOr<BalanceCheck> check = CheckBalances(*engine_, expected);
  ASSERT_TRUE(check.ok()) << check.status();
  EXPECT_FALSE(check->ok());
  EXPECT_EQ(check->mismatched_accounts, 1);
  EXPECT_EQ(check->expected_total, 17);
  EXPECT_EQ(check->actual_total, 10);
  EXPECT_EQ(check->first_mismatch,
            "account acct-00003 holds 0 but its payments give 7");
}

TEST_F(LedgerEngineTest, CheckReportsABalanceThatIsNotANumber) {
  ASSERT_TRUE(engine_
                  ->Process(Payload("x", ""),
                            [](const Message&, Txn& txn) {
                              txn.Put(BalanceKey(0), "garbage");
                              return absl::OkStatus();
                            })
                  .ok());
  EXPECT_EQ(CheckBalances(*engine_, ExpectedBalances(1)).status().code(),
            absl::StatusCode::kDataLoss);
}

TEST_F(LedgerEngineTest, HandlerWorksOnAPartitionTxn) {
  ASSERT_TRUE(engine_
                  ->Process(Payload("a", "acct-00001:9"),
                            [](const Message& m, Txn& txn) {
                              PartitionTxn partition(txn, "payments", 3);
                              return ApplyPayment(m.payload, partition);
                            })
                  .ok());
  EXPECT_EQ(
      *engine_->GetState(PartitionStatePrefix("payments", 3) + BalanceKey(1)),
      std::optional<std::string>("9"));
}

// The balances PartitionTxn wrote are found under their partitions'
// prefixes; one written outside them (the plain key) does not count.
TEST_F(LedgerEngineTest, PartitionCheckReadsBalancesUnderPartitionPrefixes) {
  auto in_partition = [](int32_t p) {
    return [p](const Message& m, Txn& txn) {
      PartitionTxn partition(txn, "payments", p);
      return ApplyPayment(m.payload, partition);
    };
  };
  ASSERT_TRUE(
      engine_->Process(Payload("a", "acct-00001:9"), in_partition(1)).ok());
  ASSERT_TRUE(
      engine_->Process(Payload("b", "acct-00002:4"), in_partition(0)).ok());
  ASSERT_TRUE(
      engine_->Process(Payload("c", "acct-00000:5"), HandlePayment).ok());
  ExpectedBalances expected(3);
  expected.Add({.account = 1, .amount = 9});
  expected.Add({.account = 2, .amount = 4});
  absl::StatusOr<BalanceCheck> check =
      CheckPartitionBalances(*engine_, "payments", 2, expected);
  ASSERT_TRUE(check.ok()) << check.status();
  EXPECT_TRUE(check->ok()) << check->first_mismatch;
  EXPECT_EQ(check->actual_total, 13);

  // A partition left out of the count is missing from the totals.
  check = CheckPartitionBalances(*engine_, "payments", 1, expected);
  ASSERT_TRUE(check.ok()) << check.status();
  EXPECT_FALSE(check->ok());
  EXPECT_EQ(check->first_mismatch,
            "account acct-00001 holds 0 but its payments give 9");
  // Another source's prefixes hold nothing.
  check = CheckPartitionBalances(*engine_, "other", 2, expected);
  ASSERT_TRUE(check.ok()) << check.status();
  EXPECT_EQ(check->actual_total, 0);
}

}  // namespace
}  // namespace idem::examples
