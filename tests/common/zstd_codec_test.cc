#include "common/zstd_codec.h"

#include <string>

#include "gtest/gtest.h"
#include "tests/util/status_matchers.h"

namespace podprof {
namespace {

// Bytes that compress, but not to nothing: a frame of several blocks.
std::string Raw(size_t n) {
  std::string raw(n, '\0');
  uint64_t x = 88172645463325252ull;
  for (size_t i = 0; i < n; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    raw[i] = static_cast<char>('a' + x % 4);
  }
  return raw;
}

TEST(ZstdCodecTest, APrefixComesFromTheFrontOfAFrameOfManyBlocks) {
  const std::string raw = Raw(3 << 20);
  const std::string frame = ZstdCompress(raw, 1);
  ASSERT_LT(frame.size(), raw.size());
  absl::StatusOr<std::string> front = ZstdDecompressPrefix(frame, 10, "test frame");
  ASSERT_OK(front);
  EXPECT_EQ(*front, raw.substr(0, 10));
  // Asking for more than the frame holds gives the whole content.
  const std::string small = ZstdCompress("abc", 1);
  EXPECT_EQ(ZstdDecompressPrefix(small, 10, "small").value(), "abc");
  // The context is fit for the next call after one stopped half way.
  EXPECT_EQ(ZstdDecompressPrefix(frame, 4, "again").value(), raw.substr(0, 4));
}

TEST(ZstdCodecTest, AFrontOfItsOwnIsReadWithoutTheRestAndTheFrameStaysWhole) {
  const std::string raw = Raw(1 << 20);
  const std::string frame = ZstdCompress(raw, 1, 10);
  ASSERT_FALSE(frame.empty());
  ASSERT_OK(ZstdCheckFrame(frame, raw.size(), "front frame"));
  EXPECT_EQ(ZstdDecompress(frame, raw.size(), "front frame").value(), raw);
  EXPECT_EQ(ZstdDecompressPrefix(frame, 10, "front").value(), raw.substr(0, 10));
  // The front's block holds the prefix: the frame cut after a few more bytes still yields it
  // (the rest of the frame, where the events are, is never read).
  const std::string cut = frame.substr(0, 40);
  EXPECT_EQ(ZstdDecompressPrefix(cut, 10, "cut front").value(), raw.substr(0, 10));
  // A front as long as the content, or longer, is one ordinary frame.
  EXPECT_EQ(ZstdDecompress(ZstdCompress("abc", 1, 10), 3, "short").value(), "abc");
}

TEST(ZstdCodecTest, APrefixOfNoFrameIsDataLossNamingIt) {
  absl::StatusOr<std::string> bad = ZstdDecompressPrefix("not zstd at all", 4, "timeline block");
  ASSERT_TRUE(absl::IsDataLoss(bad.status())) << bad.status();
  EXPECT_NE(bad.status().message().find("timeline block"), std::string::npos);
}

}  // namespace
}  // namespace podprof
