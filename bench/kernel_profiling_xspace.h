// A kernel-profiling capture of a v7x host (docs/INTEROP.md, "Kernel profiling data") written
// straight to XSpace bytes, for bench_insight --kernel-profiling.
//
// At 1 us sampling a chip writes a million sample lines a second, each with an event per
// counter: tens of millions of messages, which the generated protobuf classes (and so
// sim::BuildXSpace) take minutes and gigabytes of objects to build. This writes the wire format
// itself (varints and length-delimited fields, by the numbers in trace/xspace_schema.h), one
// plane at a time, so the only large allocation is the bytes.
#ifndef PODPROF_BENCH_KERNEL_PROFILING_XSPACE_H_
#define PODPROF_BENCH_KERNEL_PROFILING_XSPACE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace podprof::bench {

struct KernelProfilingSpec {
  int chips = 4;
  // The window sampled, from `start_ns` (ns since the epoch: line timestamps are absolute).
  int64_t start_ns = 1'800'000'000'000'000'000;
  int64_t window_ns = 1'000'000'000;
  // Sampling interval of every counter, ns.
  int64_t interval_ns = 1000;
  // Kernel executions last between these, back to back on each chip's XLA Ops line.
  int64_t min_kernel_ns = 10'000;
  int64_t max_kernel_ns = 200'000;
};

struct KernelProfilingXSpace {
  std::string bytes;
  // The perf series each chip should read back as (trace::PerfSeriesName), one per counter.
  std::vector<std::string> series;
  int64_t samples_per_series = 0;
  // Kernel executions over all chips, those of the Pallas kernel, and scope events (Pallas
  // Primitives and Tensor Core Sync Flag) over all chips.
  int64_t executions = 0;
  int64_t pallas_executions = 0;
  int64_t scope_events = 0;
};

// The TensorCore counter indices sampled on each die: TC_COMPUTATION and TC_MEMORY, what
// podprof's utilizations need.
inline constexpr int kSampledTcIndices[] = {0,  10, 11, 31, 32, 33, 34, 35,
                                            37, 38, 56, 57, 58, 73, 74, 75};

// The capture `spec` describes: a plane per chip ("/device:TPU:N", device_type_string
// "TPU v7x"), each with an XLA Ops line of kernels (a few XLA ops and a Pallas custom call),
// Pallas Primitives and Tensor Core Sync Flag lines inside the Pallas executions, and a line
// per sample instant (id = sample number) with one event per counter carrying
// performance_counter_id and counter_value (uint64 running totals). Deterministic.
// INVALID_ARGUMENT for a spec without chips, window or interval; INTERNAL if the counter
// table lacks an index.
absl::StatusOr<KernelProfilingXSpace> BuildKernelProfilingXSpace(const KernelProfilingSpec& spec);

}  // namespace podprof::bench

#endif  // PODPROF_BENCH_KERNEL_PROFILING_XSPACE_H_
