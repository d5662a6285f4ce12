#include "common/checked.h"

#include <cstdint>
#include <limits>

#include "absl/status/status.h"
#include "gtest/gtest.h"

namespace podprof {
namespace {

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
constexpr int64_t kMin = std::numeric_limits<int64_t>::min();

TEST(CheckedTest, MulGivesTheProductOrNothing) {
  EXPECT_EQ(CheckedMul(3, 4), 12);
  EXPECT_EQ(CheckedMul(-3, 4), -12);
  EXPECT_EQ(CheckedMul(kMax, 1), kMax);
  EXPECT_EQ(CheckedMul(kMax, 2), std::nullopt);
  EXPECT_EQ(CheckedMul(kMin, -1), std::nullopt);
  EXPECT_EQ(CheckedMul(int64_t{1} << 58, 1'000'000), std::nullopt);
}

TEST(CheckedTest, AddGivesTheSumOrNothing) {
  EXPECT_EQ(CheckedAdd(3, 4), 7);
  EXPECT_EQ(CheckedAdd(kMax, 0), kMax);
  EXPECT_EQ(CheckedAdd(kMax, 1), std::nullopt);
  EXPECT_EQ(CheckedAdd(kMin, -1), std::nullopt);
  EXPECT_EQ(CheckedAdd(kMin, kMax), -1);
}

TEST(CheckedTest, RangeNamesTheFieldTheRangeAndTheValue) {
  EXPECT_EQ(*CheckedRange("top", 5, 0, 10), 5);
  absl::StatusOr<int64_t> r = CheckedRange("top", 5'000'000'000, 0, 1'000'000);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().message(), "top must be 0..1000000, got 5000000000");
}

TEST(CheckedTest, MillisInRangeBecomeNanos) {
  EXPECT_EQ(*MillisFieldToNanos("duration_ms", 1, 1, 3'600'000), 1'000'000);
  EXPECT_EQ(*MillisFieldToNanos("duration_ms", 3'600'000, 1, 3'600'000), 3'600'000'000'000);
  EXPECT_EQ(*MillisFieldToNanos("delay_ms", 0, 0, kMaxMillisAsNanos), 0);
  EXPECT_EQ(*MillisFieldToNanos("delay_ms", kMaxMillisAsNanos, 0, kMaxMillisAsNanos),
            kMaxMillisAsNanos * 1'000'000);
}

TEST(CheckedTest, DurationOf2To58MsIsRefusedNotWrapped) {
  // (2^58 + 1000) * 1e6 wraps to about 1 s in int64 arithmetic.
  const uint64_t ms = (uint64_t{1} << 58) + 1000;
  absl::StatusOr<int64_t> ns = MillisFieldToNanos("duration_ms", ms, 1, 3'600'000);
  ASSERT_FALSE(ns.ok());
  EXPECT_EQ(ns.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ns.status().message(), "duration_ms must be 1..3600000, got 288230376151712744");
}

TEST(CheckedTest, MillisAboveInt64AreRefusedNotReadAsNegative) {
  absl::StatusOr<int64_t> ns =
      MillisFieldToNanos("duration_ms", std::numeric_limits<uint64_t>::max(), 1, 10);
  ASSERT_FALSE(ns.ok());
  EXPECT_EQ(ns.status().message(), "duration_ms must be 1..10, got 18446744073709551615");
  EXPECT_FALSE(MillisFieldToNanos("duration_ms", 0, 1, 10).ok());
}

}  // namespace
}  // namespace podprof
