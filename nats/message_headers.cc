#include "nats/message_headers.h"

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <tuple>

namespace idem::nats {
namespace {

constexpr std::string_view kStatusLinePrefix = "NATS/1.0";
constexpr std::string_view kLineEnd = "\r\n";

bool IsSpace(char c) {
  return c == ' ' || c == '\t' || c == '\v' || c == '\f' || c == '\r' ||
         c == '\n';
}

std::string_view TrimSpaces(std::string_view s) {
  while (!s.empty() && IsSpace(s.front())) s.remove_prefix(1);
  while (!s.empty() && IsSpace(s.back())) s.remove_suffix(1);
  return s;
}

// Writes headers over a list's entries in order, reusing their strings'
// memory, then drops the entries left over (Finish).
class HeaderWriter {
 public:
  explicit HeaderWriter(HeaderList* out) : out_(out) {}

  void Add(std::string_view name, std::string_view value) {
    if (written_ < out_->size()) {
      auto& [old_name, old_value] = (*out_)[written_];
      old_name.assign(name.data(), name.size());
      old_value.assign(value.data(), value.size());
    } else {
      out_->emplace_back(std::piecewise_construct,
                         std::forward_as_tuple(name.data(), name.size()),
                         std::forward_as_tuple(value.data(), value.size()));
    }
    ++written_;
  }
  void Finish() { out_->resize(written_); }

 private:
  HeaderList* const out_;
  size_t written_ = 0;
};

// One "Name: value" line (without its "\r\n") into `out`; false if it is
// not one nats.c reads as such.
bool ParseHeaderLine(std::string_view line, HeaderWriter& out) {
  if (line.empty() || IsSpace(line.front())) return false;  // folded line
  const size_t colon = line.find(':');
  if (colon == std::string_view::npos || colon == 0) return false;
  const std::string_view value = TrimSpaces(line.substr(colon + 1));
  if (value.empty()) return false;
  out.Add(line.substr(0, colon), value);
  return true;
}

// nats.c 3.4's message (src/msg.h, struct __natsMsg): its leading fields,
// which are all this reads. ReceivedHeaderBlock checks each field it can
// against the public accessors before trusting the others.
struct MessageLayout34 {
  void* gc_next;
  void* gc_free;
  const char* subject;
  const char* reply;
  const char* hdr;
  const void* headers;  // the map, once built
  const char* data;
  int data_len;
  int hdr_len;
};

bool LayoutKnown() {
  static const bool known =
      NATS_VERSION_MAJOR == 3 && NATS_VERSION_MINOR == 4 &&
      (nats_GetVersionNumber() >> 8) == (NATS_VERSION_NUMBER >> 8);
  return known;
}

void ReadHeadersFromMap(natsMsg* msg, HeaderList* out) {
  HeaderWriter writer(out);
  const char** keys = nullptr;
  int key_count = 0;
  if (natsMsgHeader_Keys(msg, &keys, &key_count) == NATS_OK) {
    for (int k = 0; k < key_count; ++k) {
      const char** values = nullptr;
      int value_count = 0;
      if (natsMsgHeader_Values(msg, keys[k], &values, &value_count) !=
          NATS_OK) {
        continue;
      }
      for (int v = 0; v < value_count; ++v) writer.Add(keys[k], values[v]);
      free(static_cast<void*>(values));
    }
    free(static_cast<void*>(keys));
  }
  writer.Finish();
}

}  // namespace

bool ParseHeaderBlock(std::string_view block, HeaderList* out) {
  if (block.substr(0, kStatusLinePrefix.size()) != kStatusLinePrefix) {
    return false;
  }
  size_t end = block.find(kLineEnd);  // of the status line
  if (end == std::string_view::npos) return false;
  // A status ("NATS/1.0 503"): nats.c adds it as headers of its own.
  const std::string_view status =
      block.substr(kStatusLinePrefix.size(), end - kStatusLinePrefix.size());
  if (!TrimSpaces(status).empty()) return false;
  HeaderWriter writer(out);
  size_t start = end + kLineEnd.size();
  while (start < block.size()) {
    end = block.find(kLineEnd, start);
    if (end == std::string_view::npos) return false;
    if (end == start) {  // the blank line: it must end the block
      if (end + kLineEnd.size() != block.size()) return false;
      writer.Finish();
      return true;
    }
    if (!ParseHeaderLine(block.substr(start, end - start), writer)) {
      return false;
    }
    start = end + kLineEnd.size();
  }
  return false;
}

std::optional<std::string_view> ReceivedHeaderBlock(natsMsg* msg) {
  if (msg == nullptr || !LayoutKnown()) return std::nullopt;
  MessageLayout34 layout;
  std::memcpy(&layout, msg, sizeof(layout));
  if (layout.subject != natsMsg_GetSubject(msg) ||
      layout.reply != natsMsg_GetReply(msg) ||
      layout.data != natsMsg_GetData(msg) ||
      layout.data_len != natsMsg_GetDataLength(msg) ||
      layout.headers != nullptr || layout.hdr_len < 0) {
    return std::nullopt;
  }
  if (layout.hdr == nullptr || layout.hdr_len == 0) {
    if (layout.hdr != nullptr || layout.hdr_len != 0) return std::nullopt;
    return std::string_view();
  }
  // The block ends where the payload starts (nats.c puts a NUL between them)
  // in the message's one allocation.
  const uintptr_t block_end =
      reinterpret_cast<uintptr_t>(layout.hdr) + layout.hdr_len;
  const uintptr_t data = reinterpret_cast<uintptr_t>(layout.data);
  if (data < block_end || data - block_end > 1) return std::nullopt;
  return std::string_view(layout.hdr, static_cast<size_t>(layout.hdr_len));
}

void ReadHeaders(natsMsg* msg, HeaderList* out) {
  const std::optional<std::string_view> block = ReceivedHeaderBlock(msg);
  if (block.has_value() && block->empty()) {
    out->clear();
    return;
  }
  if (block.has_value() && ParseHeaderBlock(*block, out)) return;
  ReadHeadersFromMap(msg, out);
}

}  // namespace idem::nats
