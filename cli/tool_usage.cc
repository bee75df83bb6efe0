#include "cli/tool_usage.h"

#include <iostream>
#include <string>
#include <vector>

#include "absl/flags/commandlineflag.h"
#include "absl/flags/parse.h"
#include "absl/flags/reflection.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"
#include "absl/strings/strip.h"

namespace idem::cli {
namespace {

// Flags that absl::ParseCommandLine handles itself: the help and version
// flags (which exit 0) and those that read more flags from elsewhere.
bool IsParserFlag(absl::string_view name) {
  for (absl::string_view f :
       {"help", "helpfull", "helpshort", "helppackage", "helpon", "helpmatch",
        "version", "only_check_args", "flagfile", "fromenv", "tryfromenv",
        "undefok"}) {
    if (name == f) return true;
  }
  return false;
}

// absl::ParseCommandLine reports an unknown flag or a value its flag cannot
// parse (e.g. "--threads=1e3", or a number out of the type's range) and exits
// with status 1; the tools exit with 2 for bad flags. So each flag is first
// checked with its own parser (CommandLineFlag::ParseFrom, which sets the
// value that ParseCommandLine then sets again). Returns false after a message
// naming the flag.
bool CheckFlagValues(int argc, char* argv[], absl::string_view tool) {
  for (int i = 1; i < argc; ++i) {
    absl::string_view arg = argv[i];
    if (arg == "--") break;
    if (!absl::ConsumePrefix(&arg, "-") || arg.empty()) continue;
    absl::ConsumePrefix(&arg, "-");
    const size_t eq = arg.find('=');
    const absl::string_view name = arg.substr(0, eq);
    const bool has_value = eq != arg.npos;
    const absl::string_view value =
        has_value ? arg.substr(eq + 1) : absl::string_view();
    if (IsParserFlag(name)) return true;  // ParseCommandLine takes over
    absl::CommandLineFlag* flag = absl::FindCommandLineFlag(name);
    if (flag == nullptr) {
      // --noname sets a bool flag to false.
      absl::string_view positive = name;
      absl::CommandLineFlag* negated =
          absl::ConsumePrefix(&positive, "no")
              ? absl::FindCommandLineFlag(positive)
              : nullptr;
      if (negated != nullptr && negated->IsOfType<bool>() && !has_value) {
        continue;
      }
      std::cerr << tool << ": unknown flag --" << name << "\nRun '" << tool
                << " --help' for usage.\n";
      return false;
    }
    std::string text(value);
    if (!has_value) {
      if (flag->IsOfType<bool>()) continue;  // --name: true
      if (i + 1 >= argc) {
        std::cerr << tool << ": --" << name << " needs a value\n";
        return false;
      }
      text = argv[++i];  // --name value
    }
    std::string error;
    if (!flag->ParseFrom(text, &error)) {
      std::cerr << tool << ": --" << name << ": " << error << "\nRun '"
                << tool << " --help' for usage.\n";
      return false;
    }
  }
  return true;
}

}  // namespace

void InitToolUsage(absl::string_view main_file, absl::string_view usage) {
  absl::FlagsUsageConfig config;
  config.contains_help_flags = [file = std::string(main_file)](
                                   absl::string_view path) {
    return absl::EndsWith(path, file);
  };
  config.contains_helpshort_flags = config.contains_help_flags;
  config.normalize_filename = [](absl::string_view path) {
    const size_t tools = path.rfind("tools/");
    return std::string(tools == path.npos ? path : path.substr(tools));
  };
  absl::SetFlagsUsageConfig(config);
  absl::SetProgramUsageMessage(usage);
}

bool ParseToolFlags(int argc, char* argv[], absl::string_view tool) {
  if (!CheckFlagValues(argc, argv, tool)) return false;
  const std::vector<char*> positional = absl::ParseCommandLine(argc, argv);
  if (positional.size() <= 1) return true;
  std::cerr << tool << ": unexpected argument '" << positional[1]
            << "'\nRun '" << tool << " --help' for usage.\n";
  return false;
}

}  // namespace idem::cli
