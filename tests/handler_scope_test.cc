// HandlerScope: which handler runs on this thread with which Txn, and the
// hash of its message's ID that the engine hands on.

#include "engine/handler_scope.h"

#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "engine/record.h"
#include "gtest/gtest.h"
#include "idem/engine.h"
#include "idem/forwarding_txn.h"
#include "idem/txn.h"
#include "tests/testing/engine_test_util.h"
#include "util/temp_dir.h"

namespace idem {
namespace {

// The hash HandlerScope names for `txn`, as a string ("" if none).
std::string HashOf(const Txn& txn) {
  std::optional<std::string_view> hash = HandlerScope::MessageHash(txn);
  return hash.has_value() ? std::string(*hash) : "";
}

TEST(HandlerScopeTest, EngineHandlerSeesTheHashOfItsMessageId) {
  util::TempDir dir;
  ASSERT_OPEN(engine, dir.Sub("store"), Options());
  std::string seen;
  auto handler = [&](const Message&, Txn& txn) {
    seen = HashOf(txn);
    return absl::OkStatus();
  };
  ASSERT_TRUE(engine->Process({.id = "order-42"}, handler).ok());
  EXPECT_EQ(seen, KeyView(HashMessageId("order-42")));
}

TEST(HandlerScopeTest, NestedHandlersEachSeeTheirOwnHash) {
  util::TempDir dir;
  ASSERT_OPEN(first, dir.Sub("first"), Options());
  ASSERT_OPEN(second, dir.Sub("second"), Options());
  std::string inner_seen, outer_seen_inside, outer_seen_after, decorator_seen;
  auto outer = [&](const Message&, Txn& outer_txn) {
    auto inner = [&](const Message&, Txn& inner_txn) {
      inner_seen = HashOf(inner_txn);
      outer_seen_inside = HashOf(outer_txn);
      return absl::OkStatus();
    };
    if (absl::Status s = second->Process({.id = "inner"}, inner).status();
        !s.ok()) {
      return s;
    }
    outer_seen_after = HashOf(outer_txn);
    // A decorator is another Txn: it asks with the one it wraps.
    ForwardingTxn decorator(outer_txn);
    decorator_seen = HashOf(decorator);
    return absl::OkStatus();
  };
  ASSERT_TRUE(first->Process({.id = "outer"}, outer).ok());
  EXPECT_EQ(inner_seen, KeyView(HashMessageId("inner")));
  EXPECT_EQ(outer_seen_inside, KeyView(HashMessageId("outer")));
  EXPECT_EQ(outer_seen_after, KeyView(HashMessageId("outer")));
  EXPECT_EQ(decorator_seen, "");
}

}  // namespace
}  // namespace idem
