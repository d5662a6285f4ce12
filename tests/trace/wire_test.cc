#include "trace/wire.h"

#include <cstdint>
#include <vector>

#include "gtest/gtest.h"

namespace podprof::trace::wire {
namespace {

// A message of `message` bytes followed by `after` bytes that may be read but are not the
// message's (the next field, as in the reader's chunks).
struct Bytes {
  std::vector<uint8_t> data;
  size_t message = 0;
  Span Whole(int64_t base) const { return Span(data.data(), data.data() + message, base); }
  Span WithReadable(int64_t base) const {
    return Span(data.data(), data.data() + message, data.data() + data.size(), base);
  }
};

TEST(WireSpanTest, AVarintAtTheEndOfAMessageIsReadWhateverFollowsIt) {
  // One tag, then 300 in two bytes, the message's last; 10 readable bytes after it.
  Bytes b{{0x08, 0xAC, 0x02, 0x81, 0x81, 0x81, 0x81, 0x81, 0x81, 0x81, 0x81, 0x81, 0x01}, 3};
  for (Span s : {b.Whole(100), b.WithReadable(100)}) {
    uint32_t field;
    WireType wt;
    ASSERT_TRUE(s.ReadTag(&field, &wt));
    uint64_t v = 0;
    ASSERT_TRUE(s.ReadVarint(&v));
    EXPECT_EQ(v, 300u);
    EXPECT_TRUE(s.done());
    EXPECT_EQ(s.offset(), 103);
  }
}

TEST(WireSpanTest, AVarintRunningPastItsMessageFailsWhereItsMessageEnds) {
  // A varint whose continuation bytes go on past the message's 2 bytes into readable ones
  // that would end it: refused, stopped at the message's end, with or without them.
  Bytes b{{0x80, 0x80, 0x80, 0x01, 0, 0, 0, 0, 0, 0, 0, 0}, 2};
  for (Span s : {b.Whole(40), b.WithReadable(40)}) {
    uint64_t v = 7;
    EXPECT_FALSE(s.ReadVarint(&v));
    EXPECT_EQ(v, 7u);
    EXPECT_EQ(s.offset(), 42);
  }
}

TEST(WireSpanTest, AVarintPast64BitsFailsInPlace) {
  // Ten bytes whose last carries more than bit 63, inside the message: refused unmoved.
  Bytes b{{0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x02, 0, 0}, 12};
  for (Span s : {b.Whole(0), b.WithReadable(0)}) {
    uint64_t v = 0;
    EXPECT_FALSE(s.ReadVarint(&v));
    EXPECT_EQ(s.offset(), 0);
  }
  // The same ten bytes with 1 in the last: 2^64 - 1.
  b.data[9] = 0x01;
  Span s = b.WithReadable(0);
  uint64_t v = 0;
  ASSERT_TRUE(s.ReadVarint(&v));
  EXPECT_EQ(v, ~uint64_t{0});
  EXPECT_EQ(s.offset(), 10);
}

TEST(WireSpanTest, ASubMessageMayReadWhatItsParentMay) {
  // A length-delimited field of 2 bytes holding 300, then the parent's next bytes.
  Bytes b{{0x02, 0xAC, 0x02, 0x08, 0x01, 0, 0, 0, 0, 0, 0, 0, 0}, 13};
  Span parent = b.Whole(0);
  Span sub;
  ASSERT_TRUE(parent.ReadSub(&sub));
  uint64_t v = 0;
  ASSERT_TRUE(sub.ReadVarint(&v));
  EXPECT_EQ(v, 300u);
  EXPECT_TRUE(sub.done());
  EXPECT_EQ(parent.offset(), 3);
}

}  // namespace
}  // namespace podprof::trace::wire
