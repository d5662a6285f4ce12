// Snapshots joined (agent/xspace_merge.h) read as one capture of their whole span: the
// simulated host's XSpaces of [t0, t1) and [t1, t2), merged, give the reader every event of
// the XSpace built for [t0, t2) at the same instants (the builder takes what starts inside a
// window, so the two halves hold exactly the whole's events).
#include "agent/xspace_merge.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include "gtest/gtest.h"
#include "sim/pod_model.h"
#include "sim/xspace_builder.h"
#include "tests/util/status_matchers.h"
#include "trace/byte_source.h"
#include "trace/xspace_reader.h"

namespace podprof::sim {
namespace {

using tensorflow::profiler::XSpace;

PodConfig V5e() {
  PodConfig c;
  c.generation = "v5e";
  c.chips = 2;
  c.hosts = 2;
  c.host_index = 0;
  c.pod_seed = 11;
  return c;
}

struct Host {
  FakeClock truth{1'800'000'000'000'000'000};
  SkewedClock clock{truth, 0, 0};
  XSpace Build(const PodModel& m, int64_t from_ms, int64_t to_ms) {
    SessionWindow w;
    w.true_start_ns = truth.NowNs() + from_ms * 1'000'000;
    w.true_end_ns = truth.NowNs() + to_ms * 1'000'000;
    w.host_name = "host-m";
    w.counters = true;
    return BuildXSpace(m, clock, w).space;
  }
};

// Every kernel event as (chip, kernel name, start ps, duration ps), sorted.
std::vector<std::tuple<int, std::string, int64_t, int64_t>> Events(const XSpace& space) {
  const std::string bytes = space.SerializeAsString();
  trace::MemorySource source(bytes);
  absl::StatusOr<trace::HostCapture> c = trace::ReadXSpace(source);
  EXPECT_OK(c.status());
  std::vector<std::tuple<int, std::string, int64_t, int64_t>> out;
  if (!c.ok()) return out;
  for (const trace::EventBlock& b : c->blocks) {
    for (size_t i = 0; i < b.size(); ++i) {
      out.emplace_back(b.chip, c->kernels[b.kernel[i]].name, b.base_ns * 1000 + b.start_ps[i],
                       b.duration_ps[i]);
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

TEST(XSpaceMergeTest, TwoSnapshotsReadAsTheWholeWindow) {
  absl::StatusOr<PodModel> m = PodModel::Create(V5e());
  ASSERT_OK(m.status());
  Host h;
  const XSpace whole = h.Build(*m, 0, 40);
  absl::StatusOr<XSpace> merged = agent::MergeSnapshots({h.Build(*m, 0, 17), h.Build(*m, 17, 40)});
  ASSERT_OK(merged.status());
  const auto want = Events(whole), got = Events(*merged);
  ASSERT_GT(want.size(), 100u);
  EXPECT_EQ(got, want);
  int64_t start = 0, stop = 0, whole_start = 0, whole_stop = 0;
  ASSERT_OK(agent::ProfileWindow(*merged, &start, &stop));
  ASSERT_OK(agent::ProfileWindow(whole, &whole_start, &whole_stop));
  EXPECT_EQ(start, whole_start);
  EXPECT_EQ(stop, whole_stop);
  // Each plane once, its metadata renumbered rather than clashing.
  std::vector<std::string> names;
  for (const auto& p : merged->planes()) names.push_back(p.name());
  std::vector<std::string> unique = names;
  std::sort(unique.begin(), unique.end());
  EXPECT_EQ(std::unique(unique.begin(), unique.end()), unique.end());
  EXPECT_EQ(names.size(), static_cast<size_t>(whole.planes_size()));
}

TEST(XSpaceMergeTest, ASnapshotWithoutItsWindowIsRefused) {
  EXPECT_EQ(agent::MergeSnapshots({}).status().code(), absl::StatusCode::kInvalidArgument);
  XSpace bare;
  bare.add_planes()->set_name("/device:TPU:0");
  absl::StatusOr<XSpace> r = agent::MergeSnapshots({bare});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("snapshot 0"), std::string::npos);
}

// A workload's bytes: the Task Environment holding a stat whose metadata it never defined
// aborted the agent (protobuf's Map::at CHECK); an id near 2^63 would overflow the shift.
TEST(XSpaceMergeTest, AWorkloadsUndefinedOrHugeIdsNeitherAbortNorWrap) {
  absl::StatusOr<PodModel> m = PodModel::Create(V5e());
  ASSERT_OK(m.status());
  Host h;
  XSpace first = h.Build(*m, 0, 17);
  for (auto& p : *first.mutable_planes()) {
    if (p.name() != "Task Environment") continue;
    p.add_stats()->set_metadata_id(987654);  // defined nowhere
  }
  absl::StatusOr<XSpace> merged = agent::MergeSnapshots({first, h.Build(*m, 17, 40)});
  ASSERT_OK(merged.status());
  XSpace huge = h.Build(*m, 17, 40);
  (*huge.mutable_planes(0)->mutable_event_metadata())[INT64_MAX].set_name("x");
  absl::StatusOr<XSpace> r = agent::MergeSnapshots({h.Build(*m, 0, 17), huge});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("event metadata id 9223372036854775807"), std::string::npos)
      << r.status();
}

// The memory a snapshot takes once parsed, read from its bytes without parsing them: within a
// factor of two of what protobuf says the parsed message uses, for a simulated host's snapshot
// and for a workload's snapshot of 200,000 events of two bytes each, which parses to far more
// than its bytes (the freeze refuses such a join before making it).
TEST(XSpaceMergeTest, TheParsedSizeIsEstimatedFromTheBytes) {
  auto model = PodModel::Create(V5e());
  ASSERT_OK(model.status());
  Host h;
  XSpace tiny;
  auto* plane = tiny.add_planes();
  plane->set_name("/device:TPU:0");
  (*plane->mutable_event_metadata())[1].set_name("op");
  auto* line = plane->add_lines();
  for (int i = 0; i < 200'000; ++i) line->add_events()->set_metadata_id(1);
  for (const XSpace& space : {h.Build(*model, 0, 500), tiny}) {
    const std::string bytes = space.SerializeAsString();
    absl::StatusOr<uint64_t> estimate = agent::ParsedBytesEstimate(bytes);
    ASSERT_OK(estimate.status());
    XSpace parsed;
    ASSERT_TRUE(parsed.ParseFromString(bytes));
    const double used = static_cast<double>(parsed.SpaceUsedLong());
    EXPECT_GT(*estimate, used / 2) << bytes.size() << " bytes";
    EXPECT_LT(*estimate, used * 2) << bytes.size() << " bytes";
  }
  // The window, read from the bytes as the recorder reads each snapshot's.
  const XSpace snapshot = h.Build(*model, 0, 500);
  int64_t start = 0, stop = 0, bytes_start = 0, bytes_stop = 0;
  ASSERT_OK(agent::ProfileWindow(snapshot, &start, &stop));
  ASSERT_OK(agent::ProfileWindowOfBytes(snapshot.SerializeAsString(), &bytes_start, &bytes_stop));
  EXPECT_EQ(bytes_start, start);
  EXPECT_EQ(bytes_stop, stop);
  EXPECT_EQ(agent::ProfileWindowOfBytes(tiny.SerializeAsString(), &start, &stop).code(),
            absl::StatusCode::kNotFound);
  const std::string tiny_bytes = tiny.SerializeAsString();
  EXPECT_GT(*agent::ParsedBytesEstimate(tiny_bytes), 10 * tiny_bytes.size());
  EXPECT_FALSE(agent::ParsedBytesEstimate("\x0a\xff\xff").ok());
}

}  // namespace
}  // namespace podprof::sim
