// Running, checking and summarising peer configurations
// (bench/peers/measure.h).

#include "bench/peers/measure.h"

#include <algorithm>
#include <thread>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_format.h"
#include "engine/latency_histogram.h"

namespace idem::peers {

SteadyClock::time_point DeadlineAfter(SteadyClock::time_point start,
                                      double seconds) {
  return start + std::chrono::duration_cast<SteadyClock::duration>(
                     std::chrono::duration<double>(seconds));
}

double MicrosecondsBetween(SteadyClock::time_point from,
                           SteadyClock::time_point to) {
  return std::chrono::duration<double, std::micro>(to - from).count();
}

ResultRow RunConfig(const PeerConfig& config,
                    const std::vector<StreamMessage>& stream,
                    const RunLimits& limits) {
  ResultRow row;
  row.config = config;
  row.latency_unit = config.batch == 1 ? "msg" : "batch";
  const size_t count = config.slow
                           ? std::min(limits.slow_messages, limits.messages)
                           : limits.messages;
  std::unique_ptr<Target> target = config.make();
  if (absl::Status s = target->Setup(); !s.ok()) {
    row.check = "ERROR: " + s.ToString();
    return row;
  }
  const std::vector<std::vector<uint32_t>> parts =
      Partition(stream, count, config.clients);
  std::vector<std::unique_ptr<Client>> clients;
  for (int c = 0; c < config.clients; ++c) {
    absl::StatusOr<std::unique_ptr<Client>> client = target->NewClient();
    if (!client.ok()) {
      row.check = "ERROR: " + client.status().ToString();
      clients.clear();
      // Tear down only: the error that matters is the one above.
      target->Finish(limits.accounts).status().IgnoreError();
      return row;
    }
    clients.push_back(std::move(*client));
  }
  struct ClientOutcome {
    size_t processed = 0;
    uint64_t news = 0;
    LatencyHistogram latencies_us;
    absl::Status status;
  };
  std::vector<ClientOutcome> outcomes(clients.size());
  const auto start = SteadyClock::now();
  const auto deadline = DeadlineAfter(start, limits.time_cap_s);
  auto work = [&](size_t c) {
    ClientOutcome& out = outcomes[c];
    const std::vector<uint32_t>& mine = parts[c];
    std::vector<const StreamMessage*> batch;
    for (size_t at = 0; at < mine.size();
         at += static_cast<size_t>(config.batch)) {
      if (SteadyClock::now() > deadline) break;
      batch.clear();
      const size_t end =
          std::min(mine.size(), at + static_cast<size_t>(config.batch));
      for (size_t i = at; i < end; ++i) batch.push_back(&stream[mine[i]]);
      const auto t0 = SteadyClock::now();
      absl::StatusOr<uint64_t> news = clients[c]->Run(batch);
      const auto t1 = SteadyClock::now();
      if (!news.ok()) {
        out.status = news.status();
        return;
      }
      out.news += *news;
      out.processed = end;
      out.latencies_us.Add(MicrosecondsBetween(t0, t1));
    }
  };
  if (clients.size() == 1) {
    work(0);
  } else {
    std::vector<std::thread> threads;
    for (size_t c = 0; c < clients.size(); ++c) threads.emplace_back(work, c);
    for (std::thread& t : threads) t.join();
  }
  const auto stop = SteadyClock::now();
  clients.clear();

  LatencyHistogram latencies;
  ExpectedOutcome expected(limits.accounts);
  absl::Status failure;
  for (size_t c = 0; c < outcomes.size(); ++c) {
    const ClientOutcome& out = outcomes[c];
    if (!out.status.ok() && failure.ok()) failure = out.status;
    row.messages += out.processed;
    row.news += out.news;
    latencies.Merge(out.latencies_us);
    for (size_t i = 0; i < out.processed; ++i) {
      expected.Add(stream[parts[c][i]]);
    }
  }
  row.expected_news = expected.news;
  row.user_bytes = expected.user_bytes;
  row.seconds = std::chrono::duration<double>(stop - start).count();
  row.rate =
      row.seconds > 0 ? static_cast<double>(row.messages) / row.seconds : 0;
  row.p50_us = latencies.Percentile(0.50);
  row.p99_us = latencies.Percentile(0.99);
  if (row.messages < count) {
    row.note = absl::StrFormat("stopped at the %.0f s cap after %d of %d msgs",
                               limits.time_cap_s, row.messages, count);
  }

  absl::StatusOr<FinalState> final = target->Finish(limits.accounts);
  if (!failure.ok()) {
    row.check = "ERROR: " + failure.ToString();
    return row;
  }
  if (!final.ok()) {
    row.check = "ERROR: " + final.status().ToString();
    return row;
  }
  row.written_bytes = final->written_bytes;
  row.disk_bytes = final->disk_bytes;
  if (final->written_bytes.has_value() && row.user_bytes > 0) {
    row.write_amp = static_cast<double>(*final->written_bytes) /
                    static_cast<double>(row.user_bytes);
  }
  if (!final->note.empty()) {
    row.note = row.note.empty() ? final->note : row.note + "; " + final->note;
  }
  row.check = CheckOutcome(expected, row.news, final->stored_ids,
                           final->balance_sum, config.check_sum);
  return row;
}

ResultRow MedianRound(std::vector<ResultRow>& runs) {
  double low = runs.front().rate;
  double high = low;
  for (const ResultRow& r : runs) {
    low = std::min(low, r.rate);
    high = std::max(high, r.rate);
  }
  ResultRow out;
  auto failed = std::find_if(runs.begin(), runs.end(),
                             [](const ResultRow& r) { return r.failed(); });
  if (failed != runs.end()) {
    out = *failed;
  } else {
    std::sort(
        runs.begin(), runs.end(),
        [](const ResultRow& a, const ResultRow& b) { return a.rate < b.rate; });
    out = runs[(runs.size() - 1) / 2];
  }
  out.rate_min = low;
  out.rate_max = high;
  out.rounds = static_cast<int>(runs.size());
  return out;
}

void AddRatios(std::vector<ResultRow>& rows) {
  auto find_ref = [&](bool durable, int batch,
                      int clients) -> const ResultRow* {
    for (const ResultRow& r : rows) {
      if (r.config.reference && r.config.durable() == durable &&
          r.config.batch == batch && r.config.clients == clients &&
          r.check == "ok") {
        return &r;
      }
    }
    return nullptr;
  };
  for (ResultRow& row : rows) {
    if (row.errored()) continue;
    const ResultRow* ref =
        find_ref(row.config.durable(), row.config.batch, row.config.clients);
    if (ref == nullptr) {
      ref = find_ref(row.config.durable(), row.config.batch, 1);
    }
    if (ref == nullptr) continue;
    if (ref->rate > 0) row.rate_ratio = row.rate / ref->rate;
    // Per processed message, so a run stopped at the time cap compares.
    if (row.disk_bytes.has_value() && *row.disk_bytes > 0 &&
        ref->disk_bytes.has_value() && *ref->disk_bytes > 0 &&
        row.messages > 0 && ref->messages > 0 && row.config.peer != "ceiling") {
      row.disk_ratio = (static_cast<double>(*row.disk_bytes) /
                        static_cast<double>(row.messages)) /
                       (static_cast<double>(*ref->disk_bytes) /
                        static_cast<double>(ref->messages));
    }
  }
}

}  // namespace idem::peers
