// The names of libtpu's runtime metrics and of the attributes that say which chip a value is
// about: the other half of the contract of proto/tpu_metric_service.proto, whose messages carry
// any name. One table, as trace/xspace_schema.h is for XSpace: the agent reads by it
// (agent/runtime_metrics.h) and the simulated host serves by it (sim/services.cc), so that the
// two cannot drift apart. The names are the runtime's own, as Cloud TPU's client (`tpu-info`)
// asks for them; tests/peers/test_tpu_info.py holds the simulator to that client.
//
// Header-only and dependency-free, so that every library that may include proto/ may include it.
#ifndef PODPROF_PROTO_TPU_METRIC_NAMES_H_
#define PODPROF_PROTO_TPU_METRIC_NAMES_H_

namespace podprof::tpu_metrics {

// Gauges, one Metric per chip, the chip in the attribute's `int_attr` (key kDeviceIdKey).
// HBM in use, bytes.
inline constexpr char kHbmUsageBytes[] = "tpu.runtime.hbm.memory.usage.bytes";
// HBM capacity, bytes.
inline constexpr char kHbmTotalBytes[] = "tpu.runtime.hbm.memory.total.bytes";
// TensorCore busy share, percent.
inline constexpr char kDutyCyclePercent[] = "tpu.runtime.tensorcore.dutycycle.percent";
// Time since the TensorCore last ran a kernel, seconds.
inline constexpr char kIdleSeconds[] = "tpu.runtime.tensorcore.idle_duration.seconds";
// HBM bandwidth used, percent of the peak.
inline constexpr char kHbmBandwidthPercent[] = "tpu.runtime.hbm.utilization.percent";

// Per chip, the chip as `device_ordinal` in the attribute's key-value list (key
// kDeviceAttributeKey), a decimal string on current runtimes and an int on older ones.
// HLO programs queued or running (a gauge).
inline constexpr char kQueueSize[] = "hlo.queue.size.gauge";
// Execution time of each run of a compiled program (a jitted step), microseconds: a cumulative
// distribution since Metric.start_timestamp.
inline constexpr char kProgramTimingUs[] = "hlo.execution.timing.distribution.microseconds";

// The host's multi-slice ("megascale") transfers: cumulative distributions since
// Metric.start_timestamp, one Metric per buffer-size class (kBufferSizeKey in the key-value
// list) or, for the connection metrics, one for the host (an empty list).
inline constexpr char kDcnTransferUs[] =
    "megascale.dcn_transfer_latencies.microsecond.cumulative.distribution";
inline constexpr char kDcnInboundTransferUs[] =
    "megascale.dcn_inbound_transfer_latencies.microsecond.cumulative.distribution";
inline constexpr char kHostToDeviceTransferUs[] =
    "megascale.host_to_device_transfer_latencies.microsecond.cumulative.distribution";
inline constexpr char kDeviceToHostTransferUs[] =
    "megascale.device_to_host_transfer_latencies.microsecond.cumulative.distribution";
// Collectives from launch to result, host reduction included.
inline constexpr char kCollectiveEndToEndUs[] =
    "megascale.collective_end_to_end_latencies.microsecond.cumulative.distribution";
inline constexpr char kHostComputeUs[] =
    "megascale.mxla_compute_latencies.microsecond.cumulative.distribution";
inline constexpr char kTcpMinRttUs[] =
    "megascale.grpc_tcp_min_rtt.microsecond.cumulative.distribution";
inline constexpr char kTcpDeliveryRateMbps[] =
    "megascale.grpc_tcp_delivery_rate.Mbps.cumulative.distribution";

// Attribute keys. A gauge's chip: Attribute.key kDeviceIdKey with the chip in int_attr.
inline constexpr char kDeviceIdKey[] = "device-id";
// An hlo.* metric's chip: Attribute.key kDeviceAttributeKey, a key-value list holding
// kDeviceOrdinalKey (and kCoreTypeKey).
inline constexpr char kDeviceAttributeKey[] = "device";
inline constexpr char kDeviceOrdinalKey[] = "device_ordinal";
inline constexpr char kCoreTypeKey[] = "core_type";
// A megascale metric: Attribute.key kMegascaleKey, its size class under kBufferSizeKey.
inline constexpr char kMegascaleKey[] = "megascale";
inline constexpr char kBufferSizeKey[] = "buffer-size";

}  // namespace podprof::tpu_metrics

#endif  // PODPROF_PROTO_TPU_METRIC_NAMES_H_
