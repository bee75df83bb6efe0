// idem-ctl scan (cli/idemctl_scan.cc): the committed state keys under
// --prefix in key order, reversed and limited, as text or JSON; bad flags
// are usage errors; the scan flags belong to scan alone.

#include <memory>
#include <sstream>
#include <string>

#include "cli/idemctl.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "idem/engine.h"
#include "nlohmann/json.hpp"
#include "tests/testing/json_bytes.h"
#include "util/temp_dir.h"

namespace idem::cli {
namespace {

using ::testing::HasSubstr;

class IdemctlScanTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<Engine>> engine =
        Engine::Open(store(), Options());
    ASSERT_TRUE(engine.ok()) << engine.status();
    ASSERT_TRUE((*engine)
                    ->Process(Message{.id = "m"},
                              [](const Message&, Txn& txn) {
                                txn.Put("order/1", "a");
                                txn.Put("order/2", std::string("b\0\n", 3));
                                txn.Put("order/3", "c");
                                txn.Put("other", "x");
                                return txn.Merge("orders", MergeOp::kAddInt64,
                                                 Int64Operand(3));
                              })
                    .ok());
  }

  std::string store() const { return dir_.Sub("db"); }

  // Runs idem-ctl scan with `prefix` and the given flags.
  int Scan(IdemctlArgs args, std::string* out, std::string* err = nullptr) {
    args.store = store();
    args.command = {"scan"};
    std::ostringstream o, e;
    const int code = RunIdemctl(args, o, e);
    *out = o.str();
    if (err != nullptr) *err = e.str();
    return code;
  }

  util::TempDir dir_;
};

TEST_F(IdemctlScanTest, ListsTheKeysUnderThePrefixInOrder) {
  std::string out;
  IdemctlArgs args;
  args.prefix = "order/";
  ASSERT_EQ(Scan(args, &out), kExitOk);
  EXPECT_EQ(out, "order/1\ta\norder/2\tb\\x00\\n\norder/3\tc\n3 keys\n");
  args.reverse = true;
  args.limit = "1";
  ASSERT_EQ(Scan(args, &out), kExitOk);
  EXPECT_EQ(out, "order/3\tc\n1 key\n");
}

TEST_F(IdemctlScanTest, JsonCarriesTheBytesAndTheFoldedMerges) {
  std::string out;
  IdemctlArgs args;
  args.json = true;
  ASSERT_EQ(Scan(args, &out), kExitOk);
  nlohmann::json v = nlohmann::json::parse(out);
  EXPECT_EQ(v["count"], 5);
  ASSERT_EQ(v["entries"].size(), 5u);
  EXPECT_EQ(test::Latin1Bytes(v["entries"][1]["value"].get<std::string>()),
            std::string("b\0\n", 3));
  EXPECT_EQ(v["entries"][3]["key"], "orders");
  EXPECT_EQ(
      ReadInt64(test::Latin1Bytes(v["entries"][3]["value"].get<std::string>())),
      3);
}

TEST_F(IdemctlScanTest, BadLimitAndScanFlagsElsewhereAreUsageErrors) {
  std::string out, err;
  IdemctlArgs args;
  args.limit = "-1";
  EXPECT_EQ(Scan(args, &out, &err), kExitUsage);
  EXPECT_THAT(err, HasSubstr("--limit"));
  IdemctlArgs stats;
  stats.store = store();
  stats.command = {"stats"};
  stats.prefix = "order/";
  std::ostringstream o, e;
  EXPECT_EQ(RunIdemctl(stats, o, e), kExitUsage);
  EXPECT_THAT(e.str(), HasSubstr("for scan"));
}

}  // namespace
}  // namespace idem::cli
