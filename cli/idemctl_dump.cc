// idem-ctl's subcommands dump and verify: every stored item of the store,
// or of the shard --shard names, as JSON lines or counted.

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "cli/idemctl_request.h"
#include "idem/engine.h"
#include "util/json_writer.h"

namespace idem::cli::idemctl {
namespace {

using util::JsonWriter;

std::string FormatUtc(absl::Time t) {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%E6SZ", t, absl::UTCTimeZone());
}

// One line of `dump`: the entry as a JSON object; keys, values and results
// as byte strings (JsonQuoteBytes); on a sharded store, "shard" first.
std::string DumpEntryJson(const DumpEntry& e, std::optional<int> shard) {
  JsonWriter j;
  j.BeginObject();
  if (shard.has_value()) j.Field("shard", *shard);
  switch (e.kind) {
    case DumpEntry::Kind::kDedupe:
      j.Field("kind", "dedupe");
      j.Key("key");
      j.Bytes(e.key);
      j.Key("result");
      j.Bytes(e.value);
      j.Field("expires_at", FormatUtc(e.expires_at));
      j.Field("expires_at_unix_micros", absl::ToUnixMicros(e.expires_at));
      j.Field("expired", e.expired);
      j.Field("record_version", e.record_version);
      if (e.first_processed_at != absl::InfinitePast()) {
        j.Field("first_processed_at", FormatUtc(e.first_processed_at));
      }
      if (e.fingerprint.has_value()) {
        j.Field("fingerprint", absl::StrFormat("%016x", *e.fingerprint));
      }
      if (!e.failure.ok()) {
        j.Field("failure_code", absl::StatusCodeToString(e.failure.code()));
        j.Key("failure");
        const absl::string_view message = e.failure.message();
        j.Bytes(std::string_view(message.data(), message.size()));
      }
      if (!e.source.empty() || e.partition != 0) {  // partition-scoped
        j.Key("source");
        j.Bytes(e.source);
        j.Field("partition", e.partition);
      }
      break;
    case DumpEntry::Kind::kState:
      j.Field("kind", "state");
      j.Key("key");
      j.Bytes(e.key);
      j.Key("value");
      j.Bytes(e.value);
      if (e.expires_at != absl::InfiniteFuture() &&
          e.expires_at != absl::InfinitePast()) {  // a value with a TTL
        j.Field("expires_at", FormatUtc(e.expires_at));
        j.Field("expires_at_unix_micros", absl::ToUnixMicros(e.expires_at));
        j.Field("expired", e.expired);
      }
      break;
    case DumpEntry::Kind::kOffset:
      j.Field("kind", "offset");
      j.Key("source");
      j.Bytes(e.key);
      j.Field("partition", e.partition);
      j.Field("offset", e.offset);
      break;
    case DumpEntry::Kind::kOutbox:
      j.Field("kind", "outbox");
      j.Field("position", e.position);
      j.Key("message_id");
      j.Bytes(e.message_id);
      j.Key("destination");
      j.Bytes(e.destination);
      j.Field("partition", e.partition);
      j.Key("key");
      j.Bytes(e.key);
      j.Key("value");
      j.Bytes(e.value);
      j.Key("headers");
      j.BeginArray();
      for (const auto& [name, value] : e.headers) {
        j.BeginArray();
        j.Bytes(name);
        j.Bytes(value);
        j.EndArray();
      }
      j.EndArray();
      break;
  }
  j.EndObject();
  return j.str();
}

}  // namespace

int RunDump(Engine& engine, const Request& r, std::ostream& out,
            std::ostream& err) {
  absl::Status s = ForEachShard(engine, r, [&](int index, Engine& shard) {
    const std::optional<int> label =
        r.shard_count > 1 ? std::optional<int>(index) : std::nullopt;
    return shard.Dump([&out, label](const DumpEntry& e) {
      out << DumpEntryJson(e, label) << "\n";
      return out.good() ? absl::OkStatus()
                        : absl::UnavailableError("output stream failed");
    });
  });
  if (!s.ok()) return Fail(err, "dumping the store", s);
  return kExitOk;
}

int RunVerify(Engine& engine, const Request& r, std::ostream& out,
              std::ostream& err) {
  uint64_t dedupe = 0, expired = 0, state = 0, offsets = 0, outbox = 0;
  auto count = [&](const DumpEntry& e) {
    switch (e.kind) {
      case DumpEntry::Kind::kDedupe:
        ++dedupe;
        if (e.expired) ++expired;
        break;
      case DumpEntry::Kind::kState:
        ++state;
        break;
      case DumpEntry::Kind::kOffset:
        ++offsets;
        break;
      case DumpEntry::Kind::kOutbox:
        ++outbox;
        break;
    }
    return absl::OkStatus();
  };
  absl::Status s = ForEachShard(
      engine, r, [&count](int, Engine& shard) { return shard.Dump(count); });
  if (r.args.json) {
    JsonWriter j;
    j.BeginObject();
    j.Field("intact", s.ok());
    if (s.ok()) {
      j.Field("dedupe_records", dedupe);
      j.Field("expired_dedupe_records", expired);
      j.Field("state_entries", state);
      j.Field("offsets", offsets);
      j.Field("outbox_entries", outbox);
    } else {
      j.Field("error", s.ToString());
    }
    j.EndObject();
    out << j.str() << "\n";
  }
  if (!s.ok()) return Fail(err, "the store is damaged", s);
  if (!r.args.json) {
    out << absl::StrFormat(
        "intact: %d dedupe records (%d expired), %d state entries, %d "
        "offsets, %d outbox entries\n",
        dedupe, expired, state, offsets, outbox);
  }
  return kExitOk;
}

}  // namespace idem::cli::idemctl
