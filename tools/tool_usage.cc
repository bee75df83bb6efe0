#include "tools/tool_usage.h"

#include <string>

#include <iostream>
#include <vector>

#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"

namespace idem::tools {

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
  const std::vector<char*> positional = absl::ParseCommandLine(argc, argv);
  if (positional.size() <= 1) return true;
  std::cerr << tool << ": unexpected argument '" << positional[1]
            << "'\nRun '" << tool << " --help' for usage.\n";
  return false;
}

}  // namespace idem::tools
