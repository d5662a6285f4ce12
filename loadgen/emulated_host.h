// The hosts one podprof-loadgen process pretends to be: each with its own name, port and
// simulated clock, derived deterministically from the pod seed so a test can know the truth.
#ifndef PODPROF_LOADGEN_EMULATED_HOST_H_
#define PODPROF_LOADGEN_EMULATED_HOST_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "common/clock.h"
#include "common/skewed_clock.h"
#include "proto/podprof_types.pb.h"
#include "sim/pod_model.h"

namespace podprof::loadgen {

// One emulated agent. Name, index and clock are fixed at construction; ports are set once
// while the process starts listening, before any other thread sees the host. The running
// capture is guarded by mu.
struct EmulatedHost {
  EmulatedHost(int index, Clock& truth, int64_t offset_ns, double drift_ppm)
      : index(index), name("host-" + std::to_string(index)), clock(truth, offset_ns, drift_ppm) {}

  const int index;
  const std::string name;
  SkewedClock clock;
  int port = 0;          // podprof.v1.Agent, TCP
  int probe_port = 0;    // clock probes, UDP (the same number unless it was taken)
  int64_t start_ns = 0;  // when the emulated agent "started", on its own clock

  // Claims the host for capture `id`; FailedPrecondition naming the running capture if busy.
  absl::Status Begin(const std::string& id);
  void End();

  absl::Mutex mu;
  std::string active_capture ABSL_GUARDED_BY(mu);
};

// Host `index`'s clock error, uniform in [-max_offset_ns, max_offset_ns] and drift in
// [-max_drift_ppm, max_drift_ppm], from the pod seed alone.
int64_t HostClockOffsetNs(uint64_t pod_seed, int index, int64_t max_offset_ns);
double HostClockDriftPpm(uint64_t pod_seed, int index, double max_drift_ppm);

// Hosts first_host .. first_host + count - 1 on clocks skewed from `truth` (which must outlive
// them).
std::vector<std::unique_ptr<EmulatedHost>> MakeHosts(int first_host, int count, uint64_t pod_seed,
                                                     int64_t max_offset_ns, double max_drift_ppm,
                                                     Clock& truth);

// The host's description as its agent reports it: name, address, chips of the pod model, and
// its slice of a multi-slice job. `model` is any host's model of the pod (only the generation,
// chip count and slices are used).
podprof::v1::HostInfo DescribeHost(const EmulatedHost& host, const std::string& bind_address,
                                   const sim::PodModel& model);

}  // namespace podprof::loadgen

#endif  // PODPROF_LOADGEN_EMULATED_HOST_H_
