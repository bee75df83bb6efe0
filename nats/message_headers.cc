#include "nats/message_headers.h"

#include <cstdint>
#include <cstdlib>
#include <cstring>
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

// One "Name: value" line (without its "\r\n") into `out`; false if it is
// not one nats.c reads as such.
bool ParseHeaderLine(std::string_view line, HeaderList* out) {
  if (line.empty() || IsSpace(line.front())) return false;  // folded line
  const size_t colon = line.find(':');
  if (colon == std::string_view::npos || colon == 0) return false;
  const std::string_view value = TrimSpaces(line.substr(colon + 1));
  if (value.empty()) return false;
  out->emplace_back(std::piecewise_construct,
                    std::forward_as_tuple(line.data(), colon),
                    std::forward_as_tuple(value.data(), value.size()));
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

void AppendHeadersFromMap(natsMsg* msg, HeaderList* out) {
  const char** keys = nullptr;
  int key_count = 0;
  if (natsMsgHeader_Keys(msg, &keys, &key_count) != NATS_OK) return;
  for (int k = 0; k < key_count; ++k) {
    const char** values = nullptr;
    int value_count = 0;
    if (natsMsgHeader_Values(msg, keys[k], &values, &value_count) != NATS_OK) {
      continue;
    }
    for (int v = 0; v < value_count; ++v) {
      out->emplace_back(keys[k], values[v]);
    }
    free(static_cast<void*>(values));
  }
  free(static_cast<void*>(keys));
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
  const size_t size_before = out->size();
  size_t start = end + kLineEnd.size();
  while (start < block.size()) {
    end = block.find(kLineEnd, start);
    if (end == std::string_view::npos) break;
    if (end == start) {  // the blank line: it must end the block
      if (end + kLineEnd.size() == block.size()) return true;
      break;
    }
    if (!ParseHeaderLine(block.substr(start, end - start), out)) break;
    start = end + kLineEnd.size();
  }
  out->resize(size_before);
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

void AppendHeaders(natsMsg* msg, HeaderList* out) {
  const std::optional<std::string_view> block = ReceivedHeaderBlock(msg);
  if (block.has_value() && (block->empty() || ParseHeaderBlock(*block, out))) {
    return;
  }
  AppendHeadersFromMap(msg, out);
}

}  // namespace idem::nats
