// The README's inventory-reservation consumer, compiled and checked: a
// producer retry is suppressed by message ID, a second message for the same
// order is absorbed by the business-key rule, and an out-of-stock order
// commits nothing.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "idem/engine.h"
#include "util/temp_dir.h"

namespace idem {
namespace {

// payload: "<order_id> <product_id> <quantity>"
absl::Status ReserveInventory(const idem::Message& m, idem::Txn& txn) {
  std::vector<std::string> f = absl::StrSplit(std::string(m.payload), ' ');
  const std::string order = "reservation/" + f[0];
  const std::string stock = "stock/" + f[1];
  int64_t qty = 0, available = 0;
  if (!absl::SimpleAtoi(f[2], &qty)) return absl::InvalidArgumentError("qty");

  // Business-key constraint: one reservation per order, whatever message ID.
  absl::StatusOr<std::optional<std::string>> existing = txn.Get(order);
  if (!existing.ok()) return existing.status();
  if (existing->has_value()) {
    txn.SetResult("already-reserved");
    return absl::OkStatus();
  }

  absl::StatusOr<std::optional<std::string>> s = txn.Get(stock);
  if (!s.ok()) return s.status();
  if (s->has_value() && !absl::SimpleAtoi(**s, &available))
    return absl::DataLossError("stock");
  if (available < qty)
    return absl::FailedPreconditionError(
        "out of stock");  // kFailed: nothing written

  txn.Put(stock, absl::StrCat(available - qty));
  txn.Put(order, f[2]);
  txn.SetResult("reserved");
  return absl::OkStatus();
}

absl::Status SetStock(const Message& m, Txn& txn) {
  txn.Put("stock/X", std::string(m.payload));
  return absl::OkStatus();
}

TEST(InventoryExampleTest, ReservesOncePerOrderAndSuppressesRetries) {
  util::TempDir dir;
  Options options;
  options.durability = Durability::kBuffered;
  auto engine = Engine::Open(dir.Sub("db"), options);
  ASSERT_TRUE(engine.ok()) << engine.status();
  ASSERT_TRUE(
      (*engine)->Process({.id = "stock-1", .payload = "8"}, SetStock).ok());

  std::vector<Message> batch = {
      {.id = "msg-abc-123",
       .payload = "Y X 5",
       .source = "orders",
       .partition = 0,
       .offset = 41},
      {.id = "msg-abc-123",
       .payload = "Y X 5",
       .source = "orders",
       .partition = 0,
       .offset = 42},
      {.id = "msg-def-456",
       .payload = "Y X 5",
       .source = "orders",
       .partition = 0,
       .offset = 43},
      {.id = "msg-ghi-789",
       .payload = "Z X 5",
       .source = "orders",
       .partition = 0,
       .offset = 44},
  };
  auto results = (*engine)->ProcessBatch(batch, ReserveInventory);
  ASSERT_TRUE(results.ok()) << results.status();
  ASSERT_TRUE((*engine)->WaitDurable(results->back().sequence).ok());

  EXPECT_EQ((*results)[0].outcome, Outcome::kProcessed);
  EXPECT_EQ((*results)[0].result, "reserved");
  EXPECT_EQ((*results)[1].outcome, Outcome::kDuplicate);  // producer retry
  EXPECT_EQ((*results)[1].result, "reserved");
  EXPECT_EQ((*results)[2].outcome, Outcome::kProcessed);  // new ID, same order
  EXPECT_EQ((*results)[2].result, "already-reserved");
  EXPECT_EQ((*results)[3].outcome, Outcome::kFailed);  // 3 left, 5 wanted
  EXPECT_EQ((*results)[3].error.code(), absl::StatusCode::kFailedPrecondition);

  EXPECT_EQ(*(*engine)->GetState("stock/X"), std::optional<std::string>("3"));
  EXPECT_EQ(*(*engine)->GetState("reservation/Y"),
            std::optional<std::string>("5"));
  EXPECT_EQ(*(*engine)->GetState("reservation/Z"), std::nullopt);
  // The failed order stays deliverable: its offset is not committed.
  EXPECT_EQ(*(*engine)->CommittedOffset("orders", 0),
            std::optional<int64_t>(43));
  EXPECT_FALSE(*(*engine)->Seen("msg-ghi-789"));
}

}  // namespace
}  // namespace idem
