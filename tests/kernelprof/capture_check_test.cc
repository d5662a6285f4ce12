// A host's capture against what its request asked for (kernelprof/capture_check.h): for each
// thing asked, present says nothing, absent says so naming the host.
#include "kernelprof/capture_check.h"

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "trace/perf_counters.h"

namespace podprof::kernelprof {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

trace::Chip Tpu(int ordinal, const std::string& generation, const std::string& device_type) {
  trace::Chip c;
  c.ordinal = ordinal;
  c.generation = generation;
  c.device_type = device_type;
  return c;
}

// A v7x host of two chips with events, its host threads traced, no Python, no counters.
CaptureHolds V7xHost() {
  CaptureHolds h;
  h.chips = {Tpu(0, "v7x", "TPU7x"), Tpu(1, "v7x", "TPU7x")};
  h.device_events = 1000;
  h.host_planes = trace::HostPlanes{/*host_plane=*/true, /*thread_events=*/true,
                                    /*python_events=*/false};
  return h;
}

// The series a v7x capture names counter `index` of `component` on `die` by.
std::string Series(const std::string& component, int die, int index) {
  std::optional<uint64_t> id = trace::ComponentCounterId("v7x", component, die, index);
  EXPECT_TRUE(id.has_value()) << component << " " << die << " " << index;
  return trace::PerfSeriesName("v7x", id.value_or(0));
}

v1::CaptureOptions KernelProfiling() {
  v1::CaptureOptions o;
  o.set_kernel_profiling(true);
  return o;
}

TEST(CaptureCheckTest, NothingAskedSaysNothingWhateverTheCaptureLacks) {
  CaptureHolds empty;
  empty.host_planes = trace::HostPlanes{};
  EXPECT_THAT(MissingFromCapture("host-0", v1::CaptureOptions(), empty), IsEmpty());
}

TEST(CaptureCheckTest, DeviceTracingAskedForNeedsADevicePlaneWithEvents) {
  v1::CaptureOptions o;
  o.set_device_tracer_level(1);
  EXPECT_THAT(MissingFromCapture("host-0", o, V7xHost()), IsEmpty());

  CaptureHolds cpu;  // JAX on CPU: the CPU device read from the host's threads
  trace::Chip c;
  c.kind = trace::DeviceKind::kCpu;
  cpu.chips = {c};
  cpu.device_events = 0;
  EXPECT_THAT(MissingFromCapture("host-0", o, cpu),
              ElementsAre("host-0: asked for device tracing (device tracer level 1); the capture "
                          "holds no TPU or GPU plane"));

  CaptureHolds idle = V7xHost();
  idle.device_events = 0;
  EXPECT_THAT(MissingFromCapture("host-3", o, idle),
              ElementsAre("host-3: asked for device tracing (device tracer level 1); the capture "
                          "holds no device event (2 device planes)"));
  // Unset is the profiler's default, not a request: a CPU workload is not told it has no TPU.
  EXPECT_THAT(MissingFromCapture("host-0", v1::CaptureOptions(), cpu), IsEmpty());
}

TEST(CaptureCheckTest, HostTracingAskedForNeedsEventsOnTheHostsThreads) {
  v1::CaptureOptions o;
  o.set_host_tracer_level(2);
  EXPECT_THAT(MissingFromCapture("host-0", o, V7xHost()), IsEmpty());

  CaptureHolds quiet = V7xHost();
  quiet.host_planes->thread_events = false;
  EXPECT_THAT(MissingFromCapture("host-0", o, quiet),
              ElementsAre("host-0: asked for host tracing (host tracer level 2); the capture "
                          "holds no host-thread event"));
  quiet.host_planes->host_plane = false;
  EXPECT_THAT(MissingFromCapture("host-0", o, quiet),
              ElementsAre("host-0: asked for host tracing (host tracer level 2); the capture "
                          "holds no /host:CPU plane"));
  // Host planes not looked at: nothing to say.
  quiet.host_planes.reset();
  EXPECT_THAT(MissingFromCapture("host-0", o, quiet), IsEmpty());
}

TEST(CaptureCheckTest, PythonTracingAskedForNeedsPythonEvents) {
  v1::CaptureOptions o;
  o.set_python_tracer_level(1);
  EXPECT_THAT(MissingFromCapture("host-1", o, V7xHost()),
              ElementsAre("host-1: asked for Python tracing (python tracer level 1); the capture "
                          "holds no Python event"));
  CaptureHolds traced = V7xHost();
  traced.host_planes->python_events = true;
  EXPECT_THAT(MissingFromCapture("host-1", o, traced), IsEmpty());
}

TEST(CaptureCheckTest, KernelProfilingWithoutAnyCounterSaysWhy) {
  CaptureHolds v5p;
  v5p.chips = {Tpu(0, "v5p", "TPU v5"), Tpu(1, "v5p", "TPU v5")};
  v5p.device_events = 10;
  v1::CaptureOptions o = KernelProfiling();
  o.add_counter_sets("TC_MEMORY");
  // One warning, not one per set: the chips cannot sample any.
  EXPECT_THAT(MissingFromCapture("host-0", o, v5p),
              ElementsAre("host-0: asked for kernel profiling; the capture holds no performance "
                          "counter samples: chip 0 is TPU v5, and counters are sampled inside "
                          "kernels on TPU7x and later only"));
  EXPECT_THAT(MissingFromCapture("host-0", o, V7xHost()),
              ElementsAre("host-0: asked for kernel profiling; the capture holds no performance "
                          "counter samples (the workload's profiler sent none: is its runtime new "
                          "enough to sample them?)"));
  CaptureHolds sampled = V7xHost();
  sampled.perf_series[0] = {Series("tc", 0, 10)};
  EXPECT_THAT(MissingFromCapture("host-0", KernelProfiling(), sampled), IsEmpty());
}

TEST(CaptureCheckTest, ACounterSetIsPresentWhenACounterOfItsComponentIs) {
  v1::CaptureOptions o = KernelProfiling();
  o.add_counter_sets("TC_MEMORY");
  o.add_counter_sets("SC_ACTIVITY");
  CaptureHolds tc_only = V7xHost();
  tc_only.perf_series[1] = {Series("tc", 1, 3), Series("tc", 0, 56)};
  EXPECT_THAT(MissingFromCapture("host-2", o, tc_only),
              ElementsAre("host-2: asked for SC_ACTIVITY counters; the capture holds none"));

  CaptureHolds both = tc_only;
  both.perf_series[0] = {Series("sctc", 1, 2)};  // one of SC_ACTIVITY's components, on die 1
  EXPECT_THAT(MissingFromCapture("host-2", o, both), IsEmpty());
}

// The power manager's counters come with every sample, on the TensorCore's die: they are not
// the TensorCore's statistics block, so they do not make a TC set present.
TEST(CaptureCheckTest, ThePowerManagersCountersAreNotATensorCoreSet) {
  std::string pwrmgr;
  for (const trace::PerfCounterId& c : trace::PerfCounterTable("v7x")) {
    if (absl::StrContains(c.name, "PWRMGR")) {
      pwrmgr = trace::PerfSeriesName("v7x", c.id);
      break;
    }
  }
  ASSERT_FALSE(pwrmgr.empty());
  v1::CaptureOptions o = KernelProfiling();
  o.add_counter_sets("TC_COMPUTATION");
  CaptureHolds h = V7xHost();
  h.perf_series[0] = {pwrmgr};
  EXPECT_THAT(MissingFromCapture("host-0", o, h),
              ElementsAre("host-0: asked for TC_COMPUTATION counters; the capture holds none"));
}

// A counter the published table does not name is kept as perf/id_N: it still counts for the
// block it lies in.
TEST(CaptureCheckTest, ACounterTheTableDoesNotNameCountsForItsBlock) {
  const std::optional<uint64_t> id = trace::ComponentCounterId("v7x", "scs", 0, 1000);
  ASSERT_TRUE(id.has_value());
  ASSERT_FALSE(trace::PerfCounterName("v7x", *id).has_value());
  v1::CaptureOptions o = KernelProfiling();
  o.add_counter_sets("SC_MEMORY");
  CaptureHolds h = V7xHost();
  h.perf_series[0] = {absl::StrCat(trace::kPerfSeriesPrefix, "id_", *id)};
  EXPECT_THAT(MissingFromCapture("host-0", o, h), IsEmpty());
  o.clear_counter_sets();
  o.add_counter_sets("TC_MEMORY");
  EXPECT_THAT(MissingFromCapture("host-0", o, h),
              ElementsAre("host-0: asked for TC_MEMORY counters; the capture holds none"));
}

TEST(CaptureCheckTest, CountersAskedByIndexAreEachLookedFor) {
  v1::CaptureOptions o = KernelProfiling();
  auto* tc = o.add_counters();
  tc->set_component("tc");
  for (uint32_t i : {10, 11, 56}) tc->add_indices(i);
  auto* scs = o.add_counters();
  scs->set_component("scs");
  scs->add_indices(0);
  scs->add_indices(3);
  CaptureHolds h = V7xHost();
  // 10 on die 0 of chip 0, 11 on die 1 of chip 1: each is held.
  h.perf_series[0] = {Series("tc", 0, 10)};
  h.perf_series[1] = {Series("tc", 1, 11)};
  EXPECT_THAT(MissingFromCapture("host-0", o, h),
              ElementsAre("host-0: asked for tc counters 10, 11, 56; the capture holds 10, 11, "
                          "not 56",
                          "host-0: asked for scs counters 0, 3; the capture holds none of them"));
  h.perf_series[0].insert(Series("tc", 0, 56));
  h.perf_series[1].insert(Series("scs", 0, 0));
  h.perf_series[1].insert(Series("scs", 1, 3));
  EXPECT_THAT(MissingFromCapture("host-0", o, h), IsEmpty());
}

TEST(CaptureCheckTest, EachAbsenceIsSaidInTheOrderDeviceHostPythonCounters) {
  v1::CaptureOptions o = KernelProfiling();
  o.set_device_tracer_level(1);
  o.set_host_tracer_level(3);
  o.set_python_tracer_level(1);
  o.add_counter_sets("SC_ACTIVITY");
  CaptureHolds h = V7xHost();
  h.device_events = 0;
  h.host_planes->thread_events = false;
  h.perf_series[0] = {Series("tc", 0, 1)};
  const std::vector<std::string> w = MissingFromCapture("h", o, h);
  ASSERT_EQ(w.size(), 4u);
  EXPECT_TRUE(absl::StartsWith(w[0], "h: asked for device tracing")) << w[0];
  EXPECT_TRUE(absl::StartsWith(w[1], "h: asked for host tracing")) << w[1];
  EXPECT_TRUE(absl::StartsWith(w[2], "h: asked for Python tracing")) << w[2];
  EXPECT_EQ(w[3], "h: asked for SC_ACTIVITY counters; the capture holds none");
}

}  // namespace
}  // namespace podprof::kernelprof
