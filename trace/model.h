// The capture data model: what podprof keeps of one host's profile.
//
// A HostCapture is the product of reading one XSpace (trace/xspace_reader.h): the host, its
// chips, deduplicated kernel definitions, columnar event blocks (one per chip and timeline) and
// counter series. It holds no protobuf types so that storage/ and the exporters can use it
// without depending on the wire formats. Plain data; not synchronised.
#ifndef PODPROF_TRACE_MODEL_H_
#define PODPROF_TRACE_MODEL_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace podprof::trace {

// kCpu: the CPU device of JAX on CPU, whose ops the profiler records on the host's threads
// (`/host:CPU`); podprof reads them as one device, device_type kCpuDeviceType.
enum class DeviceKind { kTpu, kGpu, kCpu };

// Chip::device_type of a CPU device. It travels with the chip (ChipInfo.device_type_string),
// so an export far from the reader still writes a `/device:CPU:N` plane for it.
inline constexpr char kCpuDeviceType[] = "CPU";

// One accelerator: a `/device:TPU:N` or `/device:GPU:N` plane, or the CPU device.
struct Chip {
  DeviceKind kind = DeviceKind::kTpu;
  // N of `/device:TPU:N`: the chip's index on its host.
  int ordinal = 0;
  // Pod-wide chip id: the plane's `core_details`, else its `global_chip_id` stat, else its
  // `device_id` stat (as XProf's Perf Counters tool falls back); -1 when the capture does not
  // say.
  int64_t global_id = -1;
  // Short generation name ("v6e", "v5p"); empty when unknown.
  std::string generation;
  // The plane's `device_type_string`, e.g. "TPU v6 Lite".
  std::string device_type;
  // Peak dense compute, TFLOP/s; 0 when unknown.
  double peak_tflops = 0;
  // Peak HBM bandwidth, GB/s (1e9 bytes per second); 0 when unknown.
  double peak_hbm_gbps = 0;
};

// The host that produced a capture.
struct Host {
  // Host name: XSpace.hostnames[0], else the file name without `.xplane.pb`.
  std::string name;
  // Profile window from the `Task Environment` plane, ns since the Unix epoch on the host's
  // clock; 0 when the capture has no such plane.
  int64_t profile_start_ns = 0;
  int64_t profile_stop_ns = 0;
  std::vector<Chip> chips;
};

// What a timeline holds; decides how its events are used.
enum class LineKind {
  kOps,        // TPU `XLA Ops`: one event per kernel execution.
  kGpuStream,  // GPU `Stream #N(...)`: one event per kernel or memcpy.
  kModules,    // TPU `XLA Modules`: one event per program run.
  kSteps,      // `Steps`: one event per training step.
  kScopes,     // TPU `XLA TraceMe` and the kernel-profiling lines (IsScopesLine): events
               // inside kernels (a Pallas kernel's trace points, primitives, source lines,
               // LLO instructions, sync-flag waits), shown as child slices of the kernel they
               // fall in; not kernels.
};

// Prefix of the lines read from a chip's SparseCore planes: "SparseCore 1/Sparse Core Ops".
inline constexpr char kSparseCoreLinePrefix[] = "SparseCore ";

// True for the names of LineKind::kScopes lines: `XLA TraceMe`; `Pallas Primitives`,
// `Source Lines`, `Source code`, `LLO Instructions` and any other "... Instructions" line;
// `Tensor Core Sync Flag`; and a SparseCore plane's lines ("SparseCore <M>/<line>").
// (docs/INTEROP.md, "Kernel profiling data".)
bool IsScopesLine(std::string_view line);

// The kind of a timeline from its name alone ("XLA Ops", "XLA Modules", "Steps",
// "Stream #...", IsScopesLine), for timelines that travel or are stored without their plane.
LineKind LineKindOfName(const std::string& line);

// True for lines whose events are kernel executions (they feed kernel statistics).
inline bool IsKernelLine(LineKind kind) {
  return kind == LineKind::kOps || kind == LineKind::kGpuStream;
}

// A kernel (or module or step) definition, shared by every execution of it. Deduplicated
// within a HostCapture: the same HLO instruction on four chips is one KernelDef.
struct KernelDef {
  // XLA module (program) the kernel belongs to, e.g. "jit_train_step"; empty when unknown.
  std::string module;
  // Short op name, e.g. "fusion.12" (the event's display name, else its name).
  std::string name;
  // FNV-1a 64 of the full event name (the HLO text on TPU): tells apart same-named ops.
  uint64_t hlo_hash = 0;
  // `hlo_category` ("convolution fusion", "all-reduce", ...); derived for GPU kernels,
  // "xla module" for module runs and "step" for steps.
  std::string category;
  // XLA program id; 0 when unknown.
  uint64_t program_id = 0;
  // Static cost per execution: floating-point operations and HBM bytes; 0 when unknown.
  int64_t flops = 0;
  int64_t bytes_accessed = 0;
  // Source location (`file.py:38`) when the capture records it.
  std::string source;
  // The full HLO instruction text (the event metadata's name on TPU); empty when the capture
  // gives only the short name.
  std::string hlo_text;
  // The framework op path (`tf_op`, e.g. "jit(train_step)/dot_general") and the source stack
  // (`source_stack`, one frame per line), when recorded.
  std::string tf_op;
  std::string source_stack;
  // For Pallas/Mosaic custom calls: the kernel's lowered MLIR, when the capture carries it.
  std::string mlir;
};

// The custom-call target named in an HLO instruction (`custom_call_target="tpu_custom_call"`),
// or "" when `hlo_text` is not a custom call.
std::string CustomCallTarget(const std::string& hlo_text);
// True for a Pallas/Mosaic kernel: a TPU custom call (`tpu_custom_call`) or a kernel whose
// MLIR the capture carries.
bool IsPallasKernel(const KernelDef& k);

// Events of one timeline of one chip, stored column-wise.
struct EventBlock {
  // Index into Host::chips.
  int chip = 0;
  // The XLine's name, e.g. "XLA Ops".
  std::string line;
  LineKind kind = LineKind::kOps;
  // Start of the line: ns since the Unix epoch on the host's clock, or ns since an unknown
  // origin when the capture has no `Task Environment` plane (Host::profile_start_ns == 0).
  int64_t base_ns = 0;
  // Columns, all of the same length. Start times are ps relative to base_ns.
  std::vector<int64_t> start_ps;
  std::vector<int64_t> duration_ps;
  // Index into HostCapture::kernels.
  std::vector<uint32_t> kernel;
  // `all_reduce_unique_id` (the same on every chip taking part in one collective); 0 = none.
  std::vector<uint64_t> collective;
  // A block that arrived in the store's column encoding (trace/columns.h, kernels as the
  // host's kernel index + 1) and is kept so, undecoded, until it is stored: its columns above
  // are then empty and `encoded_events` counts its events (DecodeEncodedBlocks fills them in).
  std::string encoded;
  int64_t encoded_events = 0;

  // The decoded events (0 for a block still encoded).
  size_t size() const { return start_ps.size(); }
};

// How a counter's samples accumulate, which decides how it is attributed to kernels.
enum class CounterKind {
  // A running total (energy, cycles, bytes): what a kernel did is the increase over it.
  kCumulative,
  // A level or rate (busy fraction, utilization, power, memory in use): what a kernel saw is
  // the time-weighted mean over it, each sample holding until the next.
  kGauge,
};

// The kind of a counter from its name: running totals end in `_nj`, `_cycles`, `_count` or
// `_bytes` (energy, cycle, event and byte counters) or are sampled performance counters
// (`perf/...`, trace/perf_counters.h); everything else is a gauge.
CounterKind CounterKindOfName(const std::string& name);

// Samples of one hardware counter of one chip (from `_counters_` events).
struct CounterSeries {
  // Index into Host::chips.
  int chip = 0;
  // Counter name (the event's name), e.g. "mxu_busy".
  std::string name;
  // Sample times: ns since the Unix epoch on the host's clock (see EventBlock::base_ns).
  std::vector<int64_t> time_ns;
  std::vector<double> value;
  // The samples in the column encoding (trace/columns.h) when they arrived that way on a
  // capture stream: stored as they are rather than encoded again. Empty otherwise. A received
  // series holds only this (time_ns and value empty) until DecodeEncodedSeries: a host's
  // samples take four times the room decoded, and only the hosts being analysed need them.
  std::string encoded;

  CounterKind kind() const { return CounterKindOfName(name); }
};

// Everything podprof keeps of one host's capture.
struct HostCapture {
  Host host;
  std::vector<KernelDef> kernels;
  std::vector<EventBlock> blocks;
  std::vector<CounterSeries> counters;
  // Problems that did not stop reading (profiler errors, skipped data), for the user.
  std::vector<std::string> warnings;

  // Heap bytes held by this capture (capacities, not sizes): the "kept data" that bounds the
  // reader's memory use.
  size_t KeptBytes() const;
  // Total number of events over all blocks, those still encoded included.
  size_t EventCount() const;
};

}  // namespace podprof::trace

#endif  // PODPROF_TRACE_MODEL_H_
