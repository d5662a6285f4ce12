// Builds the XSpace a simulated TPU host writes for one profiling session, laid out as the
// real TPU profiler lays it out (plane, line and stat names as in a real v6e capture).
#ifndef PODPROF_SIM_XSPACE_BUILDER_H_
#define PODPROF_SIM_XSPACE_BUILDER_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/skewed_clock.h"
#include "proto/xplane.pb.h"
#include "sim/kernel_profiling.h"
#include "sim/pod_model.h"

namespace podprof::sim {

struct SessionWindow {
  // The session's true start and end, ns since the epoch.
  int64_t true_start_ns = 0;
  int64_t true_end_ns = 0;
  // Extra shift of device timestamps only (a bad device-to-host mapping), ns.
  int64_t device_offset_ns = 0;
  // Emit `_counters_` hardware counter samples, one per kernel execution and counter.
  bool counters = false;
  // What the capture asked of kernel profiling; written only where the generation has it
  // (sim/kernel_profiling.h), a warning in the XSpace elsewhere.
  KernelProfilingRequest kernel_profiling;
  std::string host_name;
};

struct BuildResult {
  tensorflow::profiler::XSpace space;
  int64_t kernel_events = 0;
};

// Every kernel, module run and step of this host's chips that starts inside the window, in
// host-clock time (with the device offset on device planes).
BuildResult BuildXSpace(const PodModel& model, const SkewedClock& clock,
                        const SessionWindow& window);
// The same, with the steps from `step_of(index)` instead of model.Step(index) (which must be
// what it returns): lets a caller share the pod-wide part of each step between hosts.
BuildResult BuildXSpace(const PodModel& model, const SkewedClock& clock,
                        const SessionWindow& window,
                        const std::function<std::vector<ChipStep>(int64_t)>& step_of);

}  // namespace podprof::sim

#endif  // PODPROF_SIM_XSPACE_BUILDER_H_
