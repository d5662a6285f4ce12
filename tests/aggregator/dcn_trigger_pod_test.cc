// The DCN trigger end to end (#56): a 2-slice job of real processes (one podprof-simhost and
// podprof-agent a slice, one podprof-aggregator). Each simulated runtime serves its host's
// megascale.dcn_transfer_latencies, each agent (told its slice by the workload's environment)
// reports their p50 and p99 every second, and at kDelayAtS after the fault epoch the link out
// of slice 0 turns 300 us slower (--dcn-delay-at): the dcn trigger takes one snapshot naming
// host-1 (slice 1, its receiver) with figures near 340 us against about 40 us, and the stored
// telemetry shows the rise on host-1 alone.
#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "harness/wait.h"
#include "launch/pod_launcher.h"
#include "nlohmann/json.hpp"
#include "proto/podprof_aggregator.grpc.pb.h"
#include "tests/util/run_podprof.h"
#include "tests/util/status_matchers.h"

namespace podprof {
namespace {

namespace fs = std::filesystem;
namespace v1 = podprof::v1;
using testing::PodprofResult;
using testing::RunPodprof;

constexpr int64_t kS = 1'000'000'000;
// The pod starts in a second or two; the triggers then need `baseline` / 2 samples of each
// host before the delay.
constexpr int kDelayAtS = 9;

// The captures stored with label trigger = `trigger`, from `podprof captures`.
std::vector<nlohmann::json> Triggered(const std::string& agg, const std::string& trigger) {
  PodprofResult listed = RunPodprof("captures --format json --aggregator " + agg);
  std::vector<nlohmann::json> out;
  if (listed.exit_code != 0) return out;
  for (const auto& c : nlohmann::json::parse(listed.out)) {
    if (c["labels"].value("trigger", "") == trigger) out.push_back(c);
  }
  return out;
}

TEST(DcnTriggerPodTest, ASlowerLinkIntoASliceTakesOneSnapshotNamingIt) {
  const fs::path dir = fs::path(::testing::TempDir()) / absl::StrCat("dcn_trigger_", getpid());
  fs::remove_all(dir);
  const int64_t epoch = absl::GetCurrentTimeNanos();
  launch::PodOptions o;
  o.bin_dir = PODPROF_BIN_DIR;
  o.dir = dir.string();
  o.hosts = 2;
  o.chips = 1;
  o.generation = "v5e";
  o.seed = 3;
  o.counters = false;
  o.aggregator_config =
      "[agents]\nheartbeat_interval = \"500ms\"\nprobe_interval = \"1s\"\n"
      "[telemetry]\nstore_interval = \"1s\"\n"
      "[triggers]\nrecent = \"3s\"\nbaseline = \"6s\"\nwindow = \"1s\"\ndcn_intervals = 3\n"
      "min_gap = \"5s\"\n";
  o.simhost_flags = {"--slices=2", absl::StrCat("--fault-epoch-ns=", epoch),
                     absl::StrCat("--dcn-delay-at=", kDelayAtS, "s:0:300")};
  o.log_files = false;
  auto pod = std::make_unique<launch::Pod>(o);
  ASSERT_OK(pod->Start());
  const std::string agg = pod->aggregator_address();

  ASSERT_TRUE(testing::WaitFor([&] { return !Triggered(agg, "dcn").empty(); },
                               absl::FromUnixNanos(epoch + (kDelayAtS + 15) * kS) - absl::Now()))
      << "no dcn snapshot (the aggregator's log above says what the triggers saw)";
  const nlohmann::json snap = Triggered(agg, "dcn")[0];
  const nlohmann::json evidence =
      nlohmann::json::parse(snap["labels"]["telemetry"].get<std::string>());
  EXPECT_EQ(evidence["host"], "host-1") << evidence;
  EXPECT_EQ(evidence["slice"], 1) << evidence;
  EXPECT_EQ(evidence["hosts"].size(), 1u) << evidence;  // slice 0's link into slice 1 only
  EXPECT_GT(evidence["recent_p50_us"].get<double>(), 300) << evidence;
  EXPECT_LT(evidence["recent_p50_us"].get<double>(), 420) << evidence;
  EXPECT_GT(evidence["baseline_p50_us"].get<double>(), 30) << evidence;
  EXPECT_LT(evidence["baseline_p50_us"].get<double>(), 60) << evidence;
  const std::string trigger_ns = snap["labels"].value("trigger_ns", "0");
  EXPECT_GT(std::stoll(trigger_ns), epoch + kDelayAtS * kS) << snap;
  EXPECT_THAT(snap["labels"].value("reason", ""),
              ::testing::HasSubstr("DCN transfer latency into host-1 (slice 1)"));

  // The stored series, as `podprof telemetry` writes them: host-1's p50 rose past 300 us,
  // host-0's stayed near 40.
  PodprofResult csv = RunPodprof("telemetry --format csv --since 60s --aggregator " + agg);
  ASSERT_EQ(csv.exit_code, 0) << csv.err;
  const std::vector<std::string> lines = absl::StrSplit(csv.out, '\n', absl::SkipEmpty());
  ASSERT_GT(lines.size(), 1u) << csv.out;
  const std::vector<std::string> header = absl::StrSplit(lines[0], ',');
  auto column = [&](const std::string& name) {
    return static_cast<size_t>(std::find(header.begin(), header.end(), name) - header.begin());
  };
  const size_t host = column("host"), transfers = column("dcn_transfers"),
               p50 = column("dcn_latency_p50_us");
  ASSERT_LT(p50, header.size()) << lines[0];
  double host0_max = 0, host1_max = 0, host1_min = 1e9;
  for (size_t i = 1; i < lines.size(); ++i) {
    const std::vector<std::string> f = absl::StrSplit(lines[i], ',');
    ASSERT_EQ(f.size(), header.size()) << lines[i];
    if (std::stoll(f[transfers]) <= 0) continue;
    const double v = std::stod(f[p50]);
    if (f[host] == "host-0") host0_max = std::max(host0_max, v);
    if (f[host] == "host-1") {
      host1_max = std::max(host1_max, v);
      host1_min = std::min(host1_min, v);
    }
  }
  EXPECT_GT(host0_max, 30) << csv.out;
  EXPECT_LT(host0_max, 60) << csv.out;
  EXPECT_LT(host1_min, 60) << csv.out;
  EXPECT_GT(host1_max, 300) << csv.out;
  pod.reset();
  fs::remove_all(dir);
}

}  // namespace
}  // namespace podprof
