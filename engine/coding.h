// The byte encodings idem's keys and values are made of, in one place (as
// LevelDB's util/coding.h): fixed-width little-endian integers (values),
// big-endian integers (keys, so that they sort numerically), and the view
// of a string as a rocksdb::Slice (Slice::ToStringView is the way back).
// Header-only; free functions, all thread-safe.

#ifndef IDEM_ENGINE_CODING_H_
#define IDEM_ENGINE_CODING_H_

#include <bit>
#include <cstdint>
#include <cstring>
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

namespace coding_internal {

// Each encoding is one load or store of the whole integer, byte-swapped when
// the machine's order is not the encoding's: a loop over the bytes compiles
// to a loop at -O2, eight times the work on every value and key read.
template <typename T>
T Load(const char* p) {
  T v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}
template <typename T>
void Store(char* out, T v) {
  std::memcpy(out, &v, sizeof(v));
}
inline uint32_t ByteSwap(uint32_t v) { return __builtin_bswap32(v); }
inline uint64_t ByteSwap(uint64_t v) { return __builtin_bswap64(v); }
// Converts between the machine's order and little-endian (either way).
template <typename T>
T LittleEndian(T v) {
  if constexpr (std::endian::native == std::endian::little) return v;
  return ByteSwap(v);
}
// Converts between the machine's order and big-endian (either way).
template <typename T>
T BigEndian(T v) {
  if constexpr (std::endian::native == std::endian::big) return v;
  return ByteSwap(v);
}

}  // namespace coding_internal

// Little-endian, written at `out`. REQUIRES: 4 (8) writable bytes.
inline void EncodeFixed32LE(char* out, uint32_t v) {
  coding_internal::Store(out, coding_internal::LittleEndian(v));
}
inline void EncodeFixed64LE(char* out, uint64_t v) {
  coding_internal::Store(out, coding_internal::LittleEndian(v));
}

// Little-endian, appended to `out`.
inline void PutFixed32LE(std::string* out, uint32_t v) {
  char buf[4];
  EncodeFixed32LE(buf, v);
  out->append(buf, 4);
}
inline void PutFixed64LE(std::string* out, uint64_t v) {
  char buf[8];
  EncodeFixed64LE(buf, v);
  out->append(buf, 8);
}

// Little-endian. REQUIRES: `p` points to 4 (8) readable bytes.
inline uint32_t GetFixed32LE(const char* p) {
  return coding_internal::LittleEndian(coding_internal::Load<uint32_t>(p));
}
inline uint64_t GetFixed64LE(const char* p) {
  return coding_internal::LittleEndian(coding_internal::Load<uint64_t>(p));
}

// Big-endian, written at `out`. REQUIRES: 4 (8) writable bytes.
inline void PutBigEndian32(char* out, uint32_t v) {
  coding_internal::Store(out, coding_internal::BigEndian(v));
}
inline void PutBigEndian64(char* out, uint64_t v) {
  coding_internal::Store(out, coding_internal::BigEndian(v));
}

// Big-endian. REQUIRES: `p` points to 4 (8) readable bytes.
inline uint32_t GetBigEndian32(const char* p) {
  return coding_internal::BigEndian(coding_internal::Load<uint32_t>(p));
}
inline uint64_t GetBigEndian64(const char* p) {
  return coding_internal::BigEndian(coding_internal::Load<uint64_t>(p));
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
