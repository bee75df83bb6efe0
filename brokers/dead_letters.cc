#include "brokers/dead_letters.h"

#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "engine/absl_view.h"
#include "idem/brokers/delivery_loop.h"

namespace idem::brokers {
namespace {

// What a shrunk dead letter keeps of idem.error.
constexpr size_t kShortErrorBytes = 128;
constexpr std::string_view kTruncated = "idem.truncated";

// Adds `what` to the list in `entry`'s idem.truncated header.
void MarkTruncated(OutboxEntry& entry, std::string_view what) {
  for (auto& [name, value] : entry.headers) {
    if (name != kTruncated) continue;
    for (absl::string_view listed : absl::StrSplit(value, ',')) {
      if (listed == AbslView(what)) return;
    }
    absl::StrAppend(&value, ",", AbslView(what));
    return;
  }
  entry.headers.emplace_back(std::string(kTruncated), std::string(what));
}

}  // namespace

std::string BoundedText(std::string_view text, size_t max_bytes, bool* cut) {
  *cut = text.size() > max_bytes;
  if (!*cut) return std::string(text);
  size_t end = max_bytes;
  // Back to the first byte of a character: never half of one.
  while (end > 0 && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) {
    --end;
  }
  return std::string(text.substr(0, end));
}

OutboxEntry DeadLetterOfRefused(const OutboxEntry& entry,
                                const absl::Status& error,
                                std::string_view destination) {
  OutboxEntry dead = entry;
  dead.destination = std::string(destination);
  dead.partition = -1;
  bool cut = false;
  dead.headers.emplace_back(
      "idem.error",
      BoundedText(error.ToString(), kMaxDeadLetterErrorBytes, &cut));
  dead.headers.emplace_back("idem.reason", "refused");
  dead.headers.emplace_back("idem.destination", entry.destination);
  if (cut) MarkTruncated(dead, "error");
  return dead;
}

OutboxEntry Shrunk(const OutboxEntry& dead_letter, int level) {
  OutboxEntry small = dead_letter;
  small.headers.clear();
  bool dropped_headers = false;
  for (const auto& header : dead_letter.headers) {
    if (absl::StartsWith(header.first, "idem.")) {
      small.headers.push_back(header);
    } else {
      dropped_headers = true;
    }
  }
  bool cut_error = false;
  for (auto& [name, value] : small.headers) {
    if (name == "idem.error") {
      bool cut = false;
      value = BoundedText(value, kShortErrorBytes, &cut);
      cut_error = cut_error || cut;
    }
  }
  if (cut_error) MarkTruncated(small, "error");
  if (dropped_headers) MarkTruncated(small, "headers");
  if (level >= 2) {
    small.headers.emplace_back("idem.value.bytes",
                               absl::StrCat(dead_letter.value.size()));
    small.value.clear();
    MarkTruncated(small, "value");
  }
  return small;
}

}  // namespace idem::brokers
