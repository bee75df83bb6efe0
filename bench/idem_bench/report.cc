// idem-bench's report (bench/idem_bench/idem_bench.h): for people, with a
// summary table when several layouts ran, or as one JSON object.

#include <cmath>
#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "bench/idem_bench/idem_bench.h"
#include "bench/idem_bench/names.h"
#include "util/json_writer.h"

namespace idem::bench {
namespace {

using util::JsonWriter;

// ---- JSON: one object, its members in the order below -------------------

void JsonLatency(JsonWriter& j, std::string_view key, const LatencySummary& l) {
  j.Key(key);
  j.BeginObject();
  j.Field("count", l.count);
  j.Field("mean_us", l.mean);
  j.Field("p50_us", l.p50);
  j.Field("p99_us", l.p99);
  j.Field("p999_us", l.p999);
  j.Field("max_us", l.max);
  j.EndObject();
}

void JsonLookup(JsonWriter& j, std::string_view key, const LookupCost& c) {
  j.Key(key);
  j.BeginObject();
  j.Field("lookups", c.lookups);
  j.Field("found", c.found);
  j.Field("filter_probes", c.filter_probes);
  j.Field("filter_negatives", c.filter_negatives);
  j.Field("data_blocks_read", c.data_blocks_read);
  j.Field("micros", c.micros);
  j.EndObject();
}

// The options the run used ("config").
void JsonConfig(JsonWriter& j, const BenchOptions& o) {
  j.Key("config");
  j.BeginObject();
  j.Field("messages", o.messages);
  j.Field("duration_seconds", absl::ToDoubleSeconds(o.duration));
  j.Field("id_shape", ShapeName(o.id_shape));
  j.Field("state_bytes", o.state_bytes);
  j.Field("duplicate_rate", o.duplicate_rate);
  j.Field("duplicate_reach", o.duplicate_reach);
  j.Field("batch", o.batch);
  j.Field("durability", DurabilityName(o.durability));
  j.Field("ack_durable", o.ack_durable);
  j.Field("threads", o.threads);
  j.Field("window_seconds", absl::ToDoubleSeconds(o.window));
  j.Field("sim_messages_per_second", o.sim_messages_per_second);
  j.Field("write_buffer_bytes", o.write_buffer_bytes);
  j.Field("expiry_buckets", o.expiry_buckets);
  j.Field("detect_conflicts", o.detect_conflicts);
  j.Field("emit", o.emit);
  j.Field("emit_bytes", o.emit_bytes);
  j.Field("outbox_ack_every", o.outbox_ack_every);
  // Signed, as the report has always written it (a seed past 2^63 shows as
  // negative).
  j.Field("seed", static_cast<int64_t>(o.seed));
  j.EndObject();
}

// The stream delivered and what the layout made of it.
void JsonStreamAndOutcomes(JsonWriter& j, const LayoutReport& r) {
  j.Field("messages", r.messages);
  j.Field("unique_ids", r.unique_ids);
  j.Field("redeliveries", r.redeliveries);
  j.Field("expired_redeliveries", r.expired_redeliveries);
  j.Field("processed", r.processed);
  j.Field("duplicates", r.duplicates);
  j.Field("dedupe_errors", r.dedupe_errors);
}

// Throughput and latency, then the clock time the run covered.
void JsonSpeedAndTime(JsonWriter& j, const LayoutReport& r) {
  j.Field("wall_seconds", r.wall_seconds);
  j.Field("messages_per_second", r.messages_per_second);
  JsonLatency(j, "batch_latency", r.batch_latency);
  JsonLatency(j, "message_latency", r.message_latency);
  j.Field("clock_seconds", r.clock_seconds);
  j.Field("windows_covered", r.windows_covered);
}

void JsonWriteAmplification(JsonWriter& j, const LayoutReport& r) {
  j.Field("user_bytes", r.user_bytes);
  j.Field("wal_bytes", r.wal_bytes);
  j.Field("flush_bytes", r.flush_bytes);
  j.Field("compaction_bytes", r.compaction_bytes);
  j.Field("write_amplification", r.cumulative_wa);
  j.Field("steady_state_write_amplification", r.steady_wa);
  j.Key("write_amplification_per_window");
  j.BeginArray();
  for (double w : r.wa_per_window) j.Number(w);
  j.EndArray();
  j.Field("rocksdb_sum_w_amp", r.rocksdb_sum_wamp);
}

// Records expired, then the space the live ones take at the end and in the
// steady state.
void JsonExpiryAndSpace(JsonWriter& j, const LayoutReport& r) {
  j.Field("expired_dropped", r.expired_dropped);
  j.Field("expired_dropped_whole", r.expired_dropped_whole);
  j.Field("live_records", r.live_records);
  j.Field("estimated_records", r.estimated_records);
  j.Field("logical_live_bytes", r.logical_live_bytes);
  j.Field("live_sst_bytes", r.live_sst_bytes);
  j.Field("disk_bytes", r.disk_bytes);
  j.Field("space_amplification", r.space_amp);
  j.Field("steady_state_space_amplification", r.steady_space_amp);
  j.Field("steady_state_disk_bytes_mean", r.steady_disk_bytes_mean);
  j.Field("steady_state_disk_bytes_max", r.steady_disk_bytes_max);
}

void JsonMemory(JsonWriter& j, const LayoutReport& r) {
  j.Field("memtable_bytes", r.memtable_bytes);
  j.Field("block_cache_usage", r.block_cache_usage);
  j.Field("table_readers_bytes", r.table_readers_bytes);
  j.Field("index_filter_bytes_per_live_id", r.index_filter_bytes_per_live_id);
  j.Field("memory_per_live_id_bytes", r.memory_per_live_id);
}

// The read cost ("lookup"); null when it was not measured.
void JsonReadCost(JsonWriter& j, const std::optional<ReadCost>& c) {
  j.Key("lookup");
  if (!c.has_value()) {
    j.Null();
    return;
  }
  j.BeginObject();
  JsonLookup(j, "miss", c->miss);
  JsonLookup(j, "hit", c->hit);
  j.EndObject();
}

// idem::Stats' outbox figures and the bench's acknowledgements; null
// without emits.
void JsonOutbox(JsonWriter& j, const std::optional<OutboxFigures>& f) {
  j.Key("outbox");
  if (!f.has_value()) {
    j.Null();
    return;
  }
  j.BeginObject();
  j.Field("emitted", f->emitted);
  j.Field("acknowledged", f->acknowledged);
  j.Field("pending", f->pending);
  JsonLatency(j, "ack_latency", f->ack_latency);
  j.EndObject();
}

// The kept store's path (only when kept), then the notes.
void JsonStoreAndNotes(JsonWriter& j, const LayoutReport& r) {
  if (!r.store_path.empty()) j.Field("store_path", r.store_path);
  j.Key("notes");
  j.BeginArray();
  for (const std::string& n : r.notes) j.String(n);
  j.EndArray();
}

void JsonLayout(JsonWriter& j, const LayoutReport& r) {
  j.BeginObject();
  j.Field("layout", LayoutName(r.layout));
  JsonStreamAndOutcomes(j, r);
  JsonSpeedAndTime(j, r);
  JsonWriteAmplification(j, r);
  JsonExpiryAndSpace(j, r);
  JsonMemory(j, r);
  JsonReadCost(j, r.read_cost);
  JsonOutbox(j, r.outbox);
  JsonStoreAndNotes(j, r);
  j.EndObject();
}

void PrintJson(const BenchReport& report, std::ostream& out) {
  JsonWriter j;
  j.BeginObject();
  j.Field("date", report.date);
  JsonConfig(j, report.options);
  j.Key("layouts");
  j.BeginArray();
  for (const LayoutReport& r : report.layouts) JsonLayout(j, r);
  j.EndArray();
  j.EndObject();
  out << j.str() << "\n";
}

// ---- Text: a header line, a section per layout, a summary table ---------

std::string Fixed(const std::optional<double>& v, int decimals) {
  if (!v.has_value()) return "n/a";
  return absl::StrFormat("%.*f", decimals, *v);
}

std::string Bytes(double b) {
  if (b >= kMiB) return absl::StrFormat("%.1f MiB", b / kMiB);
  if (b >= 1024) return absl::StrFormat("%.1f KiB", b / 1024);
  return absl::StrFormat("%.0f B", b);
}

// Bytes(*b), or "n/a" when there is no figure.
template <typename T>
std::string OptionalBytes(const std::optional<T>& b) {
  if (!b.has_value()) return "n/a";
  return Bytes(static_cast<double>(*b));
}

// "N messages", "D wall time" or "N messages or D wall time".
std::string RunLimitText(const BenchOptions& o) {
  const bool by_count = o.messages > 0;
  const bool by_time = o.duration > absl::ZeroDuration();
  return absl::StrCat(
      by_count ? absl::StrCat(o.messages, " messages") : std::string(),
      by_count && by_time ? " or " : "",
      by_time ? absl::StrCat(absl::FormatDuration(o.duration), " wall time")
              : std::string());
}

// What buffered durability does at the end of a batch; empty for sync.
std::string AckDurableText(const BenchOptions& o) {
  if (o.durability != Durability::kBuffered) return "";
  return o.ack_durable ? " (sync per batch)" : " (never synced)";
}

std::string ClockText(const BenchOptions& o) {
  if (o.sim_messages_per_second > 0) {
    return absl::StrFormat("simulated clock at %g msg/s",
                           o.sim_messages_per_second);
  }
  return "real clock";
}

std::string ExpiryBucketsText(const BenchOptions& o) {
  if (o.expiry_buckets <= 0) return "";
  return absl::StrCat(", engine with expiry_buckets=", o.expiry_buckets);
}

std::string EmitText(const BenchOptions& o) {
  if (o.emit <= 0) return "";
  return absl::StrCat(
      ", ", o.emit, " emit(s) of ", o.emit_bytes,
      " bytes per message, acknowledged ",
      o.outbox_ack_every > 0
          ? absl::StrCat("every ", o.outbox_ack_every, " batch(es)")
          : std::string("never"));
}

// The first line: the date and the options of the run.
void TextHeader(const BenchReport& report, std::ostream& out) {
  const BenchOptions& o = report.options;
  out << absl::StrFormat(
      "idem-bench %s: %s per layout, ids %s, %.0f%% redeliveries "
      "reaching %d ids back, batch %d, %s%s, %d thread(s), window %s, %s, "
      "memtable %s%s%s\n",
      report.date, RunLimitText(o), ShapeName(o.id_shape),
      o.duplicate_rate * 100, o.duplicate_reach, o.batch,
      DurabilityName(o.durability), AckDurableText(o), o.threads,
      absl::FormatDuration(o.window), ClockText(o),
      Bytes(static_cast<double>(o.write_buffer_bytes)), ExpiryBucketsText(o),
      EmitText(o));
}

// The stream, the outcomes, throughput and latency.
void TextStreamAndSpeed(const LayoutReport& r, std::ostream& out) {
  out << absl::StrFormat(
      "  stream        %d deliveries, %d ids, %d redeliveries (%d after "
      "their window)\n"
      "  outcomes      %d processed, %d duplicates, dedupe errors %s\n",
      r.messages, r.unique_ids, r.redeliveries, r.expired_redeliveries,
      r.processed, r.duplicates,
      r.dedupe_errors.has_value() ? absl::StrCat(*r.dedupe_errors)
                                  : "not checked");
  out << absl::StrFormat(
      "  throughput    %.0f msg/s (%.2f s wall)\n"
      "  latency       batch p50 %.0f us, p99 %.0f us, p99.9 %.0f us; per "
      "message p50 %.2f us, p99 %.2f us, p99.9 %.2f us\n",
      r.messages_per_second, r.wall_seconds, r.batch_latency.p50,
      r.batch_latency.p99, r.batch_latency.p999, r.message_latency.p50,
      r.message_latency.p99, r.message_latency.p999);
}

// The clock time covered and write amplification.
void TextWrites(int steady_windows, const LayoutReport& r, std::ostream& out) {
  out << absl::StrFormat(
      "  clock         %s covered = %.2f windows\n"
      "  write amp     cumulative %.2f = (WAL %s + flush %s + compaction "
      "%s) / user %s\n"
      "                steady state (last %d windows) %s; RocksDB Sum "
      "W-Amp %s\n"
      "                per window: %s\n",
      absl::FormatDuration(absl::Seconds(std::round(r.clock_seconds))),
      r.windows_covered, r.cumulative_wa, Bytes(r.wal_bytes),
      Bytes(r.flush_bytes), Bytes(r.compaction_bytes), Bytes(r.user_bytes),
      steady_windows, Fixed(r.steady_wa, 2), Fixed(r.rocksdb_sum_wamp, 1),
      absl::StrJoin(r.wa_per_window, " ", [](std::string* s, double w) {
        absl::StrAppend(s, absl::StrFormat("%.2f", w));
      }));
}

// Records expired, space and memory.
void TextSpaceAndMemory(int steady_windows, const LayoutReport& r,
                        std::ostream& out) {
  out << absl::StrFormat(
      "  expiry        %d records dropped by the filter, %d in whole "
      "files/families\n"
      "  space         %d live records (RocksDB estimate %d), logical %s, "
      "live SST %s, disk %s, space amp %.2f at the end\n"
      "                steady state (last %d windows): space amp %s, disk "
      "mean %s, max %s\n",
      r.expired_dropped, r.expired_dropped_whole, r.live_records,
      r.estimated_records, Bytes(r.logical_live_bytes), Bytes(r.live_sst_bytes),
      Bytes(r.disk_bytes), r.space_amp, steady_windows,
      Fixed(r.steady_space_amp, 2), OptionalBytes(r.steady_disk_bytes_mean),
      OptionalBytes(r.steady_disk_bytes_max));
  out << absl::StrFormat(
      "  memory        memtables %s, index+filters %s (%.2f bytes per live "
      "id), block cache %s; memtables+index+filters %s bytes per live id\n",
      OptionalBytes(r.memtable_bytes), Bytes(r.table_readers_bytes),
      r.index_filter_bytes_per_live_id, OptionalBytes(r.block_cache_usage),
      Fixed(r.memory_per_live_id, 1));
}

void TextLookup(const char* name, const LookupCost& c, std::ostream& out) {
  out << absl::StrFormat(
      "  lookup %s %.2f filter probes (%.2f negative), %.3f data "
      "blocks read, %.1f us (%d/%d found)\n",
      name, c.filter_probes, c.filter_negatives, c.data_blocks_read, c.micros,
      c.found, c.lookups);
}

// The read cost and the outbox, each when it was measured.
void TextLookupsAndOutbox(const LayoutReport& r, std::ostream& out) {
  if (r.read_cost.has_value()) {
    TextLookup("new id ", r.read_cost->miss, out);
    TextLookup("live id", r.read_cost->hit, out);
  }
  if (r.outbox.has_value()) {
    const OutboxFigures& f = *r.outbox;
    const LatencySummary& a = f.ack_latency;
    out << absl::StrFormat(
        "  outbox        %d emitted, %d acknowledged, %d pending; %d "
        "AckOutbox calls: mean %.0f us, p50 %.0f us, p99 %.0f us, p99.9 "
        "%.0f us, %.2f s in all\n",
        f.emitted, f.acknowledged, f.pending, a.count, a.mean, a.p50, a.p99,
        a.p999, a.mean * static_cast<double>(a.count) / 1e6);
  }
}

void TextLayout(const BenchOptions& o, const LayoutReport& r,
                std::ostream& out) {
  out << absl::StrFormat("\n[%s]\n", LayoutName(r.layout));
  TextStreamAndSpeed(r, out);
  TextWrites(o.steady_windows, r, out);
  TextSpaceAndMemory(o.steady_windows, r, out);
  TextLookupsAndOutbox(r, out);
  for (const std::string& n : r.notes) out << "  note          " << n << "\n";
  if (!r.store_path.empty()) out << "  store         " << r.store_path << "\n";
}

// The new-id lookup's "probes / blocks / us", or "n/a".
std::string NewIdLookupCell(const std::optional<ReadCost>& c) {
  if (!c.has_value()) return "n/a";
  return absl::StrFormat("%.2f / %.3f / %.1f", c->miss.filter_probes,
                         c->miss.data_blocks_read, c->miss.micros);
}

// One Markdown row per layout, comparing them.
void TextSummaryTable(const BenchReport& report, std::ostream& out) {
  out << "\n| layout | msg/s | batch p99 us | WA cumulative | WA steady | "
         "RocksDB Sum W-Amp | space amp (steady) | disk (steady mean) | "
         "index+filter B/live id | new-id "
         "lookup: probes / blocks / us | expired (filter + whole) |\n"
         "|---|---|---|---|---|---|---|---|---|---|---|\n";
  for (const LayoutReport& r : report.layouts) {
    out << absl::StrFormat(
        "| %s | %.0f | %.0f | %.2f | %s | %s | %s | %s | %.2f | %s | %d "
        "|\n",
        LayoutName(r.layout), r.messages_per_second, r.batch_latency.p99,
        r.cumulative_wa, Fixed(r.steady_wa, 2), Fixed(r.rocksdb_sum_wamp, 1),
        Fixed(r.steady_space_amp.value_or(r.space_amp), 2),
        Bytes(r.steady_disk_bytes_mean.value_or(
            static_cast<double>(r.disk_bytes))),
        r.index_filter_bytes_per_live_id, NewIdLookupCell(r.read_cost),
        r.expired_dropped + r.expired_dropped_whole);
  }
}

void PrintText(const BenchReport& report, std::ostream& out) {
  TextHeader(report, out);
  for (const LayoutReport& r : report.layouts) {
    TextLayout(report.options, r, out);
  }
  if (report.layouts.size() > 1) TextSummaryTable(report, out);
}

}  // namespace

void PrintBenchReport(const BenchReport& report, bool json, std::ostream& out) {
  if (json) {
    PrintJson(report, out);
  } else {
    PrintText(report, out);
  }
}

}  // namespace idem::bench
