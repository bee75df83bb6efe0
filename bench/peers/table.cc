// The text table and JSON output (bench/peers/table.h).

#include "bench/peers/table.h"

#include <optional>
#include <sstream>

#include "absl/strings/str_format.h"
#include "util/json_writer.h"

namespace idem::peers {
namespace {

using util::JsonQuote;

template <typename T>
std::string JsonOptional(const std::optional<T>& v) {
  if (!v.has_value()) return "null";
  std::ostringstream out;
  out << *v;
  return out.str();
}

}  // namespace

std::string FormatThousands(double value) {
  std::string digits = absl::StrFormat("%.0f", value);
  std::string out;
  const size_t n = digits.size();
  for (size_t i = 0; i < n; ++i) {
    out += digits[i];
    if ((n - i - 1) % 3 == 0 && i + 1 < n) out += ',';
  }
  return out;
}

std::string FormatShort(double value) {
  if (value >= 10000) return absl::StrFormat("%.0fk", value / 1000);
  if (value >= 1000) return absl::StrFormat("%.1fk", value / 1000);
  return absl::StrFormat("%.0f", value);
}

std::string FormatLatency(double us) {
  if (us >= 1000) return absl::StrFormat("%.1f ms", us / 1000);
  return absl::StrFormat("%.0f µs", us);
}

std::string FormatBytes(uint64_t bytes) {
  if (bytes == 0) return "0";
  if (bytes < (1 << 20)) return absl::StrFormat("%.0f KiB", bytes / 1024.0);
  return absl::StrFormat("%.1f MiB", bytes / 1048576.0);
}

void PrintJson(const ReportHeader& h, const std::vector<ResultRow>& rows,
               std::ostream& out) {
  out << "{\"date\": " << JsonQuote(h.date)
      << ", \"machine\": " << JsonQuote(h.machine)
      << ", \"messages\": " << h.messages
      << ", \"slow_messages\": " << h.slow_messages
      << ", \"duplicate_rate\": " << h.duplicate_rate
      << ", \"seed\": " << h.seed << ", \"accounts\": " << h.accounts
      << ", \"stream_duplicates\": " << h.stream_duplicates
      << ", \"rounds\": " << h.rounds << ", \"rows\": [";
  for (size_t i = 0; i < rows.size(); ++i) {
    const ResultRow& r = rows[i];
    out << (i == 0 ? "\n  " : ",\n  ")
        << "{\"peer\": " << JsonQuote(r.config.peer)
        << ", \"config\": " << JsonQuote(r.config.name)
        << ", \"durability\": " << JsonQuote(r.config.durability)
        << ", \"batch\": " << r.config.batch
        << ", \"clients\": " << r.config.clients
        << ", \"messages\": " << r.messages << ", \"new\": " << r.news
        << ", \"expected_new\": " << r.expected_news
        << ", \"seconds\": " << r.seconds
        << ", \"messages_per_second\": " << r.rate
        << ", \"messages_per_second_min\": " << r.rate_min
        << ", \"messages_per_second_max\": " << r.rate_max
        << ", \"rounds\": " << r.rounds
        << ", \"latency_unit\": " << JsonQuote(r.latency_unit)
        << ", \"p50_us\": " << r.p50_us << ", \"p99_us\": " << r.p99_us
        << ", \"user_bytes\": " << r.user_bytes
        << ", \"written_bytes\": " << JsonOptional(r.written_bytes)
        << ", \"write_amplification\": " << JsonOptional(r.write_amp)
        << ", \"disk_bytes\": " << JsonOptional(r.disk_bytes)
        << ", \"rate_vs_idem\": " << JsonOptional(r.rate_ratio)
        << ", \"disk_vs_idem\": " << JsonOptional(r.disk_ratio)
        << ", \"check\": " << JsonQuote(r.check)
        << ", \"note\": " << JsonQuote(r.note) << "}";
  }
  out << "\n]}\n";
}

void PrintTable(const ReportHeader& h, const std::vector<ResultRow>& rows,
                std::ostream& out) {
  out << absl::StrFormat(
      "idem peers benchmark, %s, %s\n%d messages per config (%d for configs "
      "that sync once per message), %d of them redeliveries (%.0f%%), seed "
      "%d, %d accounts; each config run %d times in turn, median shown\n\n",
      h.date, h.machine, h.messages, h.slow_messages, h.stream_duplicates,
      100.0 * h.duplicate_rate, h.seed, h.accounts, h.rounds);
  out << "| peer / config | durability | batch | clients | msgs/s | range "
         "| p99 latency | write amp | disk at end | msgs/s vs idem | disk vs "
         "idem | check |\n"
         "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|\n";
  std::vector<std::string> notes;
  for (const ResultRow& r : rows) {
    std::string name = r.config.name;
    if (!r.note.empty()) {
      notes.push_back(r.note);
      name += absl::StrFormat(" [%d]", notes.size());
    }
    const bool error = r.errored();
    out << absl::StrFormat(
        "| %s | %s | %d | %d | %s | %s | %s | %s | %s | %s | %s | %s |\n", name,
        r.config.durability, r.config.batch, r.config.clients,
        error ? "-" : FormatThousands(r.rate),
        error || r.rounds < 2
            ? "-"
            : absl::StrFormat("%s–%s", FormatShort(r.rate_min),
                              FormatShort(r.rate_max)),
        error ? "-" : FormatLatency(r.p99_us) + "/" + r.latency_unit,
        r.write_amp.has_value() ? absl::StrFormat("%.2f", *r.write_amp) : "n/a",
        r.disk_bytes.has_value() ? FormatBytes(*r.disk_bytes) : "n/a",
        r.rate_ratio.has_value() ? absl::StrFormat("%.2fx", *r.rate_ratio)
                                 : "n/a",
        r.disk_ratio.has_value() ? absl::StrFormat("%.2fx", *r.disk_ratio)
                                 : "n/a",
        r.check);
  }
  out << "\n";
  for (size_t i = 0; i < notes.size(); ++i) {
    out << absl::StrFormat("[%d] %s\n", i + 1, notes[i]);
  }
  out << "\nDurability: fsync = on stable storage before the call returns; "
         "page cache = survives a process crash, not a power loss; async "
         "commit = PostgreSQL may lose the last ~0.6 s of commits on any "
         "crash; memory = lost on restart.\n"
         "msgs/s counts every delivery (duplicates too) over wall time; range "
         "is the lowest and highest round.\n"
         "p99 latency is per message for batch 1 and per poll (batch) "
         "otherwise, from the median round.\n"
         "write amp = bytes written (RocksDB/idem: WAL + flush + compaction "
         "tickers; PostgreSQL: WAL; Redis: AOF) / logical bytes (ID + account "
         "+ 8-byte balance per new message).\n"
         "vs idem = this row / the idem row of the same durability "
         "(fsync: kSync, or kBuffered + WaitDurable for many clients; "
         "otherwise kBuffered without waiting), batch and clients; disk vs "
         "idem compares bytes per processed message.\n";
}

}  // namespace idem::peers
