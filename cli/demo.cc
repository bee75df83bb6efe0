#include "cli/demo.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "cli/tool_usage.h"
#include "examples/ledger.h"
#include "examples/ledger_stream.h"
#include "idem/engine.h"
#include "idem/message.h"
#include "idem/options.h"
#include "util/json_writer.h"
#include "util/temp_dir.h"

namespace idem::cli {
namespace {

constexpr char kSource[] = "ledger";
// Redeliveries repeat one of the last kRedeliveryWindow distinct IDs, so some
// land in the same batch as their original and most in a later one.
constexpr int64_t kRedeliveryWindow = 1000;
// About one delivery in kReorderOneIn swaps places with one up to
// kReorderDistance positions later.
constexpr int kReorderOneIn = 50;
constexpr int64_t kReorderDistance = 50;

// Amounts in cents: mostly credits, some debits.
constexpr int64_t kMinAmount = -5000;
constexpr int64_t kMaxAmount = 10000;

// The deliveries: the ledger's payments (examples/ledger_stream.h), some
// delivered again, some out of order.
struct Stream {
  std::vector<examples::LedgerMessage> payments;
  std::vector<int64_t> deliveries;  // indexes into payments, in order
  int64_t reordered = 0;
};

Stream MakeStream(const DemoOptions& options) {
  const int64_t total = options.messages;
  int64_t duplicates =
      std::llround(static_cast<double>(total) * options.duplicate_rate);
  duplicates = std::min(duplicates, total - 1);
  const int64_t unique = total - duplicates;

  Stream stream;
  examples::LedgerStreamOptions payments;
  payments.seed = options.seed;
  payments.accounts = options.accounts;
  payments.min_amount = kMinAmount;
  payments.max_amount = kMaxAmount;
  stream.payments =
      examples::MakeLedgerMessages(payments, static_cast<size_t>(unique));

  // The delivery order has a generator of its own, seeded apart from the
  // payments'.
  std::mt19937_64 rng(options.seed ^ 0x9e3779b97f4a7c15ull);
  // Pick which delivery positions are redeliveries; position 0 never is.
  std::vector<int64_t> positions(total - 1);
  for (int64_t i = 0; i < total - 1; ++i) positions[i] = i + 1;
  std::vector<bool> is_duplicate(total, false);
  for (int64_t i = 0; i < duplicates; ++i) {
    std::uniform_int_distribution<int64_t> pick(i, total - 2);
    std::swap(positions[i], positions[pick(rng)]);
    is_duplicate[positions[i]] = true;
  }

  stream.deliveries.reserve(total);
  int64_t next = 0;
  for (int64_t pos = 0; pos < total; ++pos) {
    if (is_duplicate[pos]) {
      std::uniform_int_distribution<int64_t> earlier(
          std::max<int64_t>(0, next - kRedeliveryWindow), next - 1);
      stream.deliveries.push_back(earlier(rng));
    } else {
      stream.deliveries.push_back(next++);
    }
  }

  // Reorder: swap a few deliveries with a later one nearby.
  std::uniform_int_distribution<int> coin(0, kReorderOneIn - 1);
  std::uniform_int_distribution<int64_t> distance(1, kReorderDistance);
  for (int64_t pos = 0; pos + 1 < total; ++pos) {
    if (coin(rng) != 0) continue;
    const int64_t other = std::min(total - 1, pos + distance(rng));
    std::swap(stream.deliveries[pos], stream.deliveries[other]);
    stream.reordered += 2;
  }
  return stream;
}

}  // namespace

absl::Status ValidateDemoOptions(const DemoOptions& options) {
  if (options.messages < 1 || options.messages > kMaxDemoMessages) {
    return absl::InvalidArgumentError(absl::StrCat("--messages must be in [1, ",
                                                   kMaxDemoMessages, "], got ",
                                                   options.messages));
  }
  if (!(options.duplicate_rate >= 0 && options.duplicate_rate < 1)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--duplicate_rate must be in [0, 1), got ", options.duplicate_rate));
  }
  if (options.batch < 1 || options.batch > kMaxDemoBatch) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--batch must be in [1, ", kMaxDemoBatch, "], got ", options.batch));
  }
  if (options.accounts < 1 || options.accounts > kMaxDemoAccounts) {
    return absl::InvalidArgumentError(absl::StrCat("--accounts must be in [1, ",
                                                   kMaxDemoAccounts, "], got ",
                                                   options.accounts));
  }
  return absl::OkStatus();
}

namespace {

// Delivers `stream` to `engine` batch by batch and fills in the outcome
// counts of `report`.
absl::Status Deliver(Engine& engine, const Stream& stream, int batch_size,
                     DemoReport& report) {
  // The result each payment's processing returned, for checking duplicates.
  std::vector<std::optional<std::string>> first_result(stream.payments.size());
  std::vector<Message> batch;
  batch.reserve(batch_size);
  const int64_t total = static_cast<int64_t>(stream.deliveries.size());
  for (int64_t start = 0; start < total; start += batch_size) {
    const int64_t end = std::min(total, start + batch_size);
    batch.clear();
    for (int64_t pos = start; pos < end; ++pos) {
      const examples::LedgerMessage& p =
          stream.payments[stream.deliveries[pos]];
      batch.push_back(Message{.id = p.id,
                              .payload = p.payload,
                              .source = kSource,
                              .partition = 0,
                              .offset = pos});
    }
    absl::StatusOr<std::vector<Result>> results =
        engine.ProcessBatch(batch, examples::HandlePayment);
    if (!results.ok()) return results.status();
    uint64_t wait_for = 0;
    for (size_t i = 0; i < results->size(); ++i) {
      const Result& r = (*results)[i];
      std::optional<std::string>& first =
          first_result[stream.deliveries[start + i]];
      wait_for = std::max(wait_for, r.sequence);
      switch (r.outcome) {
        case Outcome::kProcessed:
          ++report.processed;
          first = r.result;
          break;
        case Outcome::kConflict:  // never: the demo leaves detect_conflicts off
        case Outcome::kDuplicate:
          ++report.duplicates;
          if (first != r.result) ++report.result_mismatches;
          break;
        case Outcome::kFailed:
          ++report.failed;
          break;
      }
    }
    // Acknowledge to the "broker" only once the batch's outcomes are durable.
    if (wait_for > 0) {
      if (absl::Status s = engine.WaitDurable(wait_for); !s.ok()) return s;
    }
    report.acknowledged += end - start;
    ++report.batches;
  }
  return absl::OkStatus();
}

// Compares the stored balances with the sums of the unique payments.
absl::Status CheckState(Engine& engine, const Stream& stream, int accounts,
                        DemoReport& report) {
  examples::ExpectedBalances expected(accounts);
  for (const examples::LedgerMessage& p : stream.payments) {
    expected.Add(p.payment);
  }
  absl::StatusOr<examples::BalanceCheck> check =
      examples::CheckBalances(engine, expected);
  if (!check.ok()) return check.status();
  report.expected_total = check->expected_total;
  report.actual_total = check->actual_total;
  report.mismatched_accounts = check->mismatched_accounts;
  report.state_ok = report.mismatched_accounts == 0;
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<DemoReport> RunDemo(const DemoOptions& options) {
  if (absl::Status s = ValidateDemoOptions(options); !s.ok()) return s;
  const Stream stream = MakeStream(options);
  DemoReport report;
  report.delivered = static_cast<int64_t>(stream.deliveries.size());
  report.unique_messages = static_cast<int64_t>(stream.payments.size());
  report.injected_duplicates = report.delivered - report.unique_messages;
  report.reordered = stream.reordered;

  std::optional<util::TempDir> temp;  // when no store is given
  report.store = options.store;
  if (report.store.empty()) {
    absl::StatusOr<util::TempDir> dir = util::TempDir::Create("idem_demo_");
    if (!dir.ok()) return dir.status();
    if (options.keep) dir->Keep();
    report.store = dir->Sub("store");
    temp.emplace(*std::move(dir));
  }
  Options engine_options;
  engine_options.durability = Durability::kBuffered;
  // Declared after `temp`, so the engine closes before the directory goes.
  absl::StatusOr<std::unique_ptr<Engine>> engine =
      Engine::Open(report.store, engine_options);
  if (!engine.ok()) return engine.status();

  const auto start = std::chrono::steady_clock::now();
  if (absl::Status s = Deliver(**engine, stream, options.batch, report);
      !s.ok()) {
    return s;
  }
  report.elapsed_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  if (report.elapsed_seconds > 0) {
    report.messages_per_second =
        static_cast<double>(report.delivered) / report.elapsed_seconds;
  }

  if (absl::Status s = CheckState(**engine, stream, options.accounts, report);
      !s.ok()) {
    return s;
  }
  absl::StatusOr<std::optional<int64_t>> offset =
      (*engine)->CommittedOffset(kSource, 0);
  if (!offset.ok()) return offset.status();
  report.committed_offset = offset->value_or(-1);
  report.counts_ok = report.processed == report.unique_messages &&
                     report.duplicates == report.injected_duplicates &&
                     report.failed == 0 && report.result_mismatches == 0 &&
                     report.acknowledged == report.delivered &&
                     report.committed_offset == report.delivered - 1;
  absl::StatusOr<Stats> stats = (*engine)->GetStats();
  if (!stats.ok()) return stats.status();
  report.stats = *stats;
  return report;
}

void PrintDemoReport(const DemoReport& r, bool json, std::ostream& out) {
  const Stats& s = r.stats;
  if (json) {
    util::JsonWriter j;
    j.BeginObject();
    j.Field("delivered", r.delivered);
    j.Field("unique_messages", r.unique_messages);
    j.Field("injected_duplicates", r.injected_duplicates);
    j.Field("reordered", r.reordered);
    j.Field("batches", r.batches);
    j.Field("processed", r.processed);
    j.Field("duplicates", r.duplicates);
    j.Field("failed", r.failed);
    j.Field("result_mismatches", r.result_mismatches);
    j.Field("acknowledged", r.acknowledged);
    j.Field("committed_offset", r.committed_offset);
    j.Field("expected_total", r.expected_total);
    j.Field("actual_total", r.actual_total);
    j.Field("mismatched_accounts", r.mismatched_accounts);
    j.Field("state_check", r.state_ok ? "PASS" : "FAIL");
    j.Field("counts_ok", r.counts_ok);
    j.Field("passed", r.passed());
    j.Field("write_amplification", s.write_amplification);
    j.Field("user_bytes", s.user_bytes);
    j.Field("wal_bytes", s.wal_bytes);
    j.Field("flush_bytes", s.flush_bytes);
    j.Field("compaction_bytes", s.compaction_bytes);
    j.Field("elapsed_seconds", r.elapsed_seconds);
    j.Field("messages_per_second", r.messages_per_second);
    j.EndObject();
    out << j.str() << "\n";
    return;
  }
  out << absl::StrFormat(
      "idem demo: a ledger consumer on an at-least-once stream\n"
      "  delivered             %d messages in %d batches (%d unique, %d "
      "redeliveries injected, %d reordered)\n"
      "  processed             %d (the handler ran once per unique ID)\n"
      "  duplicates suppressed %d (expected %d)%s\n"
      "  failed                %d\n"
      "  acknowledged          %d (each batch after WaitDurable; committed "
      "offset %d)\n"
      "  state check           %s: %d accounts differ; total balance %d, "
      "expected %d\n"
      "  counts check          %s\n"
      "  write amplification   %.3f = (WAL %d + flush %d + compaction %d "
      "bytes) / %d user bytes\n"
      "  elapsed               %.3f s, %.0f messages/s\n"
      "%s\n",
      r.delivered, r.batches, r.unique_messages, r.injected_duplicates,
      r.reordered, r.processed, r.duplicates, r.injected_duplicates,
      r.result_mismatches == 0
          ? ""
          : absl::StrCat(", ", r.result_mismatches,
                         " returned a result unlike their first delivery's"),
      r.failed, r.acknowledged, r.committed_offset,
      r.state_ok ? "PASS" : "FAIL", r.mismatched_accounts, r.actual_total,
      r.expected_total, r.counts_ok ? "PASS" : "FAIL", s.write_amplification,
      s.wal_bytes, s.flush_bytes, s.compaction_bytes, s.user_bytes,
      r.elapsed_seconds, r.messages_per_second, r.passed() ? "PASS" : "FAIL");
}

int RunDemoTool(const DemoOptions& options, bool json, std::ostream& out,
                std::ostream& err) {
  if (absl::Status s = ValidateDemoOptions(options); !s.ok()) {
    return ReportUsageError("idem-demo", s.message(), err);
  }
  absl::StatusOr<DemoReport> report = RunDemo(options);
  if (!report.ok()) {
    err << "idem-demo: " << report.status().ToString() << "\n";
    return kExitFailure;
  }
  PrintDemoReport(*report, json, out);
  if (!options.store.empty() || options.keep) {
    err << "idem-demo: the store is kept at " << report->store << "\n";
  }
  return report->passed() ? kExitOk : kExitFailure;
}

}  // namespace idem::cli
