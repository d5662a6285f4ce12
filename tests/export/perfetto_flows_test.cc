// The Perfetto writer's flows between hosts (PerfettoWriter::SetHostFlows): each given flow
// starts on the slice that begins at its source instant on the source host's chip's XLA Ops
// track and ends on the end of the slice that ends at its destination instant on the
// destination's, read back from the trace; a flow whose end is not in the export has no end,
// and the collectives' flows are left as they were.
#include "tests/util/perfetto_flows.h"

#include <cstdint>
#include <map>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "export/trace_export.h"
#include "gtest/gtest.h"
#include "proto/perfetto_trace.pb.h"
#include "tests/util/status_matchers.h"

namespace podprof::exporter {
namespace {

constexpr int64_t kBase = 1'800'000'000'000'000'000;  // ns since the epoch
constexpr int64_t kUs = 1'000'000;                    // in ps

// A host of two chips (ordinals 0 and 1), each an XLA Ops line of a send at 10 us (2 us),
// another op at 14 us and a recv-done from 20 us to 30.0005 us (the end between two ns: the
// writer rounds it down). Chip 1's other op is an all-reduce's slice (collective 7).
trace::HostCapture Host(const std::string& name) {
  trace::HostCapture c;
  c.host.name = name;
  c.kernels.resize(3);
  c.kernels[0].name = "send.101";
  c.kernels[1].name = "fusion.1";
  c.kernels[2].name = "recv-done.101";
  for (int chip = 0; chip < 2; ++chip) {
    trace::Chip x;
    x.ordinal = chip;
    x.device_type = "TPU v5p";
    c.host.chips.push_back(x);
    trace::EventBlock ops;
    ops.chip = chip;
    ops.line = "XLA Ops";
    ops.base_ns = kBase;
    ops.start_ps = {10 * kUs, 14 * kUs, 20 * kUs};
    ops.duration_ps = {2 * kUs, 2 * kUs, 10 * kUs + 500};
    ops.kernel = {0, 1, 2};
    ops.collective = {0, static_cast<uint64_t>(chip == 1 ? 7 : 0), 0};
    c.blocks.push_back(ops);
  }
  return c;
}

constexpr int64_t kSendNs = kBase + 10'000;
constexpr int64_t kRecvDoneEndNs = kBase + 30'000;

TEST(PerfettoFlowsTest, EachFlowGoesFromItsSendToItsRecvDoneAcrossHosts) {
  std::ostringstream out;
  PerfettoWriter w(&out);
  w.SetHostFlows({
      {"a", 0, kSendNs, "b", 1, kRecvDoneEndNs},
      {"b", 0, kSendNs, "a", 0, kRecvDoneEndNs},
      {"a", 1, kSendNs, "c", 0, kRecvDoneEndNs},      // host c is not in the export
      {"a", 0, kSendNs + 1, "b", 0, kRecvDoneEndNs},  // no slice begins there
  });
  w.AddHost(Host("a"), "");
  w.AddHost(Host("b"), "");
  ASSERT_OK(w.Finish());
  EXPECT_EQ(w.counts().host_flows, 2u);
  perfetto::protos::Trace trace;
  ASSERT_TRUE(trace.ParseFromString(out.str()));
  const std::map<uint64_t, testing::PerfettoFlow> flows = testing::PerfettoFlows(trace);

  auto flow = [&](uint64_t index) {
    auto it = flows.find(PerfettoWriter::kHostFlowIds + index);
    return it == flows.end() ? testing::PerfettoFlow() : it->second;
  };
  for (const auto& [index, from, from_chip, to, to_chip] :
       std::vector<std::tuple<uint64_t, std::string, std::string, std::string, std::string>>{
           {0, "a", "chip 0 (TPU v5p)", "b", "chip 1 (TPU v5p)"},
           {1, "b", "chip 0 (TPU v5p)", "a", "chip 0 (TPU v5p)"}}) {
    SCOPED_TRACE(index);
    const testing::PerfettoFlow f = flow(index);
    ASSERT_EQ(f.from.size(), 1u);
    ASSERT_EQ(f.to.size(), 1u);
    EXPECT_EQ(f.from[0].host, from);
    EXPECT_EQ(f.from[0].chip, from_chip);
    EXPECT_EQ(f.from[0].line, "XLA Ops");
    EXPECT_EQ(f.from[0].slice, "send.101");
    EXPECT_EQ(f.from[0].begin, kSendNs);
    EXPECT_EQ(f.to[0].host, to);
    EXPECT_EQ(f.to[0].chip, to_chip);
    EXPECT_EQ(f.to[0].slice, "recv-done.101");
    EXPECT_EQ(f.to[0].end, kRecvDoneEndNs);
    // Perfetto reads events in time order: the head must come after the tail.
    EXPECT_GT(f.to[0].end, f.from[0].begin);
  }
  // Host c's end is not exported: the flow starts and never ends (Perfetto draws nothing).
  EXPECT_EQ(flow(2).from.size(), 1u);
  EXPECT_TRUE(flow(2).to.empty());
  // A source instant no slice begins at is not moved to a neighbour.
  EXPECT_TRUE(flow(3).from.empty());
  EXPECT_EQ(flow(3).to.size(), 1u);
  // The collective's flow on chip 1's fusions is as before: one id, both hosts.
  ASSERT_EQ(flows.count(7), 1u);
  EXPECT_EQ(flows.at(7).from.size(), 2u);
}

// A recv-done ended by the nesting a ns early (the next op overlapping it by a rounding step)
// still ends its flow: the writer matches a destination within kMaxTrimNs.
TEST(PerfettoFlowsTest, ARecvDoneTrimmedToNestStillEndsItsFlow) {
  trace::HostCapture b = Host("b");
  for (trace::EventBlock& ops : b.blocks) {
    ops.start_ps.push_back(30 * kUs - 200);  // starts 0.2 ns before the recv-done ends
    ops.duration_ps.push_back(kUs);
    ops.kernel.push_back(1);
    ops.collective.push_back(0);
  }
  std::ostringstream out;
  PerfettoWriter w(&out);
  w.SetHostFlows({{"a", 0, kSendNs, "b", 0, kRecvDoneEndNs}});
  w.AddHost(Host("a"), "");
  w.AddHost(b, "");
  ASSERT_OK(w.Finish());
  perfetto::protos::Trace trace;
  ASSERT_TRUE(trace.ParseFromString(out.str()));
  const testing::PerfettoFlow f = testing::PerfettoFlows(trace)[PerfettoWriter::kHostFlowIds];
  ASSERT_EQ(f.to.size(), 1u);
  EXPECT_EQ(f.to[0].slice, "recv-done.101");
  EXPECT_EQ(f.to[0].end, kRecvDoneEndNs - 1);
  EXPECT_EQ(w.counts().host_flows, 1u);
}

}  // namespace
}  // namespace podprof::exporter
