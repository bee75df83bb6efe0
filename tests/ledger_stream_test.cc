#include "examples/ledger_stream.h"

#include <set>
#include <string>
#include <vector>

#include "examples/ledger.h"
#include "gtest/gtest.h"

namespace idem::examples {
namespace {

TEST(LedgerStreamTest, SameOptionsGiveTheSameMessages) {
  LedgerStreamOptions options;
  options.seed = 7;
  const std::vector<LedgerMessage> a = MakeLedgerMessages(options, 100);
  const std::vector<LedgerMessage> b = MakeLedgerMessages(options, 100);
  ASSERT_EQ(a.size(), 100u);
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].id, b[i].id);
    EXPECT_EQ(a[i].payload, b[i].payload);
  }
  options.seed = 8;
  const std::vector<LedgerMessage> c = MakeLedgerMessages(options, 100);
  int same = 0;
  for (size_t i = 0; i < a.size(); ++i) same += a[i].payload == c[i].payload;
  EXPECT_LT(same, 10);
}

TEST(LedgerStreamTest, SequentialIdsNameThePrefixSeedAndIndex) {
  LedgerStreamOptions options;
  options.seed = 3;
  options.id_prefix = "ledger";
  const std::vector<LedgerMessage> m = MakeLedgerMessages(options, 2);
  EXPECT_EQ(m[0].id, "ledger-3-0");
  EXPECT_EQ(m[1].id, "ledger-3-1");
}

TEST(LedgerStreamTest, UuidIdsAreDistinctVersionFourUuids) {
  LedgerStreamOptions options;
  options.ids = LedgerStreamOptions::Ids::kUuid;
  std::set<std::string> ids;
  for (const LedgerMessage& m : MakeLedgerMessages(options, 1000)) {
    ASSERT_EQ(m.id.size(), 36u) << m.id;
    EXPECT_EQ(m.id[8], '-');
    EXPECT_EQ(m.id[14], '4') << m.id;
    EXPECT_NE(std::string("89ab").find(m.id[19]), std::string::npos) << m.id;
    ids.insert(m.id);
  }
  EXPECT_EQ(ids.size(), 1000u);
}

TEST(LedgerStreamTest, PaymentsStayInTheirAccountsAndAmountsAndMatchPayloads) {
  LedgerStreamOptions options;
  options.accounts = 5;
  options.min_amount = -3;
  options.max_amount = 4;
  std::set<int> accounts;
  std::set<int64_t> amounts;
  for (const LedgerMessage& m : MakeLedgerMessages(options, 2000)) {
    EXPECT_GE(m.payment.account, 0);
    EXPECT_LT(m.payment.account, 5);
    EXPECT_GE(m.payment.amount, -3);
    EXPECT_LE(m.payment.amount, 4);
    EXPECT_EQ(m.payload, EncodePayment(m.payment));
    accounts.insert(m.payment.account);
    amounts.insert(m.payment.amount);
  }
  EXPECT_EQ(accounts.size(), 5u);
  EXPECT_EQ(amounts.size(), 8u);
}

TEST(LedgerStreamTest, NextGivesTheMessagesOneByOne) {
  LedgerStreamOptions options;
  LedgerStream stream(options);
  const std::vector<LedgerMessage> all = MakeLedgerMessages(options, 3);
  for (const LedgerMessage& expected : all) {
    EXPECT_EQ(stream.Next().payload, expected.payload);
  }
}

}  // namespace
}  // namespace idem::examples
