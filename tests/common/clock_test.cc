#include "common/clock.h"

#include <cstdint>
#include <limits>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/util/status_matchers.h"

namespace podprof {
namespace {

using ::testing::HasSubstr;

constexpr int64_t kStartNs = 1'700'000'000'000'000'000;
constexpr absl::Duration kParkTimeout = absl::Seconds(10);

TEST(FakeClockTest, StartsAtGivenTimeAndMovesOnlyWhenTold) {
  FakeClock clock(kStartNs);
  EXPECT_EQ(clock.NowNs(), kStartNs);
  EXPECT_EQ(clock.MonotonicNs(), 0);
  clock.AdvanceNs(250);
  EXPECT_EQ(clock.NowNs(), kStartNs + 250);
  EXPECT_EQ(clock.MonotonicNs(), 250);
  clock.SetNs(kStartNs + 1000);
  EXPECT_EQ(clock.NowNs(), kStartNs + 1000);
  EXPECT_EQ(clock.MonotonicNs(), 1000);
}

TEST(FakeClockTest, MonotonicDoesNotFollowWallClockBackwards) {
  FakeClock clock(kStartNs);
  clock.SetNs(kStartNs + 500);
  clock.SetNs(kStartNs + 100);
  EXPECT_EQ(clock.NowNs(), kStartNs + 100);
  EXPECT_EQ(clock.MonotonicNs(), 500);
  clock.SetNs(kStartNs + 700);
  EXPECT_EQ(clock.MonotonicNs(), 700);
}

TEST(FakeClockTest, SleepUntilPastTimeReturnsAtOnce) {
  FakeClock clock(kStartNs);
  EXPECT_TRUE(clock.SleepUntilNs(kStartNs, nullptr));
  EXPECT_TRUE(clock.SleepUntilNs(kStartNs - 1, nullptr));
  EXPECT_EQ(clock.Sleepers(), 0);
}

TEST(FakeClockTest, SleeperWakesWhenTimeIsAdvancedFarEnough) {
  FakeClock clock(kStartNs);
  bool result = false;
  absl::Notification woke;
  std::thread sleeper([&] {
    result = clock.SleepUntilNs(kStartNs + 1000, nullptr);
    woke.Notify();
  });
  ASSERT_TRUE(clock.AwaitSleepers(1, kParkTimeout));
  EXPECT_EQ(clock.Sleepers(), 1);

  // Not far enough: the sleeper must stay parked.
  clock.AdvanceNs(999);
  EXPECT_FALSE(woke.WaitForNotificationWithTimeout(absl::Milliseconds(50)));
  EXPECT_EQ(clock.Sleepers(), 1);

  clock.AdvanceNs(1);
  EXPECT_TRUE(woke.WaitForNotificationWithTimeout(kParkTimeout));
  sleeper.join();
  EXPECT_TRUE(result);
  EXPECT_EQ(clock.Sleepers(), 0);
}

TEST(FakeClockTest, SleeperWakesWhenTimeIsSet) {
  FakeClock clock(kStartNs);
  bool result = false;
  std::thread sleeper([&] { result = clock.SleepUntilNs(kStartNs + 5000, nullptr); });
  ASSERT_TRUE(clock.AwaitSleepers(1, kParkTimeout));
  clock.SetNs(kStartNs + 9000);
  sleeper.join();
  EXPECT_TRUE(result);
}

TEST(FakeClockTest, SleeperWakesOnCancel) {
  FakeClock clock(kStartNs);
  absl::Notification cancel;
  bool result = true;
  std::thread sleeper([&] { result = clock.SleepUntilNs(kStartNs + 1000, &cancel); });
  ASSERT_TRUE(clock.AwaitSleepers(1, kParkTimeout));
  cancel.Notify();
  sleeper.join();
  EXPECT_FALSE(result);
  EXPECT_EQ(clock.Sleepers(), 0);
  EXPECT_EQ(clock.NowNs(), kStartNs);
}

TEST(FakeClockTest, CancelTakesPrecedenceOverPastDeadline) {
  FakeClock clock(kStartNs);
  absl::Notification cancel;
  cancel.Notify();
  EXPECT_FALSE(clock.SleepUntilNs(kStartNs - 1, &cancel));
}

TEST(FakeClockTest, SeveralSleepersWakeInDeadlineOrder) {
  FakeClock clock(kStartNs);
  absl::Notification first_woke;
  absl::Notification second_woke;
  std::thread first([&] {
    clock.SleepUntilNs(kStartNs + 100, nullptr);
    first_woke.Notify();
  });
  std::thread second([&] {
    clock.SleepUntilNs(kStartNs + 200, nullptr);
    second_woke.Notify();
  });
  ASSERT_TRUE(clock.AwaitSleepers(2, kParkTimeout));
  clock.AdvanceNs(150);
  EXPECT_TRUE(first_woke.WaitForNotificationWithTimeout(kParkTimeout));
  EXPECT_FALSE(second_woke.HasBeenNotified());
  EXPECT_TRUE(clock.AwaitSleepers(1, kParkTimeout));
  clock.AdvanceNs(50);
  EXPECT_TRUE(second_woke.WaitForNotificationWithTimeout(kParkTimeout));
  first.join();
  second.join();
}

TEST(FakeClockTest, AwaitSleepersTimesOutWithoutSleepers) {
  FakeClock clock(kStartNs);
  EXPECT_FALSE(clock.AwaitSleepers(1, absl::Milliseconds(10)));
}

TEST(RealClockTest, ReadsPlausibleTimes) {
  RealClock clock;
  // 2020-01-01 in ns since the epoch: any working system clock is past it.
  EXPECT_GT(clock.NowNs(), int64_t{1'577'836'800} * 1'000'000'000);
  const int64_t a = clock.MonotonicNs();
  const int64_t b = clock.MonotonicNs();
  EXPECT_LE(a, b);
}

TEST(RealClockTest, SleepUntilPastTimeReturnsAtOnce) {
  RealClock clock;
  EXPECT_TRUE(clock.SleepUntilNs(clock.NowNs() - 1'000'000'000, nullptr));
}

TEST(RealClockTest, SleepUntilReachesDeadline) {
  RealClock clock;
  const int64_t deadline = clock.NowNs() + 20'000'000;  // 20 ms
  EXPECT_TRUE(clock.SleepUntilNs(deadline, nullptr));
  EXPECT_GE(clock.NowNs(), deadline);
}

TEST(RealClockTest, SleepReturnsEarlyOnCancel) {
  RealClock clock;
  absl::Notification cancel;
  bool result = true;
  const int64_t start = clock.MonotonicNs();
  std::thread sleeper([&] {
    // An hour away: only the cancel can end this within the test timeout.
    result = clock.SleepUntilNs(clock.NowNs() + int64_t{3600} * 1'000'000'000, &cancel);
  });
  cancel.Notify();
  sleeper.join();
  EXPECT_FALSE(result);
  // Generous bound for loaded machines; the point is "not an hour".
  EXPECT_LT(clock.MonotonicNs() - start, int64_t{10} * 1'000'000'000);
}

TEST(RealClockTest, CancelTakesPrecedenceOverPastDeadline) {
  RealClock clock;
  absl::Notification cancel;
  cancel.Notify();
  EXPECT_FALSE(clock.SleepUntilNs(clock.NowNs() - 1, &cancel));
}

struct DurationCase {
  const char* text;
  int64_t ns;
};

TEST(ParseDurationNsTest, AcceptsNumbersWithUnits) {
  const DurationCase kCases[] = {
      {"0", 0},
      {"0s", 0},
      {"-0", 0},
      {"10ns", 10},
      {"100us", 100'000},
      {"250ms", 250'000'000},
      {"2s", 2'000'000'000},
      {"1.5s", 1'500'000'000},
      {"-37.5ms", -37'500'000},
      {"+2ms", 2'000'000},
      {"3m", int64_t{180} * 1'000'000'000},
      {"1h", int64_t{3600} * 1'000'000'000},
      {"30d", int64_t{30} * 86400 * 1'000'000'000},
      {"0.5h", int64_t{1800} * 1'000'000'000},
      {"1.0000000005s", 1'000'000'001},  // rounded to the nearest ns
      {"0.1s", 100'000'000},
      {"1.25us", 1'250},
      {"9223372036854775807ns", std::numeric_limits<int64_t>::max()},
      {"-9223372036854775807ns", -std::numeric_limits<int64_t>::max()},
  };
  for (const DurationCase& c : kCases) {
    absl::StatusOr<int64_t> ns = ParseDurationNs(c.text);
    ASSERT_OK(ns) << c.text;
    EXPECT_EQ(*ns, c.ns) << c.text;
  }
}

struct BadDurationCase {
  const char* text;
  const char* message;
};

TEST(ParseDurationNsTest, RejectsBadText) {
  const BadDurationCase kCases[] = {
      {"", "bad duration \"\": empty"},
      {"2x", "bad duration \"2x\": unknown unit \"x\" (use ns, us, ms, s, m, h, d)"},
      {"5", "bad duration \"5\": missing unit"},
      {"1.5", "bad duration \"1.5\": missing unit"},
      {"ms", "bad duration \"ms\": expected a number"},
      {"-", "bad duration \"-\": expected a number"},
      {"abc", "bad duration \"abc\": expected a number"},
      {" 5s", "bad duration \" 5s\": expected a number"},
      {"5 s", "bad duration \"5 s\": unknown unit \" s\""},
      {"5s ", "bad duration \"5s \": unknown unit \"s \""},
      {"1h30m", "unknown unit \"h30m\""},
      {".5s", "expected a number"},
      {"5.s", "expected digits after the decimal point"},
      {"1.2.3s", "unknown unit \".3s\""},
      {"9223372036854775808ns", "bad duration \"9223372036854775808ns\": out of range"},
      {"9223372036854775807us", "out of range"},
      {"2562048h", "out of range"},
      {"99999999999999999999999s", "out of range"},
  };
  for (const BadDurationCase& c : kCases) {
    absl::StatusOr<int64_t> ns = ParseDurationNs(c.text);
    ASSERT_FALSE(ns.ok()) << c.text << " parsed as " << *ns;
    EXPECT_EQ(ns.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(ns.status().message(), HasSubstr(c.message)) << c.text;
  }
}

TEST(ParseDurationNsTest, EscapesUnprintableText) {
  absl::StatusOr<int64_t> ns = ParseDurationNs("5\ns");
  ASSERT_FALSE(ns.ok());
  EXPECT_THAT(ns.status().message(), HasSubstr("\"5\\ns\""));
}

struct FormatCase {
  int64_t ps;
  const char* text;
};

TEST(FormatDurationPsTest, UsesThreeSignificantDigits) {
  const FormatCase kCases[] = {
      {0, "0 ps"},
      {7, "7 ps"},
      {812, "812 ps"},
      {999, "999 ps"},
      {1'000, "1.00 ns"},
      {1'234, "1.23 ns"},
      {45'600'000, "45.6 us"},
      {2'000'000'000, "2.00 ms"},
      {1'500'000'000'000, "1.50 s"},
      {123'456'789, "123 us"},
      {-37'500'000'000, "-37.5 ms"},
      {-812, "-812 ps"},
      // Rounding that carries into the next digit or the next unit.
      {9'996, "10.0 ns"},
      {99'960, "100 ns"},
      {999'600, "1.00 us"},
      {999'499, "999 ns"},
      {int64_t{3600} * 1'000'000'000'000, "3600 s"},
      {std::numeric_limits<int64_t>::min(), "-9223372 s"},
  };
  for (const FormatCase& c : kCases) {
    EXPECT_EQ(FormatDurationPs(c.ps), c.text) << c.ps;
  }
}

}  // namespace
}  // namespace podprof
