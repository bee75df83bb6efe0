// ForwardingTxn (idem/forwarding_txn.h): every call reaches the target, and
// every emit reaches EmitWithOptions, so a decorator that overrides only
// that one sees Emit and EmitWithHeaders too.

#include "idem/forwarding_txn.h"

#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace idem {
namespace {

using ::testing::ElementsAre;

// A Txn that logs every call it receives.
class LoggingTxn final : public Txn {
 public:
  absl::StatusOr<std::optional<std::string>> Get(
      std::string_view key) override {
    log.push_back(absl::StrCat("get ", std::string(key)));
    return std::optional<std::string>("v");
  }
  void Put(std::string_view key, std::string_view value) override {
    log.push_back(
        absl::StrCat("put ", std::string(key), "=", std::string(value)));
  }
  absl::Status Put(std::string_view key, std::string_view value,
                   const PutOptions& options) override {
    log.push_back(absl::StrCat("put ", std::string(key), "=",
                               std::string(value), " ttl ",
                               absl::FormatDuration(options.ttl)));
    return absl::OkStatus();
  }
  void Delete(std::string_view key) override {
    log.push_back(absl::StrCat("delete ", std::string(key)));
  }
  void SetResult(std::string_view result) override {
    log.push_back(absl::StrCat("result ", std::string(result)));
  }
  void EmitWithOptions(std::string_view destination, std::string_view key,
                       std::string_view value,
                       const EmitOptions& options) override {
    log.push_back(absl::StrCat(
        "emit_with_options ", std::string(destination), " ", std::string(key),
        " ", std::string(value), " p", options.partition, " h",
        options.headers.size(), options.tombstone ? " tombstone" : ""));
  }
  absl::Time record_expires_at() const override {
    return absl::FromUnixSeconds(1234);
  }
  std::vector<std::string> log;
};

// A decorator that changes emits only: it renames their destination.
class RenamingTxn final : public ForwardingTxn {
 public:
  using ForwardingTxn::ForwardingTxn;
  void EmitWithOptions(std::string_view destination, std::string_view key,
                       std::string_view value,
                       const EmitOptions& options) override {
    ForwardingTxn::EmitWithOptions("renamed-" + std::string(destination), key,
                                   value, options);
  }
};

TEST(ForwardingTxnTest, ForwardsEveryCallAndFunnelsEmitsThroughOneMethod) {
  LoggingTxn target;
  RenamingTxn txn(target);
  EXPECT_EQ(*txn.Get("k"), std::optional<std::string>("v"));
  EXPECT_EQ(txn.record_expires_at(), absl::FromUnixSeconds(1234));
  txn.Put("k", "1");
  ASSERT_TRUE(txn.Put("t", "2", PutOptions{.ttl = absl::Seconds(5)}).ok());
  txn.Delete("k");
  txn.SetResult("r");
  txn.Emit("out", "a", "x");
  const Txn::Header headers[] = {{"h", "1"}};
  txn.EmitWithHeaders("out", "b", "y", headers);
  txn.EmitWithOptions("out", "c", "", {.partition = 3, .tombstone = true});
  EXPECT_THAT(
      target.log,
      ElementsAre("get k", "put k=1", "put t=2 ttl 5s", "delete k", "result r",
                  "emit_with_options renamed-out a x p-1 h0",
                  "emit_with_options renamed-out b y p-1 h1",
                  "emit_with_options renamed-out c  p3 h0 tombstone"));
}

}  // namespace
}  // namespace idem
