// The text table and JSON output (bench/peers/table.h).

#include "bench/peers/table.h"

#include "absl/strings/str_format.h"
#include "util/json_writer.h"

namespace idem::peers {

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
  util::JsonWriter j;
  j.BeginObject();
  j.Field("date", h.date);
  j.Field("machine", h.machine);
  j.Field("messages", h.messages);
  j.Field("slow_messages", h.slow_messages);
  j.Field("duplicate_rate", h.duplicate_rate);
  j.Field("seed", h.seed);
  j.Field("accounts", h.accounts);
  j.Field("stream_duplicates", h.stream_duplicates);
  j.Field("rounds", h.rounds);
  j.Key("rows");
  j.BeginArray();
  for (const ResultRow& r : rows) {
    j.BeginObject();
    j.Field("peer", r.config.peer);
    j.Field("config", r.config.name);
    j.Field("durability", r.config.durability);
    j.Field("batch", r.config.batch);
    j.Field("clients", r.config.clients);
    j.Field("messages", r.messages);
    j.Field("new", r.news);
    j.Field("expected_new", r.expected_news);
    j.Field("seconds", r.seconds);
    j.Field("messages_per_second", r.rate);
    j.Field("messages_per_second_min", r.rate_min);
    j.Field("messages_per_second_max", r.rate_max);
    j.Field("rounds", r.rounds);
    j.Field("latency_unit", r.latency_unit);
    j.Field("p50_us", r.p50_us);
    j.Field("p99_us", r.p99_us);
    j.Field("user_bytes", r.user_bytes);
    j.Field("written_bytes", r.written_bytes);
    j.Field("write_amplification", r.write_amp);
    j.Field("disk_bytes", r.disk_bytes);
    j.Field("rate_vs_idem", r.rate_ratio);
    j.Field("disk_vs_idem", r.disk_ratio);
    j.Field("check", r.check);
    j.Field("note", r.note);
    j.EndObject();
  }
  j.EndArray();
  j.EndObject();
  out << j.str() << "\n";
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
         "(fsync: kSync; otherwise kBuffered without waiting), batch and "
         "clients; disk vs idem compares bytes per processed message.\n";
}

}  // namespace idem::peers
