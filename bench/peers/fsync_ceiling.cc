// The fsync ceilings (bench/peers/fsync_ceiling.h).

#include "bench/peers/fsync_ceiling.h"

#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <vector>

#include "absl/strings/str_format.h"
#include "engine/latency_histogram.h"

namespace idem::peers {
namespace {

// A ceiling row, checked "n/a": it measures the device, not the work.
ResultRow CeilingRow(const std::string& name, const std::string& latency_unit) {
  ResultRow row;
  row.config.peer = "ceiling";
  row.config.name = name;
  row.config.durability = "fsync";
  row.latency_unit = latency_unit;
  row.check = "n/a";
  return row;
}

}  // namespace

ResultRow RunFsyncLoop(const std::string& scratch, double seconds) {
  ResultRow row = CeilingRow("ceiling: write+fdatasync 8 KiB loop", "op");
  const std::string path = scratch + "/fsync_loop.tmp";
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0600);
  if (fd < 0) {
    row.check = "ERROR: cannot create " + path;
    return row;
  }
  std::vector<char> block(8192, 'x');
  bool ok = true;
  for (int i = 0; i < 16 * 128 && ok; ++i) {  // 16 MiB, like pg_test_fsync
    ok = ::write(fd, block.data(), block.size()) ==
         static_cast<ssize_t>(block.size());
  }
  ok = ok && ::fsync(fd) == 0;
  LatencyHistogram latencies;
  const auto start = SteadyClock::now();
  const auto deadline = DeadlineAfter(start, seconds);
  while (ok && SteadyClock::now() < deadline && latencies.count() < 1000000) {
    const auto t0 = SteadyClock::now();
    ok = ::pwrite(fd, block.data(), block.size(), 0) ==
             static_cast<ssize_t>(block.size()) &&
         ::fdatasync(fd) == 0;
    latencies.Add(MicrosecondsBetween(t0, SteadyClock::now()));
  }
  const auto stop = SteadyClock::now();
  ::close(fd);
  ::unlink(path.c_str());
  if (!ok) {
    row.check = "ERROR: write or fdatasync failed";
    return row;
  }
  row.messages = static_cast<uint64_t>(latencies.count());
  row.seconds = std::chrono::duration<double>(stop - start).count();
  row.rate = static_cast<double>(row.messages) / row.seconds;
  row.p50_us = latencies.Percentile(0.50);
  row.p99_us = latencies.Percentile(0.99);
  row.note = "syncs/s, not messages";
  return row;
}

ResultRow RunPgTestFsync(const std::string& binary,
                         const std::string& scratch) {
  ResultRow row =
      CeilingRow("ceiling: pg_test_fsync fdatasync 8 kB", "op (mean)");
  const std::string command = absl::StrFormat(
      "'%s' -s 2 -f '%s/pg_test_fsync.tmp' 2>&1", binary, scratch);
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) {
    row.check = "ERROR: cannot run " + binary;
    return row;
  }
  char line[512];
  bool in_section = false;
  bool found = false;
  double ops = 0;
  double usecs = 0;
  while (std::fgets(line, sizeof(line), pipe) != nullptr) {
    if (std::strstr(line, "one 8kB write") != nullptr) in_section = true;
    if (in_section && !found &&
        std::sscanf(line, " fdatasync %lf ops/sec %lf usecs/op", &ops,
                    &usecs) == 2) {
      found = true;
    }
  }
  const int rc = ::pclose(pipe);
  if (!found || rc != 0) {
    row.check = "ERROR: no fdatasync figure from " + binary;
    return row;
  }
  row.rate = ops;
  row.p50_us = usecs;
  row.p99_us = usecs;
  row.note = "syncs/s, not messages; latency is the mean";
  return row;
}

}  // namespace idem::peers
