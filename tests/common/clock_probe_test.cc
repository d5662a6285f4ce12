#include "common/clock_probe.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>

#include "common/clock.h"
#include "common/skewed_clock.h"
#include "gtest/gtest.h"
#include "tests/util/status_matchers.h"

namespace podprof {
namespace {

TEST(ClockProbeTest, DatagramsRoundTripAndRejectAnythingElse) {
  std::string d = EncodeClockProbe(2, -5, 1'700'000'000'000'000'000, 42);
  ASSERT_EQ(d.size(), kClockProbeSize);
  uint8_t kind = 0;
  ProbeTimes t;
  ASSERT_TRUE(DecodeClockProbe(d.data(), d.size(), &kind, &t));
  EXPECT_EQ(kind, 2);
  EXPECT_EQ(t.t1, -5);
  EXPECT_EQ(t.t2, 1'700'000'000'000'000'000);
  EXPECT_EQ(t.t3, 42);
  EXPECT_FALSE(DecodeClockProbe(d.data(), d.size() - 1, &kind, &t));
  std::string bad = d;
  bad[0] = 'X';
  EXPECT_FALSE(DecodeClockProbe(bad.data(), bad.size(), &kind, &t));
  bad = d;
  bad[4] = 9;  // a version we do not speak
  EXPECT_FALSE(DecodeClockProbe(bad.data(), bad.size(), &kind, &t));
  bad = EncodeClockProbe(7, 0, 0, 0);
  EXPECT_FALSE(DecodeClockProbe(bad.data(), bad.size(), &kind, &t));
}

// A responder on a clock 3.25 ms ahead: every answered probe's bounds contain the offset, and
// the best midpoint lies within its own half round trip of it.
TEST(ClockProbeTest, BoundsContainTheResponderOffsetOverLoopback) {
  RealClock real;
  constexpr int64_t kOffset = 3'250'000;
  SkewedClock ahead(real, kOffset, 0);
  auto responder = ClockProbeResponder::Start("127.0.0.1", 0, ahead);
  ASSERT_OK(responder);
  ASSERT_GT((*responder)->port(), 0);
  auto probes = ProbeClock("127.0.0.1", (*responder)->port(), 16, 500'000'000, real);
  ASSERT_OK(probes);
  ASSERT_EQ(probes->size(), 16u);
  EXPECT_EQ((*responder)->answered(), 16u);
  int64_t best_width = INT64_MAX, best_mid = 0;
  for (const ProbeTimes& p : *probes) {
    EXPECT_LE(p.t1, p.t4);
    EXPECT_LE(p.t2, p.t3);
    // Kernel timestamps are taken before the reader wakes; the bounds still hold.
    EXPECT_LE(p.t3 - p.t4, kOffset);
    EXPECT_GE(p.t2 - p.t1, kOffset);
    const int64_t width = (p.t2 - p.t1) - (p.t3 - p.t4);
    if (width < best_width) {
      best_width = width;
      best_mid = (p.t3 - p.t4) + width / 2;
    }
  }
  EXPECT_LE(std::abs(best_mid - kOffset), best_width / 2 + 1);
}

TEST(ClockProbeTest, GarbageGetsNoAnswerAndTheResponderKeepsServing) {
  RealClock real;
  auto responder = ClockProbeResponder::Start("127.0.0.1", 0, real);
  ASSERT_OK(responder);
  int fd = socket(AF_INET, SOCK_DGRAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(static_cast<uint16_t>((*responder)->port()));
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const std::string junk(1000, 'x');
  const std::string answer_shaped = EncodeClockProbe(2, 1, 2, 3);
  for (const std::string& d : {junk, answer_shaped, std::string("PPCP")}) {
    ASSERT_EQ(sendto(fd, d.data(), d.size(), 0, reinterpret_cast<sockaddr*>(&to), sizeof(to)),
              static_cast<ssize_t>(d.size()));
  }
  timeval tv{0, 200'000};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  char buf[64];
  EXPECT_LT(recv(fd, buf, sizeof(buf), 0), 0) << "an answer to something that is no probe";
  close(fd);
  auto probes = ProbeClock("127.0.0.1", (*responder)->port(), 3, 500'000'000, real);
  ASSERT_OK(probes);
  EXPECT_EQ(probes->size(), 3u);
  EXPECT_EQ((*responder)->answered(), 3u);
}

TEST(ClockProbeTest, NobodyListeningEndsTheBurstWithoutAnswers) {
  RealClock real;
  int port = 0;
  {
    auto responder = ClockProbeResponder::Start("127.0.0.1", 0, real);
    ASSERT_OK(responder);
    port = (*responder)->port();
  }  // closed: the port refuses now
  const int64_t t0 = real.MonotonicNs();
  auto probes = ProbeClock("127.0.0.1", port, 8, 200'000'000, real);
  ASSERT_OK(probes);
  EXPECT_TRUE(probes->empty());
  // The ICMP refusal stops the burst; eight timeouts would take 1.6 s.
  EXPECT_LT(real.MonotonicNs() - t0, 1'000'000'000);
}

TEST(ClockProbeTest, UnresolvableHostIsAnError) {
  RealClock real;
  auto probes = ProbeClock("no-such-host.invalid", 7101, 1, 1'000'000, real);
  ASSERT_FALSE(probes.ok());
  EXPECT_NE(probes.status().message().find("no-such-host.invalid"), std::string::npos);
}

// One thread answers for many sockets, each on its own clock: every answer's bounds contain
// the offset of the clock that socket belongs to.
TEST(ClockProbeTest, MultiResponderAnswersEachSocketOnItsOwnClock) {
  RealClock real;
  const int64_t offsets[3] = {-7'000'000, 0, 12'500'000};
  std::vector<std::unique_ptr<SkewedClock>> clocks;
  std::vector<MultiClockProbeResponder::Endpoint> endpoints;
  for (int64_t o : offsets) {
    clocks.push_back(std::make_unique<SkewedClock>(real, o, 0));
    endpoints.push_back({"127.0.0.1", 0, clocks.back().get()});
  }
  auto responder = MultiClockProbeResponder::Start(endpoints, /*fallback_to_free_port=*/false);
  ASSERT_OK(responder);
  ASSERT_EQ((*responder)->ports().size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    auto probes = ProbeClock("127.0.0.1", (*responder)->ports()[i], 4, 500'000'000, real);
    ASSERT_OK(probes);
    ASSERT_EQ(probes->size(), 4u);
    for (const ProbeTimes& p : *probes) {
      EXPECT_LE(p.t3 - p.t4, offsets[i]);
      EXPECT_GE(p.t2 - p.t1, offsets[i]);
    }
  }
  EXPECT_EQ((*responder)->answered(), 12u);
}

// A port already taken is an error, unless the caller accepts a free one instead.
TEST(ClockProbeTest, MultiResponderFallsBackToAFreePortOnlyWhenAsked) {
  RealClock real;
  auto first = ClockProbeResponder::Start("127.0.0.1", 0, real);
  ASSERT_OK(first);
  const int taken = (*first)->port();
  EXPECT_FALSE(MultiClockProbeResponder::Start({{"127.0.0.1", taken, &real}}, false).ok());
  auto fallback = MultiClockProbeResponder::Start({{"127.0.0.1", taken, &real}}, true);
  ASSERT_OK(fallback);
  EXPECT_NE((*fallback)->ports()[0], taken);
  EXPECT_GT((*fallback)->ports()[0], 0);
}

}  // namespace
}  // namespace podprof
