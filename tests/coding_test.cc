// engine/coding.h: the byte order and width of each encoding, and that each
// decoder reads back what its encoder wrote.
#include "engine/coding.h"

#include <cstdint>
#include <iterator>
#include <string>

#include "gtest/gtest.h"

namespace idem {
namespace {

TEST(CodingTest, Fixed32LittleEndianPutsTheLowByteFirst) {
  std::string out = "x";
  PutFixed32LE(&out, 0x01020304u);
  EXPECT_EQ(out, std::string("x\x04\x03\x02\x01", 5));
  EXPECT_EQ(GetFixed32LE(out.data() + 1), 0x01020304u);
}

TEST(CodingTest, EncodeFixed32LittleEndianWritesInPlaceOnlyItsFourBytes) {
  std::string out = "abcdef";
  EncodeFixed32LE(&out[1], 0xA1B2C3D4u);
  EXPECT_EQ(out, std::string("a\xD4\xC3\xB2\xA1"
                             "f",
                             6));
  EXPECT_EQ(GetFixed32LE(&out[1]), 0xA1B2C3D4u);
}

TEST(CodingTest, Fixed64LittleEndianRoundTripsEveryByte) {
  std::string out;
  PutFixed64LE(&out, 0x0102030405060708u);
  EXPECT_EQ(out, std::string("\x08\x07\x06\x05\x04\x03\x02\x01", 8));
  EXPECT_EQ(GetFixed64LE(out.data()), 0x0102030405060708u);
}

TEST(CodingTest, BigEndianPutsTheHighByteFirst) {
  char four[4];
  PutBigEndian32(four, 0x01020304u);
  EXPECT_EQ(std::string(four, 4), std::string("\x01\x02\x03\x04", 4));
  EXPECT_EQ(GetBigEndian32(four), 0x01020304u);
  char eight[8];
  PutBigEndian64(eight, 0x0102030405060708u);
  EXPECT_EQ(std::string(eight, 8),
            std::string("\x01\x02\x03\x04\x05\x06\x07\x08", 8));
  EXPECT_EQ(GetBigEndian64(eight), 0x0102030405060708u);
}

TEST(CodingTest, BigEndianSortsAsTheNumbers) {
  // Keys compare bytewise: the encoding keeps the numbers' order, high
  // bytes included.
  const uint64_t values[] = {
      0, 1, 0xff, 0x100, 0xffffffffu, uint64_t{1} << 32, ~uint64_t{0}};
  for (size_t i = 1; i < std::size(values); ++i) {
    char a[8];
    char b[8];
    PutBigEndian64(a, values[i - 1]);
    PutBigEndian64(b, values[i]);
    EXPECT_LT(std::string(a, 8), std::string(b, 8)) << values[i];
    EXPECT_EQ(GetBigEndian64(b), values[i]);
  }
}

}  // namespace
}  // namespace idem
