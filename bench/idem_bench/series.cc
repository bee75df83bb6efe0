// idem-bench's time series (bench/idem_bench/idem_bench.h): every layout's
// samples as CSV, and disk bytes and write amplification over clock time
// plotted with gnuplot.

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "bench/idem_bench/idem_bench.h"
#include "bench/idem_bench/names.h"
#include "util/temp_dir.h"

namespace idem::bench {
namespace {

bool FindOnPath(const std::string& name) {
  const char* path = std::getenv("PATH");
  if (path == nullptr) return false;
  for (absl::string_view dir : absl::StrSplit(path, ':', absl::SkipEmpty())) {
    const std::string candidate = absl::StrCat(dir, "/", name);
    if (access(candidate.c_str(), X_OK) == 0) return true;
  }
  return false;
}

std::string GnuplotQuote(const std::string& s) {
  return absl::StrCat("'", absl::StrReplaceAll(s, {{"'", "''"}}), "'");
}

std::string ShellQuote(const std::string& s) {
  return absl::StrCat("'", absl::StrReplaceAll(s, {{"'", "'\\''"}}), "'");
}

}  // namespace

absl::Status WriteBenchCsv(const BenchReport& report, const std::string& path) {
  std::ofstream f(path);
  if (!f) return absl::UnavailableError(absl::StrCat("cannot write ", path));
  f << "layout,clock_seconds,wall_seconds,messages,disk_bytes,live_sst_bytes,"
       "live_records,estimated_records,user_bytes,written_bytes,"
       "logical_bytes,cumulative_wa,window_wa,expired_dropped,"
       "expired_dropped_whole\n";
  for (const LayoutReport& r : report.layouts) {
    for (const Sample& s : r.samples) {
      f << absl::StrFormat(
          "%s,%.3f,%.3f,%d,%d,%d,%d,%d,%d,%d,%d,%.4f,%s,%d,%d\n",
          LayoutName(r.layout), s.clock_seconds, s.wall_seconds, s.messages,
          s.disk_bytes, s.live_sst_bytes, s.live_records, s.estimated_records,
          s.user_bytes, s.written_bytes, s.logical_bytes, s.cumulative_wa,
          s.window_wa.has_value() ? absl::StrFormat("%.4f", *s.window_wa) : "",
          s.expired_dropped, s.expired_dropped_whole);
    }
  }
  f.close();
  if (!f) return absl::UnavailableError(absl::StrCat("error writing ", path));
  return absl::OkStatus();
}

absl::Status WriteBenchPlot(const BenchReport& report,
                            const std::string& path) {
  if (!FindOnPath("gnuplot")) {
    return absl::UnavailableError(
        "gnuplot is not on $PATH; skipping the plot (install it with "
        "'apt-get install gnuplot-nox')");
  }
  absl::StatusOr<util::TempDir> plot_dir =
      util::TempDir::Create("idem_bench_plot_");
  if (!plot_dir.ok()) return plot_dir.status();
  const std::string& dir = plot_dir->path();
  const double window_s = absl::ToDoubleSeconds(report.options.window);
  std::vector<std::string> disk_plots, wa_plots;
  // Colour-blind-safe (Okabe-Ito) colours, one per layout.
  static constexpr const char* kColors[] = {"#9400d3", "#009e73", "#56b4e9",
                                            "#e69f00", "#d55e00", "#000000"};
  size_t color = 0;
  for (const LayoutReport& r : report.layouts) {
    const std::string data =
        absl::StrCat(dir, "/", LayoutName(r.layout), ".dat");
    std::ofstream f(data);
    for (const Sample& s : r.samples) {
      f << absl::StrFormat(
          "%.4f %.4f %.4f %s\n", s.clock_seconds / window_s,
          static_cast<double>(s.disk_bytes) / kMiB, s.cumulative_wa,
          s.window_wa.has_value() ? absl::StrFormat("%.4f", *s.window_wa)
                                  : "NaN");
    }
    f.close();
    const std::string name(LayoutName(r.layout));
    disk_plots.push_back(
        absl::StrFormat("%s using 1:2 with lines lw 2 lc rgb '%s' title '%s'",
                        GnuplotQuote(data), kColors[color % 6], name));
    wa_plots.push_back(absl::StrFormat(
        "%s using 1:3 with lines lw 2 lc rgb '%s' title '%s cumulative'",
        GnuplotQuote(data), kColors[color % 6], name));
    wa_plots.push_back(absl::StrFormat(
        "%s using 1:4 with lines lw 1 dt 2 lc rgb '%s' title '%s last window'",
        GnuplotQuote(data), kColors[color % 6], name));
    ++color;
  }
  const BenchOptions& o = report.options;
  const std::string script = absl::StrCat(
      "set terminal png size 1100,800 font 'DejaVuSans,9'\n", "set output ",
      GnuplotQuote(path), "\n", "set multiplot layout 2,1 title ",
      GnuplotQuote(absl::StrFormat(
          "idem-bench %s: window %s, %g msg/s %s, batch %d, %s", report.date,
          absl::FormatDuration(o.window), o.sim_messages_per_second,
          o.sim_messages_per_second > 0 ? "simulated" : "(real clock)", o.batch,
          DurabilityName(o.durability))),
      "\n",
      "set grid\nset key outside right top\nset lmargin at screen 0.07\n"
      "set rmargin at screen 0.78\n",
      "set xlabel 'time (dedupe windows)'\n", "set ylabel 'disk (MiB)'\n",
      "plot ", absl::StrJoin(disk_plots, ", "), "\n",
      "set ylabel 'write amplification'\nset yrange [0:*]\n", "plot ",
      absl::StrJoin(wa_plots, ", "), "\n", "unset multiplot\n");
  const std::string script_path = dir + "/plot.gp";
  {
    std::ofstream f(script_path);
    f << script;
    if (!f) return absl::UnavailableError("cannot write the gnuplot script");
  }
  const int rc =
      std::system(absl::StrCat("gnuplot ", ShellQuote(script_path)).c_str());
  if (rc != 0) {
    return absl::InternalError(
        absl::StrCat("gnuplot failed (exit status ", rc, ")"));
  }
  return absl::OkStatus();
}

}  // namespace idem::bench
