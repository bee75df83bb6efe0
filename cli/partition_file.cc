#include "cli/partition_file.h"

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "nlohmann/json.hpp"
#include "util/json_writer.h"

namespace idem::cli {
namespace {

using Json = nlohmann::json;
using util::JsonWriter;

std::string PartitionLine(const PartitionSnapshot& snapshot) {
  JsonWriter j;
  j.BeginObject();
  j.Field("kind", "partition");
  j.Key("source");
  j.Bytes(snapshot.source);
  j.Field("partition", snapshot.partition);
  j.Field("offset", snapshot.offset);
  j.EndObject();
  return j.str();
}

std::string StateLine(std::string_view key, std::string_view value) {
  JsonWriter j;
  j.BeginObject();
  j.Field("kind", "state");
  j.Key("key");
  j.Bytes(key);
  j.Key("value");
  j.Bytes(value);
  j.EndObject();
  return j.str();
}

std::string DedupeLine(const PartitionRecord& record) {
  JsonWriter j;
  j.BeginObject();
  j.Field("kind", "dedupe");
  j.Field("id_hash", absl::BytesToHexString(record.id_hash));
  j.Field("expires_at_unix_micros", absl::ToUnixMicros(record.expires_at));
  j.Key("result");
  j.Bytes(record.result);
  j.EndObject();
  return j.str();
}

std::string StreamTimeLine(absl::Time stream_time) {
  JsonWriter j;
  j.BeginObject();
  j.Field("kind", "stream_time");
  j.Field("unix_micros", absl::ToUnixMicros(stream_time));
  j.EndObject();
  return j.str();
}

std::string TimerLine(const TimerFire& timer) {
  JsonWriter j;
  j.BeginObject();
  j.Field("kind", "timer");
  j.Field("domain",
          timer.domain == TimeDomain::kEvent ? "event" : "processing");
  j.Key("timer_key");
  j.Bytes(timer.timer_key);
  j.Field("fire_at_unix_micros", absl::ToUnixMicros(timer.fire_at));
  j.Key("payload");
  j.Bytes(timer.payload);
  j.EndObject();
  return j.str();
}

std::string EndLine(const PartitionSnapshot& snapshot) {
  JsonWriter j;
  j.BeginObject();
  j.Field("kind", "end");
  j.Field("state_entries", snapshot.entries.size());
  j.Field("dedupe_records", snapshot.records.size());
  j.EndObject();
  return j.str();
}

// The bytes a JSON string in the one-code-point-per-byte convention stands
// for (nlohmann::json holds it as UTF-8); nullopt if `v` is not a string or
// holds a code point above U+00FF.
std::optional<std::string> JsonBytes(const Json& v) {
  if (!v.is_string()) return std::nullopt;
  const std::string& utf8 = v.get_ref<const std::string&>();
  std::string bytes;
  bytes.reserve(utf8.size());
  for (size_t i = 0; i < utf8.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(utf8[i]);
    if (c < 0x80) {
      bytes.push_back(static_cast<char>(c));
    } else if ((c == 0xc2 || c == 0xc3) && i + 1 < utf8.size()) {
      const unsigned char next = static_cast<unsigned char>(utf8[++i]);
      bytes.push_back(static_cast<char>(((c & 0x03) << 6) | (next & 0x3f)));
    } else {
      return std::nullopt;
    }
  }
  return bytes;
}

// kInvalidArgument unless `line` has exactly the members `names`.
absl::Status ExpectMembers(const Json& line,
                           std::initializer_list<const char*> names) {
  for (const char* name : names) {
    if (!line.contains(name)) {
      return absl::InvalidArgumentError(
          absl::StrCat("missing member \"", name, "\""));
    }
  }
  for (const auto& item : line.items()) {
    if (std::find(names.begin(), names.end(), item.key()) == names.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("unexpected member ", util::JsonQuote(item.key())));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> BytesMember(const Json& line, const char* name) {
  std::optional<std::string> bytes = JsonBytes(line.at(name));
  if (!bytes.has_value()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "\"", name, "\" must be a string of code points up to U+00FF"));
  }
  return *bytes;
}

absl::StatusOr<int64_t> IntMember(const Json& line, const char* name,
                                  int64_t min, int64_t max) {
  const Json& v = line.at(name);
  const bool in_int64 =
      v.is_number_integer() &&
      (!v.is_number_unsigned() ||
       v.get<uint64_t>() <=
           static_cast<uint64_t>(std::numeric_limits<int64_t>::max()));
  if (!in_int64 || v.get<int64_t>() < min || v.get<int64_t>() > max) {
    return absl::InvalidArgumentError(absl::StrCat(
        "\"", name, "\" must be an integer from ", min, " to ", max));
  }
  return v.get<int64_t>();
}

absl::Status ParsePartitionLine(const Json& line, PartitionSnapshot& out) {
  if (absl::Status s =
          ExpectMembers(line, {"kind", "source", "partition", "offset"});
      !s.ok()) {
    return s;
  }
  absl::StatusOr<std::string> source = BytesMember(line, "source");
  if (!source.ok()) return source.status();
  if (source->empty()) {
    return absl::InvalidArgumentError("\"source\" must not be empty");
  }
  absl::StatusOr<int64_t> partition =
      IntMember(line, "partition", 0, std::numeric_limits<int32_t>::max());
  if (!partition.ok()) return partition.status();
  out.source = *std::move(source);
  out.partition = static_cast<int32_t>(*partition);
  if (!line.at("offset").is_null()) {
    absl::StatusOr<int64_t> offset =
        IntMember(line, "offset", 0, std::numeric_limits<int64_t>::max() - 1);
    if (!offset.ok()) return offset.status();
    out.offset = *offset;
  }
  return absl::OkStatus();
}

absl::Status ParseStateLine(const Json& line, PartitionSnapshot& out) {
  if (absl::Status s = ExpectMembers(line, {"kind", "key", "value"}); !s.ok()) {
    return s;
  }
  absl::StatusOr<std::string> key = BytesMember(line, "key");
  if (!key.ok()) return key.status();
  absl::StatusOr<std::string> value = BytesMember(line, "value");
  if (!value.ok()) return value.status();
  out.entries.emplace_back(*std::move(key), *std::move(value));
  return absl::OkStatus();
}

absl::Status ParseDedupeLine(const Json& line, PartitionSnapshot& out) {
  if (absl::Status s = ExpectMembers(
          line, {"kind", "id_hash", "expires_at_unix_micros", "result"});
      !s.ok()) {
    return s;
  }
  const Json& hash = line.at("id_hash");
  const bool hex =
      hash.is_string() && hash.get_ref<const std::string&>().size() == 32 &&
      std::all_of(hash.get_ref<const std::string&>().begin(),
                  hash.get_ref<const std::string&>().end(), [](char c) {
                    return absl::ascii_isdigit(c) || (c >= 'a' && c <= 'f');
                  });
  if (!hex) {
    return absl::InvalidArgumentError(
        "\"id_hash\" must be 32 lowercase hex digits");
  }
  absl::StatusOr<int64_t> expiry = IntMember(
      line, "expires_at_unix_micros", std::numeric_limits<int64_t>::min(),
      std::numeric_limits<int64_t>::max());
  if (!expiry.ok()) return expiry.status();
  absl::StatusOr<std::string> result = BytesMember(line, "result");
  if (!result.ok()) return result.status();
  out.records.push_back(
      PartitionRecord{absl::HexStringToBytes(hash.get<std::string>()),
                      absl::FromUnixMicros(*expiry), *std::move(result)});
  return absl::OkStatus();
}

absl::Status ParseStreamTimeLine(const Json& line, PartitionSnapshot& out) {
  if (absl::Status s = ExpectMembers(line, {"kind", "unix_micros"}); !s.ok()) {
    return s;
  }
  if (out.stream_time != absl::InfinitePast()) {
    return absl::InvalidArgumentError("a second \"stream_time\" line");
  }
  absl::StatusOr<int64_t> micros =
      IntMember(line, "unix_micros", std::numeric_limits<int64_t>::min() + 1,
                std::numeric_limits<int64_t>::max() - 1);
  if (!micros.ok()) return micros.status();
  out.stream_time = absl::FromUnixMicros(*micros);
  return absl::OkStatus();
}

absl::Status ParseTimerLine(const Json& line, PartitionSnapshot& out) {
  if (absl::Status s = ExpectMembers(line, {"kind", "domain", "timer_key",
                                            "fire_at_unix_micros", "payload"});
      !s.ok()) {
    return s;
  }
  TimerFire timer;
  timer.source = out.source;
  timer.partition = out.partition;
  const Json& domain = line.at("domain");
  if (domain == "event") {
    timer.domain = TimeDomain::kEvent;
  } else if (domain == "processing") {
    timer.domain = TimeDomain::kProcessing;
  } else {
    return absl::InvalidArgumentError(
        "\"domain\" must be \"event\" or \"processing\"");
  }
  absl::StatusOr<std::string> key = BytesMember(line, "timer_key");
  if (!key.ok()) return key.status();
  absl::StatusOr<int64_t> fire_at = IntMember(
      line, "fire_at_unix_micros", std::numeric_limits<int64_t>::min() + 1,
      std::numeric_limits<int64_t>::max() - 1);
  if (!fire_at.ok()) return fire_at.status();
  absl::StatusOr<std::string> payload = BytesMember(line, "payload");
  if (!payload.ok()) return payload.status();
  timer.timer_key = *std::move(key);
  timer.fire_at = absl::FromUnixMicros(*fire_at);
  timer.payload = *std::move(payload);
  out.timers.push_back(std::move(timer));
  return absl::OkStatus();
}

absl::Status ParseEndLine(const Json& line, const PartitionSnapshot& out) {
  if (absl::Status s =
          ExpectMembers(line, {"kind", "state_entries", "dedupe_records"});
      !s.ok()) {
    return s;
  }
  const int64_t max = std::numeric_limits<int64_t>::max();
  absl::StatusOr<int64_t> entries = IntMember(line, "state_entries", 0, max);
  if (!entries.ok()) return entries.status();
  absl::StatusOr<int64_t> records = IntMember(line, "dedupe_records", 0, max);
  if (!records.ok()) return records.status();
  if (static_cast<uint64_t>(*entries) != out.entries.size() ||
      static_cast<uint64_t>(*records) != out.records.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("counts ", *entries, " state entries and ", *records,
                     " dedupe records, but the file holds ", out.entries.size(),
                     " and ", out.records.size()));
  }
  return absl::OkStatus();
}

// How ReadLine ended.
enum class LineRead { kLine, kEnd, kTooLong };

// Reads the next line of `in` into `line`, without its newline; kEnd at the
// end of the input, kTooLong (having read max_bytes + 1 bytes of it) for a
// line longer than `max_bytes`.
LineRead ReadLine(std::istream& in, size_t max_bytes, std::string& line) {
  line.clear();
  for (;;) {
    const int c = in.get();
    if (c == std::char_traits<char>::eof()) {
      return line.empty() ? LineRead::kEnd : LineRead::kLine;
    }
    if (c == '\n') return LineRead::kLine;
    if (line.size() == max_bytes) return LineRead::kTooLong;
    line.push_back(static_cast<char>(c));
  }
}

// `text` parsed as JSON (discarded if it is not JSON); `repeated` is set if
// an object in it names a member twice, which nlohmann::json would
// otherwise resolve silently by keeping the last.
Json ParseLine(const std::string& text, bool& repeated) {
  std::vector<std::vector<std::string>> members;  // per open object
  repeated = false;
  auto watch = [&](int /*depth*/, Json::parse_event_t event, Json& parsed) {
    switch (event) {
      case Json::parse_event_t::object_start:
        members.emplace_back();
        break;
      case Json::parse_event_t::object_end:
        if (!members.empty()) members.pop_back();
        break;
      case Json::parse_event_t::key: {
        std::vector<std::string>& names = members.back();
        const std::string& name = parsed.get_ref<const std::string&>();
        if (std::find(names.begin(), names.end(), name) != names.end()) {
          repeated = true;
        }
        names.push_back(name);
        break;
      }
      default:
        break;
    }
    return true;
  };
  return Json::parse(text, watch, /*allow_exceptions=*/false);
}

}  // namespace

absl::Status WritePartitionFile(const PartitionSnapshot& snapshot,
                                const std::string& path) {
  std::error_code ec;
  if (std::filesystem::exists(path, ec) || ec) {
    return absl::AlreadyExistsError(
        absl::StrCat(path, " already exists (export writes a new file)"));
  }
  std::vector<std::string> lines;
  lines.reserve(snapshot.entries.size() + snapshot.records.size() + 2);
  lines.push_back(PartitionLine(snapshot));
  for (const auto& [key, value] : snapshot.entries) {
    lines.push_back(StateLine(key, value));
  }
  for (const PartitionRecord& record : snapshot.records) {
    lines.push_back(DedupeLine(record));
  }
  // Only when there are some: files without them stay readable by builds
  // before timers.
  if (snapshot.stream_time != absl::InfinitePast()) {
    lines.push_back(StreamTimeLine(snapshot.stream_time));
  }
  for (const TimerFire& timer : snapshot.timers) {
    lines.push_back(TimerLine(timer));
  }
  lines.push_back(EndLine(snapshot));
  for (size_t i = 0; i < lines.size(); ++i) {
    if (lines[i].size() > kMaxPartitionFileLineBytes) {
      return absl::InvalidArgumentError(absl::StrCat(
          "line ", i + 1, " of the export would be ", lines[i].size(),
          " bytes, over the limit of ", kMaxPartitionFileLineBytes,
          " that import reads (a state value or result of about 10 MiB or "
          "more); nothing written"));
    }
  }
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  if (!file) {
    return absl::UnavailableError(absl::StrCat("cannot create ", path));
  }
  for (const std::string& line : lines) file << line << "\n";
  file.close();
  if (!file) {
    std::filesystem::remove(path, ec);  // best effort: the error says why
    return absl::UnavailableError(absl::StrCat("cannot write ", path));
  }
  return absl::OkStatus();
}

absl::StatusOr<PartitionSnapshot> ReadPartitionFile(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) return absl::NotFoundError(absl::StrCat("cannot open ", path));
  PartitionSnapshot snapshot;
  std::string text;
  int number = 0;
  bool ended = false;
  for (;;) {
    const LineRead read = ReadLine(file, kMaxPartitionFileLineBytes, text);
    if (read == LineRead::kEnd) {
      if (file.bad()) {
        return absl::UnavailableError(absl::StrCat("cannot read ", path));
      }
      break;
    }
    ++number;
    auto malformed = [&](absl::string_view why) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": line ", number, ": ", why));
    };
    if (read == LineRead::kTooLong) {
      return malformed(absl::StrCat("longer than the limit of ",
                                    kMaxPartitionFileLineBytes, " bytes"));
    }
    if (ended) return malformed("a line after the \"end\" line");
    bool repeated = false;
    const Json line = ParseLine(text, repeated);
    if (line.is_discarded() || !line.is_object()) {
      return malformed("not a JSON object");
    }
    if (repeated) return malformed("a member appears twice in an object");
    const auto kind = line.find("kind");
    if (kind == line.end() || !kind->is_string()) {
      return malformed("no \"kind\" string");
    }
    const std::string& k = kind->get_ref<const std::string&>();
    absl::Status s;
    if (number == 1 && k != "partition") {
      return malformed("the first line must be the \"partition\" line");
    } else if (k == "partition") {
      if (number != 1) return malformed("a second \"partition\" line");
      s = ParsePartitionLine(line, snapshot);
    } else if (k == "state") {
      s = ParseStateLine(line, snapshot);
    } else if (k == "dedupe") {
      s = ParseDedupeLine(line, snapshot);
    } else if (k == "stream_time") {
      s = ParseStreamTimeLine(line, snapshot);
    } else if (k == "timer") {
      s = ParseTimerLine(line, snapshot);
    } else if (k == "end") {
      s = ParseEndLine(line, snapshot);
      ended = true;
    } else {
      return malformed(absl::StrCat("unknown kind ", util::JsonQuote(k)));
    }
    if (!s.ok()) return malformed(s.message());
  }
  if (!ended) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": line ", number + 1,
        ": missing the \"end\" line (the file is empty or truncated)"));
  }
  return snapshot;
}

}  // namespace idem::cli
