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

void JsonLatency(JsonWriter& j, std::string_view key, const LatencySummary& l) {
  j.Key(key);
  j.BeginObject();
  j.Key("count");
  j.Int(l.count);
  j.Key("mean_us");
  j.Number(l.mean);
  j.Key("p50_us");
  j.Number(l.p50);
  j.Key("p99_us");
  j.Number(l.p99);
  j.Key("p999_us");
  j.Number(l.p999);
  j.Key("max_us");
  j.Number(l.max);
  j.EndObject();
}

void JsonLookup(JsonWriter& j, std::string_view key, const LookupCost& c) {
  j.Key(key);
  j.BeginObject();
  j.Key("lookups");
  j.Int(c.lookups);
  j.Key("found");
  j.Int(c.found);
  j.Key("filter_probes");
  j.Number(c.filter_probes);
  j.Key("filter_negatives");
  j.Number(c.filter_negatives);
  j.Key("data_blocks_read");
  j.Number(c.data_blocks_read);
  j.Key("micros");
  j.Number(c.micros);
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
  j.Key("emitted");
  j.Int(static_cast<int64_t>(f->emitted));
  j.Key("acknowledged");
  j.Int(static_cast<int64_t>(f->acknowledged));
  j.Key("pending");
  j.Int(static_cast<int64_t>(f->pending));
  JsonLatency(j, "ack_latency", f->ack_latency);
  j.EndObject();
}

void PrintJson(const BenchReport& report, std::ostream& out) {
  const BenchOptions& o = report.options;
  JsonWriter j;
  j.BeginObject();
  j.Key("date");
  j.String(report.date);
  j.Key("config");
  j.BeginObject();
  j.Key("messages");
  j.Int(o.messages);
  j.Key("duration_seconds");
  j.Number(absl::ToDoubleSeconds(o.duration));
  j.Key("id_shape");
  j.String(ShapeName(o.id_shape));
  j.Key("state_bytes");
  j.Int(o.state_bytes);
  j.Key("duplicate_rate");
  j.Number(o.duplicate_rate);
  j.Key("duplicate_reach");
  j.Int(o.duplicate_reach);
  j.Key("batch");
  j.Int(o.batch);
  j.Key("durability");
  j.String(DurabilityName(o.durability));
  j.Key("ack_durable");
  j.Bool(o.ack_durable);
  j.Key("threads");
  j.Int(o.threads);
  j.Key("window_seconds");
  j.Number(absl::ToDoubleSeconds(o.window));
  j.Key("sim_messages_per_second");
  j.Number(o.sim_messages_per_second);
  j.Key("write_buffer_bytes");
  j.Int(static_cast<int64_t>(o.write_buffer_bytes));
  j.Key("expiry_buckets");
  j.Int(o.expiry_buckets);
  j.Key("detect_conflicts");
  j.Bool(o.detect_conflicts);
  j.Key("emit");
  j.Int(o.emit);
  j.Key("emit_bytes");
  j.Int(o.emit_bytes);
  j.Key("outbox_ack_every");
  j.Int(o.outbox_ack_every);
  j.Key("seed");
  j.Int(static_cast<int64_t>(o.seed));
  j.EndObject();
  j.Key("layouts");
  j.BeginArray();
  for (const LayoutReport& r : report.layouts) {
    j.BeginObject();
    j.Key("layout");
    j.String(LayoutName(r.layout));
    j.Key("messages");
    j.Int(r.messages);
    j.Key("unique_ids");
    j.Int(r.unique_ids);
    j.Key("redeliveries");
    j.Int(r.redeliveries);
    j.Key("expired_redeliveries");
    j.Int(r.expired_redeliveries);
    j.Key("processed");
    j.Int(r.processed);
    j.Key("duplicates");
    j.Int(r.duplicates);
    j.Key("dedupe_errors");
    j.Value(r.dedupe_errors);
    j.Key("wall_seconds");
    j.Number(r.wall_seconds);
    j.Key("messages_per_second");
    j.Number(r.messages_per_second);
    JsonLatency(j, "batch_latency", r.batch_latency);
    JsonLatency(j, "message_latency", r.message_latency);
    j.Key("clock_seconds");
    j.Number(r.clock_seconds);
    j.Key("windows_covered");
    j.Number(r.windows_covered);
    j.Key("user_bytes");
    j.Int(static_cast<int64_t>(r.user_bytes));
    j.Key("wal_bytes");
    j.Int(static_cast<int64_t>(r.wal_bytes));
    j.Key("flush_bytes");
    j.Int(static_cast<int64_t>(r.flush_bytes));
    j.Key("compaction_bytes");
    j.Int(static_cast<int64_t>(r.compaction_bytes));
    j.Key("write_amplification");
    j.Number(r.cumulative_wa);
    j.Key("steady_state_write_amplification");
    j.Value(r.steady_wa);
    j.Key("write_amplification_per_window");
    j.BeginArray();
    for (double w : r.wa_per_window) j.Number(w);
    j.EndArray();
    j.Key("rocksdb_sum_w_amp");
    j.Value(r.rocksdb_sum_wamp);
    j.Key("expired_dropped");
    j.Int(static_cast<int64_t>(r.expired_dropped));
    j.Key("expired_dropped_whole");
    j.Int(static_cast<int64_t>(r.expired_dropped_whole));
    j.Key("live_records");
    j.Int(r.live_records);
    j.Key("estimated_records");
    j.Int(static_cast<int64_t>(r.estimated_records));
    j.Key("logical_live_bytes");
    j.Int(static_cast<int64_t>(r.logical_live_bytes));
    j.Key("live_sst_bytes");
    j.Int(static_cast<int64_t>(r.live_sst_bytes));
    j.Key("disk_bytes");
    j.Int(static_cast<int64_t>(r.disk_bytes));
    j.Key("space_amplification");
    j.Number(r.space_amp);
    j.Key("steady_state_space_amplification");
    j.Value(r.steady_space_amp);
    j.Key("steady_state_disk_bytes_mean");
    j.Value(r.steady_disk_bytes_mean);
    j.Key("steady_state_disk_bytes_max");
    j.Value(r.steady_disk_bytes_max);
    j.Key("memtable_bytes");
    j.Value(r.memtable_bytes);
    j.Key("block_cache_usage");
    j.Value(r.block_cache_usage);
    j.Key("table_readers_bytes");
    j.Int(static_cast<int64_t>(r.table_readers_bytes));
    j.Key("index_filter_bytes_per_live_id");
    j.Number(r.index_filter_bytes_per_live_id);
    j.Key("memory_per_live_id_bytes");
    j.Value(r.memory_per_live_id);
    j.Key("lookup");
    if (r.read_cost.has_value()) {
      j.BeginObject();
      JsonLookup(j, "miss", r.read_cost->miss);
      JsonLookup(j, "hit", r.read_cost->hit);
      j.EndObject();
    } else {
      j.Null();
    }
    JsonOutbox(j, r.outbox);
    if (!r.store_path.empty()) {
      j.Key("store_path");
      j.String(r.store_path);
    }
    j.Key("notes");
    j.BeginArray();
    for (const std::string& n : r.notes) j.String(n);
    j.EndArray();
    j.EndObject();
  }
  j.EndArray();
  j.EndObject();
  out << j.str() << "\n";
}

std::string Fixed(const std::optional<double>& v, int decimals) {
  if (!v.has_value()) return "n/a";
  return absl::StrFormat("%.*f", decimals, *v);
}

std::string Bytes(double b) {
  if (b >= kMiB) return absl::StrFormat("%.1f MiB", b / kMiB);
  if (b >= 1024) return absl::StrFormat("%.1f KiB", b / 1024);
  return absl::StrFormat("%.0f B", b);
}

void PrintText(const BenchReport& report, std::ostream& out) {
  const BenchOptions& o = report.options;
  out << absl::StrFormat(
      "idem-bench %s: %s per layout, ids %s, %.0f%% redeliveries "
      "reaching %d ids back, batch %d, %s%s, %d thread(s), window %s, %s, "
      "memtable %s%s%s\n",
      report.date,
      absl::StrCat(
          o.messages > 0 ? absl::StrCat(o.messages, " messages")
                         : std::string(),
          o.messages > 0 && o.duration > absl::ZeroDuration() ? " or " : "",
          o.duration > absl::ZeroDuration()
              ? absl::StrCat(absl::FormatDuration(o.duration), " wall time")
              : std::string()),
      ShapeName(o.id_shape), o.duplicate_rate * 100, o.duplicate_reach, o.batch,
      DurabilityName(o.durability),
      o.durability == Durability::kBuffered
          ? (o.ack_durable ? " (sync per batch)" : " (never synced)")
          : "",
      o.threads, absl::FormatDuration(o.window),
      o.sim_messages_per_second > 0
          ? absl::StrFormat("simulated clock at %g msg/s",
                            o.sim_messages_per_second)
          : std::string("real clock"),
      Bytes(static_cast<double>(o.write_buffer_bytes)),
      o.expiry_buckets > 0
          ? absl::StrCat(", engine with expiry_buckets=", o.expiry_buckets)
          : std::string(),
      o.emit > 0 ? absl::StrCat(", ", o.emit, " emit(s) of ", o.emit_bytes,
                                " bytes per message, acknowledged ",
                                o.outbox_ack_every > 0
                                    ? absl::StrCat("every ", o.outbox_ack_every,
                                                   " batch(es)")
                                    : std::string("never"))
                 : std::string());
  for (const LayoutReport& r : report.layouts) {
    out << absl::StrFormat("\n[%s]\n", LayoutName(r.layout));
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
        o.steady_windows, Fixed(r.steady_wa, 2), Fixed(r.rocksdb_sum_wamp, 1),
        absl::StrJoin(r.wa_per_window, " ", [](std::string* s, double w) {
          absl::StrAppend(s, absl::StrFormat("%.2f", w));
        }));
    out << absl::StrFormat(
        "  expiry        %d records dropped by the filter, %d in whole "
        "files/families\n"
        "  space         %d live records (RocksDB estimate %d), logical %s, "
        "live SST %s, disk %s, space amp %.2f at the end\n"
        "                steady state (last %d windows): space amp %s, disk "
        "mean %s, max %s\n",
        r.expired_dropped, r.expired_dropped_whole, r.live_records,
        r.estimated_records, Bytes(r.logical_live_bytes),
        Bytes(r.live_sst_bytes), Bytes(r.disk_bytes), r.space_amp,
        o.steady_windows, Fixed(r.steady_space_amp, 2),
        r.steady_disk_bytes_mean.has_value() ? Bytes(*r.steady_disk_bytes_mean)
                                             : "n/a",
        r.steady_disk_bytes_max.has_value()
            ? Bytes(static_cast<double>(*r.steady_disk_bytes_max))
            : "n/a");
    out << absl::StrFormat(
        "  memory        memtables %s, index+filters %s (%.2f bytes per live "
        "id), block cache %s; memtables+index+filters %s bytes per live id\n",
        r.memtable_bytes.has_value()
            ? Bytes(static_cast<double>(*r.memtable_bytes))
            : "n/a",
        Bytes(r.table_readers_bytes), r.index_filter_bytes_per_live_id,
        r.block_cache_usage.has_value()
            ? Bytes(static_cast<double>(*r.block_cache_usage))
            : "n/a",
        Fixed(r.memory_per_live_id, 1));
    if (r.read_cost.has_value()) {
      auto line = [&out](const char* name, const LookupCost& c) {
        out << absl::StrFormat(
            "  lookup %s %.2f filter probes (%.2f negative), %.3f data "
            "blocks read, %.1f us (%d/%d found)\n",
            name, c.filter_probes, c.filter_negatives, c.data_blocks_read,
            c.micros, c.found, c.lookups);
      };
      line("new id ", r.read_cost->miss);
      line("live id", r.read_cost->hit);
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
    for (const std::string& n : r.notes) out << "  note          " << n << "\n";
    if (!r.store_path.empty())
      out << "  store         " << r.store_path << "\n";
  }
  if (report.layouts.size() > 1) {
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
          r.steady_space_amp.has_value() ? Fixed(r.steady_space_amp, 2)
                                         : Fixed(r.space_amp, 2),
          r.steady_disk_bytes_mean.has_value()
              ? Bytes(*r.steady_disk_bytes_mean)
              : Bytes(r.disk_bytes),
          r.index_filter_bytes_per_live_id,
          r.read_cost.has_value()
              ? absl::StrFormat("%.2f / %.3f / %.1f",
                                r.read_cost->miss.filter_probes,
                                r.read_cost->miss.data_blocks_read,
                                r.read_cost->miss.micros)
              : std::string("n/a"),
          r.expired_dropped + r.expired_dropped_whole);
    }
  }
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
