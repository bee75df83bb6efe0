// idem-bench's command line (bench/idem_bench/idem_bench.h): names parsed,
// options and output paths checked before anything runs, then the run, the
// report and the optional CSV and plot.

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <ostream>
#include <string>
#include <string_view>
#include <system_error>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "bench/idem_bench/idem_bench.h"
#include "bench/idem_bench/names.h"
#include "cli/tool_usage.h"
#include "util/temp_dir.h"

namespace idem::bench {
namespace {

// The directory the stores are created in.
std::string ParentDir(const BenchOptions& options) {
  return options.dir.empty() ? util::DefaultTempParent() : options.dir;
}

// Checks, before the run rather than after it, that the file named by `flag`
// can be written: opens it for appending (creating it, then removing it
// again, if it did not exist). kInvalidArgument naming the flag if not.
absl::Status CheckOutputFile(absl::string_view flag, const std::string& path) {
  std::error_code ec;
  const bool existed = std::filesystem::exists(path, ec);
  const int fd =
      ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        flag, ": cannot write ", path, ": ", std::strerror(errno)));
  }
  ::close(fd);
  if (!existed) std::filesystem::remove(path, ec);  // best effort
  return absl::OkStatus();
}

// Checks that the stores' parent directory exists and is writable.
absl::Status CheckStoreParent(const BenchOptions& options) {
  const std::string parent = ParentDir(options);
  const std::string flag =
      options.dir.empty() ? "--dir (default $TMPDIR or /tmp)" : "--dir";
  std::error_code ec;
  if (!std::filesystem::is_directory(parent, ec)) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, ": ", parent, " is not a directory"));
  }
  if (::access(parent.c_str(), W_OK | X_OK) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, ": cannot create stores in ", parent, ": ",
                     std::strerror(errno)));
  }
  return absl::OkStatus();
}

}  // namespace

int RunBenchTool(const BenchToolArgs& args, std::ostream& out,
                 std::ostream& err) {
  BenchOptions options = args.options;
  auto usage = [&err](const absl::Status& s) {
    err << "idem-bench: " << s.message()
        << "\nRun 'idem-bench --help' for usage.\n";
    return cli::kExitUsage;
  };
  options.layouts.clear();
  if (args.layout == "all") {
    options.layouts = {Layout::kEngine, Layout::kLeveled, Layout::kUniversal,
                       Layout::kFifo};
  } else {
    for (absl::string_view name :
         absl::StrSplit(args.layout, ',', absl::SkipEmpty())) {
      absl::StatusOr<Layout> layout =
          ParseLayout(std::string_view(name.data(), name.size()));
      if (!layout.ok()) {
        return usage(absl::InvalidArgumentError(
            absl::StrCat("--layout: ", layout.status().message())));
      }
      options.layouts.push_back(*layout);
    }
  }
  if (args.id_shape == "uuid") {
    options.id_shape = IdShape::kUuid;
  } else if (args.id_shape == "kafka") {
    options.id_shape = IdShape::kKafka;
  } else {
    return usage(absl::InvalidArgumentError(absl::StrCat(
        "--id_shape must be uuid or kafka, got '", args.id_shape, "'")));
  }
  if (args.durability == "sync") {
    options.durability = Durability::kSync;
  } else if (args.durability == "buffered") {
    options.durability = Durability::kBuffered;
  } else {
    return usage(absl::InvalidArgumentError(absl::StrCat(
        "--durability must be sync or buffered, got '", args.durability, "'")));
  }
  if (!(args.write_buffer_mib > 0) || args.write_buffer_mib > 4096) {
    return usage(absl::InvalidArgumentError(
        absl::StrCat("--write_buffer_mib must be in [0.0625, 4096], got ",
                     args.write_buffer_mib)));
  }
  options.write_buffer_bytes =
      static_cast<size_t>(args.write_buffer_mib * kMiB);
  if (absl::Status s = ValidateBenchOptions(options); !s.ok()) {
    return usage(s);
  }
  // Output paths are checked now, not after a run of minutes.
  if (absl::Status s = CheckStoreParent(options); !s.ok()) return usage(s);
  if (!args.csv.empty()) {
    if (absl::Status s = CheckOutputFile("--csv", args.csv); !s.ok()) {
      return usage(s);
    }
  }
  if (!args.plot.empty()) {
    if (absl::Status s = CheckOutputFile("--plot", args.plot); !s.ok()) {
      return usage(s);
    }
  }
  absl::StatusOr<BenchReport> report =
      RunBench(options, args.progress ? &err : nullptr);
  if (!report.ok()) {
    err << "idem-bench: " << report.status().ToString() << "\n";
    return cli::kExitFailure;
  }
  PrintBenchReport(*report, args.json, out);
  int rc = cli::kExitOk;
  if (!args.csv.empty()) {
    if (absl::Status s = WriteBenchCsv(*report, args.csv); !s.ok()) {
      err << "idem-bench: " << s.message() << "\n";
      rc = cli::kExitFailure;
    }
  }
  if (!args.plot.empty()) {
    absl::Status s = WriteBenchPlot(*report, args.plot);
    if (absl::IsUnavailable(s)) {
      err << "idem-bench: " << s.message() << "\n";
    } else if (!s.ok()) {
      err << "idem-bench: " << s.message() << "\n";
      rc = cli::kExitFailure;
    }
  }
  for (const LayoutReport& r : report->layouts) {
    if (r.dedupe_errors.value_or(0) > 0) {
      err << "idem-bench: layout " << LayoutName(r.layout) << " gave "
          << *r.dedupe_errors << " wrong dedupe answers\n";
      rc = cli::kExitFailure;
    }
  }
  return rc;
}

}  // namespace idem::bench
