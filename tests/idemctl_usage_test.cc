// idemctl's usage errors (exit 2, nothing touched) and its usage text.
#include <filesystem>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "cli/idemctl.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/idemctl_test_util.h"
#include "util/temp_dir.h"

namespace idem::cli {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

struct UsageCase {
  std::string name;
  std::string store;
  std::vector<std::string> command;
  std::string message;
  std::optional<std::string> source;     // --source
  std::optional<std::string> partition;  // --partition
};

class IdemctlUsageTest : public ::testing::TestWithParam<UsageCase> {};

TEST_P(IdemctlUsageTest, ExitsWithUsageCodeAndTouchesNothing) {
  util::TempDir dir;
  const UsageCase& c = GetParam();
  IdemctlArgs args;
  args.store = c.store.empty() ? "" : dir.Sub(c.store);
  args.command = c.command;
  args.source = c.source;
  args.partition = c.partition;
  std::ostringstream out, err;
  EXPECT_EQ(RunIdemctl(args, out, err), kExitUsage);
  EXPECT_THAT(err.str(), HasSubstr(c.message));
  EXPECT_THAT(err.str(), HasSubstr("--help"));
  EXPECT_THAT(out.str(), IsEmpty());
  EXPECT_TRUE(std::filesystem::is_empty(dir.path()));
}

INSTANTIATE_TEST_SUITE_P(
    BadCommandLines, IdemctlUsageTest,
    ::testing::Values(
        UsageCase{"MissingDb", "", {"stats"}, "--store=PATH is required"},
        UsageCase{"NoSubcommand", "db", {}, "no subcommand"},
        UsageCase{"UnknownSubcommand",
                  "db",
                  {"frobnicate"},
                  "unknown subcommand 'frobnicate'"},
        UsageCase{"SeenWithoutId", "db", {"seen"}, "exactly one argument, ID"},
        UsageCase{"ForgetWithTwoIds",
                  "db",
                  {"forget", "a", "b"},
                  "exactly one argument, ID"},
        UsageCase{
            "StatsWithArgument", "db", {"stats", "x"}, "takes no arguments"},
        UsageCase{"CheckpointWithoutDir",
                  "db",
                  {"checkpoint"},
                  "exactly one argument, DIR"},
        UsageCase{"EmptyId", "db", {"seen", ""}, "ID must be 1 to"},
        UsageCase{"TooLongId",
                  "db",
                  {"seen", std::string(1025, 'x')},
                  "ID must be 1 to"},
        UsageCase{"GetWithoutKey", "db", {"get"}, "exactly one argument, KEY"},
        UsageCase{"SetOffsetWithTwoArguments",
                  "db",
                  {"set-offset", "orders", "3"},
                  "takes 3 arguments, SOURCE PARTITION OFFSET"},
        UsageCase{"SetOffsetWithEmptySource",
                  "db",
                  {"set-offset", "", "3", "10"},
                  "SOURCE must be 1 to"},
        UsageCase{"SetOffsetWithBadPartition",
                  "db",
                  {"set-offset", "orders", "-1", "10"},
                  "PARTITION: '-1' is not a partition number"},
        UsageCase{"SetOffsetWithNegativeOffset",
                  "db",
                  {"set-offset", "orders", "3", "-1"},
                  "OFFSET: '-1' is not an offset"},
        UsageCase{"SetOffsetWithoutASuccessor",
                  "db",
                  {"set-offset", "orders", "3", "9223372036854775807"},
                  "OFFSET: '9223372036854775807' is not an offset"},
        UsageCase{"SetOffsetWithTextOffset",
                  "db",
                  {"set-offset", "orders", "3", "ten"},
                  "OFFSET: 'ten' is not an offset"},
        UsageCase{"ExportWithoutFile", "db", {"export"}, "argument, FILE"},
        UsageCase{"ExportWithEmptyFile",
                  "db",
                  {"export", ""},
                  "FILE must not be empty"},
        UsageCase{"ImportWithoutFile", "db", {"import"}, "argument, FILE"},
        UsageCase{
            "VerifyWithArgument", "db", {"verify", "x"}, "takes no arguments"},
        UsageCase{"StatsWithPartition",
                  "db",
                  {"stats"},
                  "'stats' takes neither --source nor --partition",
                  std::nullopt,
                  "1"},
        UsageCase{"SetOffsetWithPartitionFlag",
                  "db",
                  {"set-offset", "orders", "3", "10"},
                  "takes neither --source nor --partition",
                  std::nullopt,
                  "orders:3"},
        UsageCase{"SourceWithoutPartition",
                  "db",
                  {"seen", "order-1"},
                  "--source needs --partition",
                  "orders"},
        UsageCase{"SourceTwice",
                  "db",
                  {"forget", "order-1"},
                  "not both",
                  "orders",
                  "orders:3"},
        UsageCase{"PartitionNotANumber",
                  "db",
                  {"seen", "order-1"},
                  "--partition: 'orders:x' is not P or SOURCE:P",
                  std::nullopt,
                  "orders:x"},
        UsageCase{"NegativePartition",
                  "db",
                  {"seen", "order-1"},
                  "is not P or SOURCE:P",
                  "orders",
                  "-3"},
        UsageCase{"ExportWithoutPartition",
                  "db",
                  {"export", "out.jsonl"},
                  "'export' needs --partition=SOURCE:P"},
        UsageCase{"ExportWithoutSource",
                  "db",
                  {"export", "out.jsonl"},
                  "'export' needs a source",
                  std::nullopt,
                  "3"}),
    [](const ::testing::TestParamInfo<UsageCase>& info) {
      return info.param.name;
    });

TEST(IdemctlUsageTextTest, ListsEverySubcommand) {
  const std::string usage = IdemctlUsage();
  for (const char* sub :
       {"stats", "seen ID", "forget ID", "get KEY", "offsets",
        "set-offset SOURCE PARTITION OFFSET", "compact", "checkpoint DIR",
        "dump", "verify", "metrics", "export --partition=SOURCE:P FILE",
        "import FILE", "scan [--prefix=P]"}) {
    EXPECT_THAT(usage, HasSubstr(sub));
  }
  // The list tools/idemctl_main.cc declares is the one RunIdemctl runs.
  for (const IdemctlSubcommand& sub : IdemctlSubcommands()) {
    EXPECT_THAT(usage, HasSubstr(std::string(sub.name)));
    EXPECT_THAT(sub.help, Not(IsEmpty())) << sub.name;
  }
  EXPECT_EQ(IdemctlSubcommands().size(), 14u);
}

}  // namespace
}  // namespace idem::cli
