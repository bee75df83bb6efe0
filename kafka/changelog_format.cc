#include "kafka/changelog_format.h"

#include "absl/strings/str_cat.h"
#include "engine/absl_view.h"
#include "engine/coding.h"

namespace idem::kafka {
namespace {

constexpr char kStatePrefix[] = "s/";
constexpr char kOffsetPrefix[] = "o/";
constexpr char kTimerPrefix[] = "t/";
constexpr size_t kPrefixBytes = 2;

// A non-negative decimal spelt without sign or leading zeros (so each value
// has one spelling).
std::optional<int64_t> ParseCount(std::string_view text) {
  if (text.empty() || text.size() > 18 || (text.size() > 1 && text[0] == '0')) {
    return std::nullopt;
  }
  int64_t value = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
    value = value * 10 + (c - '0');
  }
  return value;
}

}  // namespace

std::string DedupeTopicOf(std::string_view changelog_topic) {
  return absl::StrCat(AbslView(changelog_topic), ".dedupe");
}

std::string EncodeMark(const ChangelogMark& mark) {
  return absl::StrCat(mark.epoch, " ", mark.offset);
}

std::optional<ChangelogMark> DecodeMark(std::string_view text) {
  const size_t space = text.find(' ');
  if (space == std::string_view::npos) return std::nullopt;
  std::optional<int64_t> epoch = ParseCount(text.substr(0, space));
  std::optional<int64_t> offset = DecodeOffsetValue(text.substr(space + 1));
  if (!epoch.has_value() || !offset.has_value()) return std::nullopt;
  return ChangelogMark{*epoch, *offset};
}

std::string EncodeCheckpoint(const ChangelogCheckpoint& checkpoint) {
  return absl::StrCat(EncodeMark(checkpoint.mark), " ",
                      checkpoint.changelog_end);
}

std::optional<ChangelogCheckpoint> DecodeCheckpoint(std::string_view text) {
  const size_t space = text.rfind(' ');
  if (space == std::string_view::npos) return std::nullopt;
  std::optional<ChangelogMark> mark = DecodeMark(text.substr(0, space));
  std::optional<int64_t> end = ParseCount(text.substr(space + 1));
  if (!mark.has_value() || !end.has_value()) return std::nullopt;
  return ChangelogCheckpoint{*mark, *end};
}

std::optional<int64_t> DecodeFormatVersion(std::string_view text) {
  std::optional<int64_t> version = ParseCount(text);
  if (!version.has_value() || *version < 1) return std::nullopt;
  return version;
}

std::optional<int64_t> DecodeOffsetValue(std::string_view value) {
  if (value == "-1") return -1;
  return ParseCount(value);
}

std::string StateRecordKey(std::string_view state_key) {
  return absl::StrCat(kStatePrefix, AbslView(state_key));
}

std::string OffsetRecordKey(int64_t epoch) {
  return absl::StrCat(kOffsetPrefix, epoch);
}

std::string TimerRecordKey(std::string_view timer_key) {
  return absl::StrCat(kTimerPrefix, AbslView(timer_key));
}

std::optional<ChangelogKey> DecodeChangelogKey(std::string_view key) {
  ChangelogKey decoded;
  if (key.starts_with(kTimerPrefix)) {
    decoded.kind = ChangelogKey::Kind::kTimer;
    decoded.state_key = key.substr(kPrefixBytes);
    return decoded;
  }
  if (key.starts_with(kStatePrefix)) {
    decoded.kind = ChangelogKey::Kind::kState;
    decoded.state_key = key.substr(kPrefixBytes);
    return decoded;
  }
  if (key.starts_with(kOffsetPrefix)) {
    std::optional<int64_t> epoch = ParseCount(key.substr(kPrefixBytes));
    if (!epoch.has_value()) return std::nullopt;
    decoded.kind = ChangelogKey::Kind::kOffset;
    decoded.epoch = *epoch;
    return decoded;
  }
  return std::nullopt;
}

std::string EncodeTimeHeader(absl::Time time) {
  return absl::StrCat(absl::ToUnixMicros(time));
}

std::optional<absl::Time> DecodeTimeHeader(std::string_view text) {
  const bool negative = text.starts_with('-');
  std::optional<int64_t> magnitude =
      ParseCount(negative ? text.substr(1) : text);
  if (!magnitude.has_value() || (negative && *magnitude == 0)) {
    return std::nullopt;
  }
  return absl::FromUnixMicros(negative ? -*magnitude : *magnitude);
}

std::string EncodeTimerValue(const ChangelogTimer& timer) {
  std::string value(1, static_cast<char>(timer.domain));
  PutFixed64LE(&value,
               static_cast<uint64_t>(absl::ToUnixMicros(timer.fire_at)));
  value.append(timer.payload);
  return value;
}

std::optional<ChangelogTimer> DecodeTimerValue(std::string_view value) {
  if (value.size() < 9) return std::nullopt;
  const auto domain = static_cast<TimeDomain>(value[0]);
  if (domain != TimeDomain::kEvent && domain != TimeDomain::kProcessing) {
    return std::nullopt;
  }
  const uint64_t micros = GetFixed64LE(value.data() + 1);
  return ChangelogTimer{domain,
                        absl::FromUnixMicros(static_cast<int64_t>(micros)),
                        std::string(value.substr(9))};
}

std::string EncodeDedupeValue(absl::Time expires_at, std::string_view result) {
  std::string value;
  PutFixed64LE(&value, static_cast<uint64_t>(absl::ToUnixMicros(expires_at)));
  value.append(result);
  return value;
}

std::optional<DedupeValue> DecodeDedupeValue(std::string_view value) {
  if (value.size() < 8) return std::nullopt;
  const uint64_t micros = GetFixed64LE(value.data());
  return DedupeValue{absl::FromUnixMicros(static_cast<int64_t>(micros)),
                     value.substr(8)};
}

}  // namespace idem::kafka
