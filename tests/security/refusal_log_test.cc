// The refusal log's rate limit and its reading of TLS library errors, on a fake clock.
#include "security/refusal_log.h"

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "common/clock.h"
#include "gtest/gtest.h"

namespace podprof::security {
namespace {

TEST(RefusalLogTest, EachReasonOncePerWindowThenTheCountOfTheRest) {
  FakeClock clock(1'000'000'000);
  std::vector<std::string> lines;
  RefusalLog log(clock, 60'000'000'000, [&](const std::string& l) { lines.push_back(l); });
  log.Note("ipv4:10.0.0.7:5000", "caller x may not act as an agent");
  log.Note("ipv4:10.0.0.7:5001", "caller x may not act as an agent");
  log.Note("ipv4:10.0.0.7:5002", "caller x may not act as an agent");
  log.Note("ipv4:10.0.0.8:5000", "caller y may not act as an operator");
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0], "refused ipv4:10.0.0.7:5000: caller x may not act as an agent");
  EXPECT_EQ(lines[1], "refused ipv4:10.0.0.8:5000: caller y may not act as an operator");
  clock.AdvanceNs(59'000'000'000);
  log.Note("ipv4:10.0.0.7:5003", "caller x may not act as an agent");
  EXPECT_EQ(lines.size(), 2u);
  clock.AdvanceNs(1'000'000'000);
  log.Note("ipv4:10.0.0.7:5004", "caller x may not act as an agent");
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[2],
            "refused ipv4:10.0.0.7:5004: caller x may not act as an agent (and 3 more like it "
            "not logged since 60 s ago)");
  log.Note("", "TLS handshake failed: x");
  EXPECT_EQ(lines.back(), "refused a peer: TLS handshake failed: x");
}

TEST(RefusalLogTest, HandshakeFailuresSayWhatToLookAt) {
  EXPECT_TRUE(absl::StrContains(ExplainHandshakeFailure("wrong version number"),
                                "the other side spoke plaintext"));
  EXPECT_TRUE(absl::StrContains(ExplainHandshakeFailure("certificate verify failed"),
                                "did not verify against tls.ca"));
  EXPECT_TRUE(absl::StrContains(ExplainHandshakeFailure("peer did not return a certificate"),
                                "presented no certificate"));
  EXPECT_TRUE(absl::StrContains(ExplainHandshakeFailure("tlsv1 alert unknown ca"),
                                "does not know this daemon's CA"));
  EXPECT_EQ(ExplainHandshakeFailure("something new"), "TLS handshake failed: something new");
}

}  // namespace
}  // namespace podprof::security
