// Writes the XSpace a simulated TPU host writes for one profiling session, laid out as the
// real TPU profiler lays it out (plane, line and stat names as in a real v6e capture): to a
// stream a chip plane at a time (WriteXSpace, what the host does), or in memory (BuildXSpace,
// the same bytes parsed back, for tests and tools).
#ifndef PODPROF_SIM_XSPACE_BUILDER_H_
#define PODPROF_SIM_XSPACE_BUILDER_H_

#include <cstdint>
#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
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
  // Sample instants a chip keeps at most; past it, a warning in the XSpace says from when the
  // chip's counters are missing.
  int64_t max_samples_per_chip = kMaxSamplesPerChip;
  std::string host_name;
};

struct BuildResult {
  tensorflow::profiler::XSpace space;
  int64_t kernel_events = 0;
};

struct WriteResult {
  int64_t kernel_events = 0;
  int64_t bytes = 0;
  int64_t samples = 0;  // kernel-profiling sample instants, over all chips
  int64_t dropped_samples = 0;
};

// Every kernel, module run and step of this host's chips that starts inside the window, in
// host-clock time (with the device offset on device planes), written to `out` (which must be
// seekable) one chip plane at a time: memory holds one chip's kernels, never the counter
// samples. `cancelled` (may be empty) is asked between planes: true stops with CANCELLED,
// leaving `out` incomplete. DATA_LOSS when `out` fails. `step_of`, when given, as below.
absl::StatusOr<WriteResult> WriteXSpace(
    const PodModel& model, const SkewedClock& clock, const SessionWindow& window, std::ostream& out,
    const std::function<bool()>& cancelled = nullptr,
    const std::function<std::vector<ChipStep>(int64_t)>& step_of = nullptr);

// The same XSpace in memory (WriteXSpace's bytes parsed back).
BuildResult BuildXSpace(const PodModel& model, const SkewedClock& clock,
                        const SessionWindow& window);
// The same, with the steps from `step_of(index)` instead of model.Step(index) (which must be
// what it returns): lets a caller share the pod-wide part of each step between hosts.
BuildResult BuildXSpace(const PodModel& model, const SkewedClock& clock,
                        const SessionWindow& window,
                        const std::function<std::vector<ChipStep>(int64_t)>& step_of);

}  // namespace podprof::sim

#endif  // PODPROF_SIM_XSPACE_BUILDER_H_
