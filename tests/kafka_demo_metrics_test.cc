// idem-kafka-demo --metrics_port: /metrics over HTTP while the demo runs,
// scraped with a plain socket, with the engine's and the consumer's metrics.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <sstream>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "cli/exit_codes.h"
#include "cli/kafka_demo.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "util/temp_dir.h"

namespace idem::cli {
namespace {

using ::testing::HasSubstr;

sockaddr_in Loopback(int port) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return addr;
}

// A port on 127.0.0.1 that was free a moment ago.
int FreePort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr = Loopback(0);
  socklen_t len = sizeof(addr);
  int port = -1;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  ::close(fd);
  return port;
}

// The whole response (status line, headers and body) to GET `path` on
// 127.0.0.1:`port`, over HTTP/1.0 so the server closes when done.
absl::StatusOr<std::string> HttpGet(int port, const std::string& path) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return absl::UnavailableError("socket");
  sockaddr_in addr = Loopback(port);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    return absl::UnavailableError("connect");
  }
  const std::string request =
      absl::StrCat("GET ", path, " HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n");
  if (::send(fd, request.data(), request.size(), 0) !=
      static_cast<ssize_t>(request.size())) {
    ::close(fd);
    return absl::UnavailableError("send");
  }
  std::string response;
  char buffer[4096];
  ssize_t n;
  while ((n = ::recv(fd, buffer, sizeof(buffer), 0)) > 0) {
    response.append(buffer, static_cast<size_t>(n));
  }
  ::close(fd);
  return response;
}

// The value of the first sample line of `name` (with any labels), or -1.
double Sample(const std::string& exposition, const std::string& name) {
  for (absl::string_view line : absl::StrSplit(exposition, '\n')) {
    if (!absl::StartsWith(line, name)) continue;
    const char after = line.size() > name.size() ? line[name.size()] : '\0';
    if (after != ' ' && after != '{') continue;
    double value = -1;
    if (absl::SimpleAtod(line.substr(line.rfind(' ') + 1), &value)) {
      return value;
    }
  }
  return -1;
}

TEST(KafkaDemoMetricsTest, ServesMetricsOverHttpWhileItRuns) {
  const int port = FreePort();
  ASSERT_GT(port, 0);
  util::TempDir dir;
  KafkaDemoOptions options;
  options.messages = 400;
  options.batch = 50;
  options.store = dir.Sub("store");
  options.metrics_port = port;
  options.metrics_linger = absl::Seconds(3);
  std::ostringstream progress;
  absl::StatusOr<KafkaDemoReport> report;
  std::atomic<bool> finished{false};
  std::thread demo([&] {
    report = RunKafkaDemo(options, progress);
    finished = true;
  });

  // Scrapes until one shows every metric with records handled.
  std::string last;
  bool complete = false;
  while (!complete && !finished) {
    absl::StatusOr<std::string> response = HttpGet(port, "/metrics");
    if (response.ok()) {
      last = *response;
      complete = Sample(last, "idem_kafka_records_total") > 0 &&
                 Sample(last, "idem_kafka_lag") >= 0 &&
                 Sample(last, "idem_messages_total") >= 0;
    }
    absl::SleepFor(absl::Milliseconds(100));
  }
  demo.join();
  ASSERT_TRUE(report.ok()) << report.status() << "\n" << progress.str();
  EXPECT_TRUE(report->passed);
  EXPECT_THAT(progress.str(),
              HasSubstr(absl::StrCat(
                  "serving metrics at http://127.0.0.1:", port, "/metrics")));
  ASSERT_TRUE(complete) << "last scrape:\n" << last;
  EXPECT_THAT(last, HasSubstr("200 OK"));
  for (const char* name :
       {"idem_messages_total{outcome=\"processed\"}",
        "idem_messages_total{outcome=\"conflict\"}",
        "idem_expired_dropped_total", "idem_write_amplification",
        "idem_live_sst_bytes", "idem_memtable_bytes", "idem_outbox_pending",
        "idem_commit_duration_seconds_bucket", "idem_kafka_records_total",
        "idem_kafka_restore_records_total",
        "idem_kafka_standby_records_read_total", "idem_kafka_lag{"}) {
    EXPECT_THAT(last, HasSubstr(name));
  }
}

TEST(KafkaDemoMetricsTest, ABadMetricsPortIsAUsageError) {
  util::TempDir dir;
  KafkaDemoOptions options;
  options.store = dir.Sub("store");
  options.metrics_port = 70000;
  std::ostringstream out, err;
  EXPECT_EQ(RunKafkaDemoTool(options, false, out, err), kExitUsage);
  EXPECT_THAT(err.str(), HasSubstr("--metrics_port"));
}

}  // namespace
}  // namespace idem::cli
