// The byte encodings idem's keys and values are made of, in one place (as
// LevelDB's util/coding.h): fixed-width little-endian integers (values),
// big-endian integers (keys, so that they sort numerically), and the view
// of a string as a rocksdb::Slice (Slice::ToStringView is the way back).
// Header-only; free functions, all thread-safe.

#ifndef IDEM_ENGINE_CODING_H_
#define IDEM_ENGINE_CODING_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "rocksdb/slice.h"

namespace idem {

// An empty view may have a null data pointer (std::string_view()), which
// RocksDB's comparisons assert against (Slice::compare): it becomes an empty
// Slice, whose data points at "".
inline rocksdb::Slice ToSlice(std::string_view s) {
  return s.data() == nullptr ? rocksdb::Slice()
                             : rocksdb::Slice(s.data(), s.size());
}

// Little-endian, written at `out`. REQUIRES: 4 writable bytes.
inline void EncodeFixed32LE(char* out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out[i] = static_cast<char>(v >> (8 * i));
}

// Little-endian, appended to `out`.
inline void PutFixed32LE(std::string* out, uint32_t v) {
  char buf[4];
  EncodeFixed32LE(buf, v);
  out->append(buf, 4);
}
inline void PutFixed64LE(std::string* out, uint64_t v) {
  char buf[8];
  for (int i = 0; i < 8; ++i) buf[i] = static_cast<char>(v >> (8 * i));
  out->append(buf, 8);
}

// Little-endian. REQUIRES: `p` points to 4 (8) readable bytes.
inline uint32_t GetFixed32LE(const char* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) {
    v |= uint32_t{static_cast<unsigned char>(p[i])} << (8 * i);
  }
  return v;
}
inline uint64_t GetFixed64LE(const char* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) {
    v |= uint64_t{static_cast<unsigned char>(p[i])} << (8 * i);
  }
  return v;
}

// Big-endian, written at `out`. REQUIRES: 4 (8) writable bytes.
inline void PutBigEndian32(char* out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out[i] = static_cast<char>(v >> (24 - 8 * i));
}
inline void PutBigEndian64(char* out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>(v >> (56 - 8 * i));
}

// Big-endian. REQUIRES: `p` points to 4 (8) readable bytes.
inline uint32_t GetBigEndian32(const char* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v = (v << 8) | static_cast<unsigned char>(p[i]);
  return v;
}
inline uint64_t GetBigEndian64(const char* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = (v << 8) | static_cast<unsigned char>(p[i]);
  return v;
}

// A signed int64 (a time in microseconds, say) in 8 bytes whose byte order
// is the numbers' order: big-endian with the sign bit flipped.
inline void AppendOrderedInt64(std::string& out, int64_t v) {
  char bytes[8];
  PutBigEndian64(bytes, static_cast<uint64_t>(v) ^ (uint64_t{1} << 63));
  out.append(bytes, sizeof(bytes));
}
// REQUIRES: `p` points to 8 readable bytes.
inline int64_t GetOrderedInt64(const char* p) {
  return static_cast<int64_t>(GetBigEndian64(p) ^ (uint64_t{1} << 63));
}

}  // namespace idem

#endif  // IDEM_ENGINE_CODING_H_
