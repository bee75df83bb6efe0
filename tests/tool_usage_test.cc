// ParseToolFlags (cli/tool_usage.h): a flag value its type cannot hold or
// an unknown flag is reported naming the flag and returns false (the tools
// exit with 2), where absl::ParseCommandLine alone would exit with 1.

#include "cli/tool_usage.h"

#include <cstdint>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

ABSL_FLAG(int, tu_threads, 2, "Test flag.");
ABSL_FLAG(uint64_t, tu_messages, 0, "Test flag.");
ABSL_FLAG(bool, tu_json, false, "Test flag.");

namespace idem::cli {
namespace {

using ::testing::HasSubstr;

struct Parsed {
  bool ok = false;
  std::string err;
};

Parsed Parse(std::vector<std::string> args) {
  args.insert(args.begin(), "tool_usage_test");
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  std::ostringstream err;
  std::streambuf* old = std::cerr.rdbuf(err.rdbuf());
  Parsed p;
  p.ok = ParseToolFlags(static_cast<int>(argv.size()), argv.data(), "tool");
  std::cerr.rdbuf(old);
  p.err = err.str();
  return p;
}

// Regression: "--messages=1e11" made the tools exit with 1 (Abseil's code),
// not the tools' 2 for bad flags.
TEST(ToolUsageTest, ValueTheFlagCannotHoldIsRefusedNamingTheFlag) {
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{
           {"--tu_messages=1e11"},
           {"--tu_messages=-1"},
           {"--tu_threads=100000000000"},
           {"--tu_threads", "1e3"},
           {"--tu_json=maybe"},
       }) {
    const Parsed p = Parse(args);
    EXPECT_FALSE(p.ok) << args[0];
    const std::string name = args[0].substr(0, args[0].find('='));
    EXPECT_THAT(p.err, HasSubstr("tool: " + name + ": ")) << p.err;
    EXPECT_THAT(p.err, HasSubstr("tool --help"));
  }
}

TEST(ToolUsageTest, UnknownFlagAndMissingValueAreRefused) {
  Parsed p = Parse({"--tu_thread=3"});
  EXPECT_FALSE(p.ok);
  EXPECT_THAT(p.err, HasSubstr("tool: unknown flag --tu_thread"));
  p = Parse({"--notu_threads"});  // --no only for bool flags
  EXPECT_FALSE(p.ok);
  EXPECT_THAT(p.err, HasSubstr("unknown flag --notu_threads"));
  p = Parse({"--tu_threads"});
  EXPECT_FALSE(p.ok);
  EXPECT_THAT(p.err, HasSubstr("tool: --tu_threads needs a value"));
}

TEST(ToolUsageTest, GoodFlagsAreParsedAndPositionalArgumentsRefused) {
  Parsed p = Parse({"--tu_threads", "7", "--tu_messages=5", "--notu_json"});
  EXPECT_TRUE(p.ok) << p.err;
  EXPECT_EQ(absl::GetFlag(FLAGS_tu_threads), 7);
  EXPECT_EQ(absl::GetFlag(FLAGS_tu_messages), 5u);
  EXPECT_FALSE(absl::GetFlag(FLAGS_tu_json));
  p = Parse({"--tu_json", "extra"});
  EXPECT_FALSE(p.ok);
  EXPECT_THAT(p.err, HasSubstr("tool: unexpected argument 'extra'"));
}

}  // namespace
}  // namespace idem::cli
