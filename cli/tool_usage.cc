#include "cli/tool_usage.h"

#include <unistd.h>

#include <exception>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "idem/version.h"

namespace idem::cli {

const char* ToolVersion() { return IDEM_VERSION; }

std::string SelfPath(const char* argv0) {
  char buffer[4096];
  const ssize_t n = readlink("/proc/self/exe", buffer, sizeof(buffer) - 1);
  return n > 0 ? std::string(buffer, static_cast<size_t>(n)) : argv0;
}

std::unique_ptr<CLI::App> MakeToolApp(const std::string& tool,
                                      const std::string& description) {
  auto app = std::make_unique<CLI::App>(description, tool);
  app->set_help_flag("-h,--help", "Print this help and exit (exit code 0).");
  app->set_version_flag("--version", std::string(ToolVersion()),
                        "Print the version and exit (exit code 0).");
  app->option_defaults()->always_capture_default();
  return app;
}

CLI::Option* AddDurationFlag(CLI::App& app, const std::string& name,
                             absl::Duration* value, const std::string& help) {
  const std::string default_text = absl::FormatDuration(*value);
  return app
      .add_option_function<std::string>(
          "--" + name,
          [value](const std::string& text) {
            // The validator below has accepted `text`.
            absl::ParseDuration(text, value);
          },
          help)
      ->type_name("DURATION")
      ->default_str(default_text)
      ->check(CLI::Validator(
          [](std::string& text) -> std::string {
            absl::Duration unused;
            if (absl::ParseDuration(text, &unused)) return "";
            return "'" + text + "' is not a duration (e.g. 30s, 5m, 1h30m, 0)";
          },
          ""));
}

int ReportUsageError(absl::string_view tool, absl::string_view message,
                     std::ostream& err) {
  err << tool << ": " << message << "\nRun '" << tool
      << " --help' for usage.\n";
  return kExitUsage;
}

std::optional<int> ParseToolFlags(CLI::App& app, int argc,
                                  const char* const* argv, std::ostream& out,
                                  std::ostream& err) {
  const std::string tool = app.get_name();
  // CLI11 reads "--flag=" as "--flag" and takes the next argument as its
  // value ("--store= --json" would name a store "--json"): an empty value is
  // always a mistake.
  for (int i = 1; i < argc; ++i) {
    const absl::string_view arg = argv[i];
    if (arg == "--") break;
    if (absl::StartsWith(arg, "--") && absl::EndsWith(arg, "=")) {
      return ReportUsageError(
          tool, absl::StrCat(arg.substr(0, arg.size() - 1), ": empty value"),
          err);
    }
  }
  // CLI11 reads "-1" into an unsigned flag as its wrap-around value.
  for (CLI::Option* option : app.get_options()) {
    if (option->get_type_name() == "UINT") {
      option->check(CLI::Validator(
          [](std::string& text) -> std::string {
            if (text.empty() || text[0] != '-') return "";
            return "must not be negative, got " + text;
          },
          ""));
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    out << app.help();
    return kExitOk;
  } catch (const CLI::CallForAllHelp&) {
    out << app.help("", CLI::AppFormatMode::All);
    return kExitOk;
  } catch (const CLI::CallForVersion& e) {
    out << e.what() << "\n";
    return kExitOk;
  } catch (const CLI::ParseError& e) {
    return ReportUsageError(tool, e.what(), err);
  } catch (const std::exception& e) {  // e.g. a callback's std::bad_alloc
    err << tool << ": " << e.what() << "\n";
    return kExitUsage;
  }
  return std::nullopt;
}

}  // namespace idem::cli
