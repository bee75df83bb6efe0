// ParseToolFlags (cli/tool_usage.h), the tools' one flag parser: --help, -h
// and --version exit 0; a bad flag (unknown, malformed, out of the type's
// range, missing value, unexpected argument) exits 2 with a message naming
// it; durations read Abseil's syntax.

#include "cli/tool_usage.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace idem::cli {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

struct Flags {
  int threads = 2;
  uint64_t messages = 0;
  bool json = false;
  bool progress = true;
  absl::Duration window = absl::Hours(1);
};

struct Parsed {
  std::optional<int> code;
  std::string out;
  std::string err;
  Flags flags;
};

Parsed Parse(std::vector<std::string> args) {
  args.insert(args.begin(), "tool");
  std::vector<const char*> argv;
  for (const std::string& a : args) argv.push_back(a.c_str());
  Parsed p;
  std::unique_ptr<CLI::App> app = MakeToolApp("tool", "A test tool.");
  app->add_option("--threads", p.flags.threads, "Threads.");
  app->add_option("--messages", p.flags.messages, "Messages.");
  app->add_flag("--json", p.flags.json, "JSON.");
  app->add_flag("--progress,!--noprogress", p.flags.progress, "Progress.");
  AddDurationFlag(*app, "window", &p.flags.window, "Window.");
  std::ostringstream out, err;
  p.code = ParseToolFlags(*app, static_cast<int>(argv.size()), argv.data(), out,
                          err);
  p.out = out.str();
  p.err = err.str();
  return p;
}

TEST(ToolUsageTest, HelpAndShortHelpPrintUsageAndExitZero) {
  for (const char* flag : {"--help", "-h"}) {
    const Parsed p = Parse({flag});
    EXPECT_EQ(p.code, std::optional<int>(kExitOk)) << flag;
    EXPECT_THAT(p.out, HasSubstr("A test tool.")) << flag;
    EXPECT_THAT(p.out, HasSubstr("--threads")) << flag;
    EXPECT_THAT(p.out, HasSubstr("--window DURATION=1h")) << flag;
    EXPECT_EQ(p.err, "");
  }
}

TEST(ToolUsageTest, VersionPrintsTheVersionAndExitsZero) {
  const Parsed p = Parse({"--version"});
  EXPECT_EQ(p.code, std::optional<int>(kExitOk));
  EXPECT_EQ(p.out, std::string(ToolVersion()) + "\n");
  EXPECT_THAT(ToolVersion(),
              ::testing::MatchesRegex("[0-9]+\\.[0-9]+\\.[0-9]+"));
}

// Regression: "--messages=1e11" made the tools exit with 1 (Abseil's code),
// not the tools' 2 for bad flags.
TEST(ToolUsageTest, BadFlagExitsTwoNamingTheFlag) {
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{
           {"--messages=1.5"},
           {"--messages=-1"},
           {"--threads=100000000000"},
           {"--threads", "1e3"},
           {"--window=5x"},
           {"--window=1h30"},
           {"--threads"},
           {"--no_such_flag"},
           {"--nothreads"},
       }) {
    const Parsed p = Parse(args);
    EXPECT_EQ(p.code, std::optional<int>(kExitUsage)) << args[0];
    const std::string name = args[0].substr(0, args[0].find('='));
    EXPECT_THAT(p.err, StartsWith("tool: ")) << p.err;
    EXPECT_THAT(p.err, HasSubstr(name)) << p.err;
    EXPECT_THAT(p.err, HasSubstr("Run 'tool --help' for usage.")) << p.err;
  }
}

// Regression: CLI11 read "--store=" as "--store" and took the next argument
// as its value, so "idem-ctl --store= --json stats" opened a store named
// "--json". An empty value is a bad flag in every tool.
TEST(ToolUsageTest, EmptyValueExitsTwoNamingTheFlag) {
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{
           {"--threads=", "--json"},
           {"--json", "--window="},
           {"--messages=", "5"},
       }) {
    const Parsed p = Parse(args);
    EXPECT_EQ(p.code, std::optional<int>(kExitUsage)) << args[0];
    EXPECT_THAT(p.err, HasSubstr("empty value")) << p.err;
    EXPECT_THAT(p.err, HasSubstr("Run 'tool --help' for usage.")) << p.err;
  }
  EXPECT_THAT(Parse({"--threads=", "--json"}).err, HasSubstr("--threads"));
}

TEST(ToolUsageTest, UsageErrorsNameTheToolAndPointToHelp) {
  std::ostringstream err;
  EXPECT_EQ(ReportUsageError("tool", "--batch must be >= 1, got 0", err),
            kExitUsage);
  EXPECT_EQ(err.str(),
            "tool: --batch must be >= 1, got 0\n"
            "Run 'tool --help' for usage.\n");
}

TEST(ToolUsageTest, UnexpectedArgumentExitsTwo) {
  const Parsed p = Parse({"--json", "extra"});
  EXPECT_EQ(p.code, std::optional<int>(kExitUsage));
  EXPECT_THAT(p.err, HasSubstr("extra"));
}

TEST(ToolUsageTest, GoodFlagsAreParsed) {
  const Parsed p = Parse({"--threads", "7", "--messages=5", "--json",
                          "--noprogress", "--window=1h30m"});
  EXPECT_EQ(p.code, std::nullopt) << p.err;
  EXPECT_EQ(p.flags.threads, 7);
  EXPECT_EQ(p.flags.messages, 5u);
  EXPECT_TRUE(p.flags.json);
  EXPECT_FALSE(p.flags.progress);
  EXPECT_EQ(p.flags.window, absl::Minutes(90));
}

TEST(ToolUsageTest, DefaultsStayWithoutFlags) {
  const Parsed p = Parse({});
  EXPECT_EQ(p.code, std::nullopt) << p.err;
  EXPECT_EQ(p.flags.threads, 2);
  EXPECT_TRUE(p.flags.progress);
  EXPECT_EQ(p.flags.window, absl::Hours(1));
}

}  // namespace
}  // namespace idem::cli
