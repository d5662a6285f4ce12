// The XSpace schema as podprof uses it, in one place: the field numbers of xplane.proto's
// messages, the names of the planes, lines and stats the profiler writes, and a lookup from a
// stat's name to its kind.
//
// The streaming reader (trace/xspace_reader.cc) decodes the wire format by these numbers and
// names; the XProf exporter (export/xspace_export.cc) and the simulated host
// (sim/xspace_builder.cc) write the same names through the generated protobuf classes. Keeping
// them here means a reader and a writer cannot disagree on a name; tests/trace's schema test
// checks the field numbers against the generated code.
#ifndef PODPROF_TRACE_XSPACE_SCHEMA_H_
#define PODPROF_TRACE_XSPACE_SCHEMA_H_

#include <cstddef>
#include <cstdint>

#include "absl/strings/string_view.h"

namespace podprof::trace::xspace {

// Field numbers, from the XSpace schema (proto/xplane.proto, as in XLA's
// tsl/profiler/protobuf/xplane.proto). Named as the generated code names them
// (XPlane::kNameFieldNumber is XPlaneField::kName).
struct XSpaceField {
  static constexpr uint32_t kPlanes = 1, kErrors = 2, kWarnings = 3, kHostnames = 4;
};
struct XPlaneField {
  static constexpr uint32_t kId = 1, kName = 2, kLines = 3, kEventMetadata = 4, kStatMetadata = 5,
                            kStats = 6;
};
struct XLineField {
  static constexpr uint32_t kId = 1, kName = 2, kTimestampNs = 3, kEvents = 4, kDurationPs = 9,
                            kDisplayId = 10, kDisplayName = 11;
};
struct XEventField {
  // offset_ps and num_occurrences are a oneof: aggregated events carry no time of their own.
  static constexpr uint32_t kMetadataId = 1, kOffsetPs = 2, kDurationPs = 3, kStats = 4,
                            kNumOccurrences = 5;
};
struct XStatField {
  // Fields 2-8 are the value, a oneof.
  static constexpr uint32_t kMetadataId = 1, kDoubleValue = 2, kUint64Value = 3, kInt64Value = 4,
                            kStrValue = 5, kBytesValue = 6, kRefValue = 7, kCompressedStrValue = 8;
};
struct XEventMetadataField {
  static constexpr uint32_t kId = 1, kName = 2, kMetadata = 3, kDisplayName = 4, kStats = 5,
                            kChildId = 6;
};
struct XStatMetadataField {
  static constexpr uint32_t kId = 1, kName = 2, kDescription = 3;
};
// XPlane's event_metadata and stat_metadata are map<int64, Message>: on the wire, repeated
// entries of this message.
struct MapEntryField {
  static constexpr uint32_t kKey = 1, kValue = 2;
};
// The TPU profiler's CoreDetails message, stored as the bytes of a plane's `core_details` stat.
struct CoreDetailsField {
  static constexpr uint32_t kGlobalChipId = 5, kGlobalCoreId = 6;
};

// Line timestamps below this are relative to the profile start (post-processed captures, whose
// Task Environment holds the start); at or above it they are already ns since the epoch (older
// captures). 1e17 ns is early 1973.
inline constexpr int64_t kAbsoluteLineTimestampNs = 100'000'000'000'000'000;

// Plane names. Device planes are the prefix followed by the device ordinal.
inline constexpr absl::string_view kDevicePlanePrefix = "/device:";
inline constexpr absl::string_view kTpuPlanePrefix = "/device:TPU:";
inline constexpr absl::string_view kGpuPlanePrefix = "/device:GPU:";
inline constexpr absl::string_view kHostCpuPlane = "/host:CPU";
// The Python tracer's events, when the profiler did not merge them into kHostCpuPlane.
inline constexpr absl::string_view kPythonTracerPlane = "/host:python-tracer";
// The programs' HloProtos (event metadata per program, stat `Hlo Proto`).
inline constexpr absl::string_view kHostMetadataPlane = "/host:metadata";
// What podprof writes for a CPU device (JAX on CPU) and reads back: lines as a TPU plane's.
inline constexpr absl::string_view kCpuPlanePrefix = "/device:CPU:";
// The Megascale runtime's action graph (trace/megascale_trace.h).
inline constexpr absl::string_view kMegascaleTracePlane = "/device:CUSTOM:Megascale Trace";
// A `/host:CPU` event metadata name with this prefix marks a host of a multi-slice job: XProf's
// `megascale_stats` reads DCN data only from such hosts (docs/MEGASCALE.md 1.2).
inline constexpr absl::string_view kMegaScalePrefix = "MegaScale:";
inline constexpr absl::string_view kMegaScaleSendEvent = "MegaScale: Communication Transport Send";
// Holds the profile's window (profile_start_time, profile_stop_time) as plane stats.
inline constexpr absl::string_view kTaskEnvironmentPlane = "Task Environment";

// Line names of a device plane.
inline constexpr absl::string_view kXlaOpsLine = "XLA Ops";
inline constexpr absl::string_view kXlaModulesLine = "XLA Modules";
inline constexpr absl::string_view kStepsLine = "Steps";
// Named scopes inside kernels (a Pallas kernel's trace points).
inline constexpr absl::string_view kXlaTraceMeLine = "XLA TraceMe";
// Hardware counter samples, one event per sample named after its counter.
inline constexpr absl::string_view kCountersLine = "_counters_";
// `counters_<kernel>`: one execution of <kernel>, an event per counter with its counts over
// that execution (`counters_<digits>` is a periodic sample line, like `counters`).
inline constexpr absl::string_view kKernelCountersLinePrefix = "counters_";
// Kernel lines besides XLA Ops, as XProf names them: a Pallas kernel line (a name containing
// "Pallas" or "PALLAS", other than the scopes lines inside kernels) and LLO ops.
inline constexpr absl::string_view kLloOpsLine = "LLO Ops";
// GPU stream lines: "Stream #7(MemcpyH2D)".
inline constexpr absl::string_view kGpuStreamLinePrefix = "Stream #";

// Kernel profiling (TPU7x, docs/INTEROP.md "Kernel profiling data"). Lines of events inside a
// Pallas/Mosaic kernel: its primitives, its source lines, its LLO instructions (all units on
// one line, or one line per unit: "VALU Instructions", "MXU0 Instructions", ...).
inline constexpr absl::string_view kPallasPrimitivesLine = "Pallas Primitives";
inline constexpr absl::string_view kSourceLinesLine = "Source Lines";
inline constexpr absl::string_view kSourceCodeLine = "Source code";
inline constexpr absl::string_view kLloInstructionsLine = "LLO Instructions";
inline constexpr absl::string_view kInstructionsLineSuffix = " Instructions";
// Waits of the TensorCore on sync flags (DMA completions, other cores): `SyncWait` events.
inline constexpr absl::string_view kSyncFlagLine = "Tensor Core Sync Flag";
// The event on kSyncFlagLine whose time is the TensorCore's sync wait (what kernel profiling
// reports as the kernel's sync_wait).
inline constexpr absl::string_view kSyncWaitEvent = "SyncWait";
// A chip's SparseCore planes: "/device:TPU:0 SparseCore 1", or with a word before the number
// ("/device:TPU:0 SparseCore Vector 1").
inline constexpr absl::string_view kSparseCorePlaneInfix = " SparseCore ";

// The stats podprof reads or writes, by kind. kUnknown is every other name.
enum class Stat : uint8_t {
  kUnknown,
  // Of a device plane.
  kCoreDetails,
  kDeviceTypeString,
  kPeakTeraflops,
  kPeakHbmBw,
  kHasMegacore,
  // Pod-wide chip id and the device id it falls back to (XProf's Perf Counters tool).
  kGlobalChipId,
  kDeviceId,
  // Trace events the profiler lost (a plane's or line's stat).
  kDroppedTraces,
  // Of an event.
  kRunId,
  kDeviceOffsetPs,
  kDeviceDurationPs,
  kAllReduceUniqueId,
  kCounterValue,
  // A sampled performance counter's register (trace/perf_counters.h), what it counts and the
  // sets it belongs to.
  kPerformanceCounterId,
  kPerformanceCounterDescription,
  kPerformanceCounterSets,
  // Of an event's metadata.
  kHloCategory,
  kFlops,
  kBytesAccessed,
  kSource,
  kProgramId,
  // The op's id within its program. XProf's op statistics key every TPU op by (program_id,
  // symbol_id) and drop ops without both (xprof/utils/op_metrics_db_utils.cc).
  kSymbolId,
  kTfOp,
  kSourceStack,
  kMosaicMlir,
  // Of a host-thread event of JAX on CPU: the XLA instruction and module it runs, and a
  // StepTraceAnnotation's step.
  kHloOp,
  kHloModule,
  kStepNum,
  // Of a `/host:metadata` event metadata: the program's serialized HloProto.
  kHloProto,
  // Of a DCN send's metadata (multi-slice jobs): a serialized
  // tensorflow.profiler.DcnCollectiveInfoProto, who sends to whom (docs/MEGASCALE.md 1.9).
  kDcnCollectiveInfo,
  // Of the Task Environment plane.
  kProfileStartTime,
  kProfileStopTime,
};
inline constexpr size_t kStatCount = static_cast<size_t>(Stat::kProfileStopTime) + 1;

// Names as the profiler writes them, indexed by Stat ("" for kUnknown).
inline constexpr absl::string_view kStatNames[kStatCount] = {
    "",
    "core_details",
    "device_type_string",
    "peak_teraflops_per_second",
    "peak_hbm_bw_gigabytes_per_second",
    "has_megacore",
    "global_chip_id",
    "device_id",
    "dropped_traces",
    "run_id",
    "device_offset_ps",
    "device_duration_ps",
    "all_reduce_unique_id",
    "counter_value",
    "performance_counter_id",
    "performance_counter_description",
    "performance_counter_sets",
    "hlo_category",
    "flops",
    "bytes_accessed",
    "source",
    "program_id",
    "symbol_id",
    "tf_op",
    "source_stack",
    "mosaic_mlir",
    "hlo_op",
    "hlo_module",
    "step_num",
    "Hlo Proto",
    "dcn_collective_info",
    "profile_start_time",
    "profile_stop_time",
};

constexpr absl::string_view StatName(Stat stat) { return kStatNames[static_cast<size_t>(stat)]; }

// The kind of the stat named exactly `name`; kUnknown for any other name. A hash lookup (the
// table is built once, from kStatNames); thread-safe.
Stat StatOfName(absl::string_view name);

// A writer numbers its stat metadata 1..N in the order of its list of stats: the id it gives
// `stat`, or 0 when the list lacks it. Constant-folds when both are constants.
template <size_t N>
constexpr int64_t StatIdIn(const Stat (&stats)[N], Stat stat) {
  for (size_t i = 0; i < N; ++i) {
    if (stats[i] == stat) return static_cast<int64_t>(i) + 1;
  }
  return 0;
}

}  // namespace podprof::trace::xspace

#endif  // PODPROF_TRACE_XSPACE_SCHEMA_H_
