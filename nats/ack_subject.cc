#include "nats/ack_subject.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace idem::nats {
namespace {

// Nineteen decimal digits cannot overflow a uint64_t; a twentieth can.
constexpr size_t kSafeDigits = 19;

// The eight ASCII digits at `p` as a number (p[0] the most significant),
// or false if any of them is not a digit. Eight at once in one 64-bit word
// (timestamps have nineteen digits; a digit at a time costs about three
// times the instructions). REQUIRES: a little-endian machine.
bool ReadEightDigits(const char* p, uint64_t* out) {
  constexpr uint64_t kHighNibbles = 0xF0F0F0F0F0F0F0F0;
  constexpr uint64_t kZeros = 0x3030303030303030;  // '0' in every byte
  constexpr uint64_t kSixes = 0x0606060606060606;
  uint64_t chunk;
  std::memcpy(&chunk, p, sizeof(chunk));  // p[0] in the lowest byte
  // A digit is 0x30-0x39: its high nibble is 3, and stays 3 when 6 is
  // added (0x3A-0x3F would carry into it).
  if ((chunk & kHighNibbles) != kZeros ||
      ((chunk + kSixes) & kHighNibbles) != kZeros) {
    return false;
  }
  uint64_t v = chunk - kZeros;  // a digit's value in each byte
  // Join neighbours, the more significant (lower byte) times the base:
  // pairs in 16-bit lanes, then fours in 32-bit lanes, then all eight.
  // No lane overflows (99 < 2^8, 9999 < 2^16, 99999999 < 2^32).
  v = (v * 10 + (v >> 8)) & 0x00FF00FF00FF00FF;
  v = (v * 100 + (v >> 16)) & 0x0000FFFF0000FFFF;
  v = (v * 10000 + (v >> 32)) & 0x00000000FFFFFFFF;
  *out = v;
  return true;
}

// The decimal number [begin, end) spells: digits only, not empty, no
// overflow.
bool ReadDecimal(const char* begin, const char* end, uint64_t* out) {
  const size_t size = static_cast<size_t>(end - begin);
  if (size == 0 || size > kSafeDigits + 1) return false;
  const char* const safe_end = begin + std::min(size, kSafeDigits);
  uint64_t value = 0;
  const char* at = begin;
  if constexpr (std::endian::native == std::endian::little) {
    for (uint64_t eight = 0; safe_end - at >= 8; at += 8) {
      if (!ReadEightDigits(at, &eight)) return false;
      value = value * 100000000 + eight;
    }
  }
  for (; at != safe_end; ++at) {
    const uint64_t digit =
        static_cast<uint64_t>(static_cast<unsigned char>(*at)) - '0';
    if (digit > 9) return false;
    value = value * 10 + digit;
  }
  if (at != end) {  // the twentieth digit
    const uint64_t digit =
        static_cast<uint64_t>(static_cast<unsigned char>(*at)) - '0';
    if (digit > 9 || __builtin_mul_overflow(value, uint64_t{10}, &value) ||
        __builtin_add_overflow(value, digit, &value)) {
      return false;
    }
  }
  *out = value;
  return true;
}

}  // namespace

std::optional<AckSubject> ParseAckSubject(std::string_view reply) {
  constexpr std::string_view kPrefix = "$JS.ACK.";
  if (reply.size() < kPrefix.size() ||
      std::memcmp(reply.data(), kPrefix.data(), kPrefix.size()) != 0) {
    return std::nullopt;
  }
  // Where each token after the prefix starts: at most 11 tokens (13 with
  // the prefix's two).
  constexpr size_t kMaxTokens = 11;
  std::array<const char*, kMaxTokens> starts;
  const char* const end = reply.data() + reply.size();
  size_t tokens = 0;
  for (const char* at = reply.data() + kPrefix.size();;) {
    if (tokens == kMaxTokens) return std::nullopt;
    starts[tokens++] = at;
    const void* dot = std::memchr(at, '.', static_cast<size_t>(end - at));
    if (dot == nullptr) break;
    at = static_cast<const char*>(dot) + 1;
  }
  // 7 tokens, or 9 to 11 (<domain>.<account hash> first).
  if (tokens < 7 || tokens == 8) return std::nullopt;
  const size_t first = tokens == 7 ? 2 : 4;       // <delivered>'s token
  auto read = [&](size_t token, uint64_t* out) {  // REQUIRES: token < tokens
    const char* const token_end =
        token + 1 < tokens ? starts[token + 1] - 1 : end;  // at its dot
    return ReadDecimal(starts[token], token_end, out);
  };
  AckSubject parsed;
  uint64_t timestamp = 0;
  if (!read(first, &parsed.delivered) ||
      !read(first + 1, &parsed.stream_sequence) ||
      !read(first + 3, &timestamp) || timestamp > uint64_t{INT64_MAX}) {
    return std::nullopt;
  }
  parsed.timestamp = static_cast<int64_t>(timestamp);
  return parsed;
}

}  // namespace idem::nats
