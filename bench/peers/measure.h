// How idem-peers-bench measures: one run of a peer configuration over the
// stream (wall time, per-call latency percentiles, bytes written and on
// disk, checked against what the stream implies), the median over rounds,
// and each row's ratios to the idem row it is compared with.

#ifndef IDEM_BENCH_PEERS_MEASURE_H_
#define IDEM_BENCH_PEERS_MEASURE_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bench/peers/peer.h"
#include "bench/peers/stream.h"

namespace idem::peers {

using SteadyClock = std::chrono::steady_clock;

// `seconds` after `start`.
SteadyClock::time_point DeadlineAfter(SteadyClock::time_point start,
                                      double seconds);
// The time from `from` to `to` in microseconds.
double MicrosecondsBetween(SteadyClock::time_point from,
                           SteadyClock::time_point to);

// One row of the table: a peer configuration and how to run it.
struct PeerConfig {
  std::string peer;        // postgres, redis, rocksdb, idem, ceiling
  std::string name;        // the table's first column
  std::string durability;  // fsync, page cache, async commit, memory
  int batch = 1;
  int clients = 1;
  bool slow = false;       // one sync per message: --slow_messages
  bool check_sum = true;   // the store keeps balances to check
  bool reference = false;  // an idem row other rows are compared with
  std::function<std::unique_ptr<Target>()> make;
  bool durable() const { return durability == "fsync"; }
};

// What one run (or the median of a config's rounds) measured.
struct ResultRow {
  PeerConfig config;
  uint64_t messages = 0;  // deliveries processed
  uint64_t news = 0;      // deliveries that did the work
  uint64_t expected_news = 0;
  uint64_t user_bytes = 0;  // logical bytes of the new messages
  double seconds = 0;
  double rate = 0;
  double p50_us = 0;
  double p99_us = 0;
  std::string latency_unit;  // msg, batch, op
  std::optional<double> write_amp;
  std::optional<uint64_t> written_bytes;
  std::optional<uint64_t> disk_bytes;
  double rate_min = 0;  // over the rounds
  double rate_max = 0;
  int rounds = 1;
  std::optional<double> rate_ratio;
  std::optional<double> disk_ratio;
  std::string check = "ok";  // ok, n/a, FAIL: ..., ERROR: ...
  std::string note;

  // The run could not complete (check starts with "ERROR").
  bool errored() const { return check.rfind("ERROR", 0) == 0; }
  // The run errored or a check did not hold (check is neither ok nor n/a).
  bool failed() const { return check != "ok" && check != "n/a"; }
};

struct RunLimits {
  size_t messages = 0;       // deliveries per config
  size_t slow_messages = 0;  // for configs with `slow` set
  double time_cap_s = 0;     // a config stops after this long
  int accounts = 0;
};

// Runs `config` once on a fresh store over the first messages of `stream`,
// its clients in their own threads, and checks the result.
ResultRow RunConfig(const PeerConfig& config,
                    const std::vector<StreamMessage>& stream,
                    const RunLimits& limits);

// The round with the median rate (the lower middle one for an even count),
// with the range over all rounds; a failed round wins, so it shows.
// REQUIRES: `runs` is not empty.
ResultRow MedianRound(std::vector<ResultRow>& runs);

// Fills rate_ratio and disk_ratio: each row against the idem reference row of
// the same durability class (durable or not), batch size and client count
// (falling back to one client).
void AddRatios(std::vector<ResultRow>& rows);

}  // namespace idem::peers

#endif  // IDEM_BENCH_PEERS_MEASURE_H_
