"""Cloud TPU's own metrics client, `tpu-info` (PyPI tpu-info, pinned in requirements.txt),
against podprof-simhost's RuntimeMetricService.

Every metric tpu-info reads over gRPC is read here with tpu-info's library functions (the ones
behind its CLI tables; they take the service address, which the CLI leaves at
localhost:8431), pointed at a simulated v5p or v7x host. tpu-info's device detection (PCI
sysfs, /dev/vfio) is not used: this machine has no TPU.

The expected numbers come from the bytes the host served, read independently: tpu-info talks
to the host through a recording gRPC proxy, and each recorded response is decoded with
podprof's own proto/tpu_metric_service.proto (compiled here with protoc into a separate
descriptor pool). So a field number, type or attribute that differs between podprof's proto and
tpu-info's shows up as a difference, and a metric tpu-info asks for and the host lacks fails
the call. The simulated host's values move with its clock (a step takes a few ms); recording
what was served makes each comparison exact. Facts of the model (chip ids, HBM capacity, the
program id in the truth file) are checked on top.

tpu-info's metrics outside RuntimeMetricService are not the simulated host's to serve:
`tensorcore_utilization` is read in-process from the libtpu SDK, and the Orbax and Grain
metrics are scraped from a Prometheus endpoint of the workload.
"""
import contextlib
import dataclasses
import os
import re
import shutil
import subprocess
import threading
import time
from concurrent import futures

import grpc
import pytest
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from peerlib import BIN, SOURCE, free_port, wait_file
from tpu_info import device, metrics

SERVICE = "/tpu.monitoring.runtime.RuntimeMetricService/"
GIB = 1 << 30
CHIPS = 4
# The host under test is the second of a two-host pod, so that pod-wide chip and core ids
# differ from the host-local device ids the metrics carry.
HOSTS, HOST_INDEX = 2, 1

# What each generation is to the simulated host and to tpu-info.
GENERATIONS = {
    "v5p": dict(chip=device.TpuChip.V5P, hbm=95 * GIB, cores_per_chip=1),
    "v7x": dict(chip=device.TpuChip.V7X, hbm=192 * GIB, cores_per_chip=2),
}

# tpu-info's metrics over gRPC, each checked below, and those it reads elsewhere.
CHECKED = {
    "hbm_usage", "duty_cycle_percent", "runtime_hbm_utilization", "tensorcore_idle_duration",
    "hlo_queue_size", "hlo_exec_timing", "buffer_transfer_latency",
    "inbound_buffer_transfer_latency", "host_to_device_transfer_latency",
    "device_to_host_transfer_latency", "collective_e2e_latency", "host_compute_latency",
    "grpc_tcp_min_rtt", "grpc_tcp_delivery_rate", "core_state", "sequencer_state",
    "sequencer_state_detailed", "queued_programs",
}
NOT_GRPC = {"tensorcore_utilization"}


def protoc():
    """The protoc the build used (CMakeCache), else the one on PATH."""
    cache = BIN.parent / "CMakeCache.txt"
    if cache.is_file():
        m = re.search(r"^Protobuf_PROTOC_EXECUTABLE:FILEPATH=(.+)$", cache.read_text(), re.M)
        if m and shutil.which(m.group(1)):
            return m.group(1)
    found = shutil.which("protoc")
    assert found, "protoc is needed to read podprof's proto (install protobuf-compiler)"
    return found


class PodprofProto:
    """podprof's proto/tpu_metric_service.proto, in a descriptor pool of its own (its full
    names are the same as tpu-info's, which live in the default pool)."""

    def __init__(self, out):
        descriptors = out / "tpu_metric_service.desc"
        includes = [f"-I{SOURCE / 'proto'}"]
        # google/protobuf/timestamp.proto: where Debian's protobuf-compiler keeps it.
        if os.path.isdir("/usr/include/google/protobuf"):
            includes.append("-I/usr/include")
        subprocess.run([protoc(), *includes, "--include_imports", f"--descriptor_set_out={descriptors}",
                        str(SOURCE / "proto" / "tpu_metric_service.proto")], check=True)
        files = descriptor_pb2.FileDescriptorSet.FromString(descriptors.read_bytes())
        self.pool = descriptor_pool.DescriptorPool()
        for f in files.file:
            self.pool.Add(f)

    def message(self, name):
        return message_factory.GetMessageClass(
            self.pool.FindMessageTypeByName(f"tpu.monitoring.runtime.{name}"))

    def enum_name(self, enum, number):
        return self.pool.FindEnumTypeByName(f"tpu.monitoring.runtime.{enum}").values_by_number[
            number].name


class Recorder(grpc.GenericRpcHandler):
    """A gRPC proxy in front of the simulated host that keeps the bytes of every exchange.
    It listens with local-connection credentials, as libtpu's service does."""

    def __init__(self, target):
        self._channel = grpc.insecure_channel(target)
        self._lock = threading.Lock()
        self._calls = []
        self._server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        self._server.add_generic_rpc_handlers([self])
        port = self._server.add_secure_port(
            "127.0.0.1:0", grpc.local_server_credentials(grpc.LocalConnectionType.LOCAL_TCP))
        self.address = f"127.0.0.1:{port}"
        self._server.start()

    def service(self, details):
        method = details.method
        forward = self._channel.unary_unary(method)  # no (de)serializers: bytes both ways

        def handle(request, context):
            try:
                response = forward(request, timeout=10)
            except grpc.RpcError as e:
                with self._lock:
                    self._calls.append((method, request, e))
                context.abort(e.code(), e.details())
            with self._lock:
                self._calls.append((method, request, response))
            return response

        return grpc.unary_unary_rpc_method_handler(handle)

    @contextlib.contextmanager
    def recording(self):
        """The exchanges made inside the block, as (method, request, response bytes)."""
        with self._lock:
            start = len(self._calls)
        calls = []
        yield calls
        with self._lock:
            calls.extend(self._calls[start:])
        for method, _, response in calls:
            assert not isinstance(response, Exception), f"{method} failed: {response}"

    def stop(self):
        self._server.stop(None)
        self._channel.close()


@dataclasses.dataclass
class Host:
    generation: str
    chip: device.TpuChip
    hbm: int
    cores_per_chip: int
    metrics_address: str  # the simulated host itself
    proxy: Recorder
    proto: PodprofProto
    truth: dict
    host_name: str

    def served(self, calls, metric_name):
        """The recorded answer to GetRuntimeMetric(metric_name), decoded with podprof's proto."""
        request_type = self.proto.message("MetricRequest")
        found = [response for method, request, response in calls
                 if method == SERVICE + "GetRuntimeMetric"
                 and request_type.FromString(request).metric_name == metric_name]
        assert len(found) == 1, f"{metric_name}: {len(found)} answers in {calls}"
        response = self.proto.message("MetricResponse").FromString(found[0])
        assert response.metric.name == metric_name
        assert response.metric.metrics, f"{metric_name}: no values served"
        return response.metric.metrics


@pytest.fixture(params=sorted(GENERATIONS))
def host(request, out, procs):
    generation = request.param
    ready, truth_file = out / f"{generation}.ready.json", out / f"{generation}.truth.json"
    host_name = f"tpu-info-{generation}"
    for stale in (ready, truth_file):  # left by an earlier run in the same folder
        stale.unlink(missing_ok=True)
    sim = procs.start(f"simhost-{generation}", [
        BIN / "podprof-simhost", f"--profiler-port={free_port()}", "--metrics-port=0",
        "--bind=127.0.0.1", f"--generation={generation}", f"--chips={CHIPS}",
        f"--hosts={HOSTS}", f"--host-index={HOST_INDEX}", "--counters",
        f"--host-name={host_name}", f"--truth-file={truth_file}", f"--ready-file={ready}"])
    info = wait_file(ready, 30, sim)
    address = f"127.0.0.1:{info['metrics_port']}"
    proxy = Recorder(address)
    try:
        yield Host(generation=generation, **GENERATIONS[generation], metrics_address=address,
                   proxy=proxy, proto=PodprofProto(out), truth=wait_file(truth_file, 10, sim),
                   host_name=host_name)
    finally:
        proxy.stop()


def device_id(metric):
    """The device a gauge is about: `device-id`, an int (what tpu-info sorts and reports by)."""
    assert metric.attribute.key == "device-id"
    assert metric.attribute.value.WhichOneof("attr") == "int_attr"
    return metric.attribute.value.int_attr


def device_ordinal(metric):
    """The device an HLO metric is about: `device_ordinal` in its key-value list."""
    assert metric.attribute.value.WhichOneof("attr") == "kvlist_attr"
    found = [a.value for a in metric.attribute.value.kvlist_attr.attributes
             if a.key == "device_ordinal"]
    assert len(found) == 1, metric.attribute
    assert found[0].WhichOneof("attr") == "string_attr" and found[0].string_attr.isdigit()
    return int(found[0].string_attr)


def gauge(metric, kind):
    assert metric.WhichOneof("measure") == "gauge"
    assert metric.gauge.WhichOneof("value") == kind, metric.gauge
    return getattr(metric.gauge, kind)


def percentile(dist, q):
    """The observation of 0-based rank floor(q * count), placed in its exponential bucket by
    linear interpolation between the bucket's bounds: what a reader of bucket counts alone can
    know. tpu-info reports 1 where it has nothing to interpolate: no observations, or a rank in
    the underflow bucket (below the scale)."""
    if dist.count == 0:
        return 1.0
    assert sum(dist.bucket_counts) == dist.count
    exp = dist.bucket_options.exponential_buckets
    assert dist.bucket_options.WhichOneof("options") == "exponential_buckets"
    assert len(dist.bucket_counts) == exp.num_finite_buckets + 2
    rank = int(dist.count * q)
    below = 0
    for i, n in enumerate(dist.bucket_counts):
        if below + n > rank:
            if i == 0:
                return 1.0
            low = exp.scale * exp.growth_factor ** (i - 1)
            return low + (rank - below) / n * (low * exp.growth_factor - low)
        below += n
    raise AssertionError("rank beyond the buckets")


def approx(x):
    return pytest.approx(x, rel=1e-12, abs=1e-12)


def test_tpu_info_names_only_metrics_the_host_serves(host):
    """Every libtpu metric name tpu-info knows is listed by the host, and every tpu-info metric
    read over gRPC is covered by this file."""
    grpc_metrics = metrics.VALID_METRICS - set(metrics.ORBAX_SHORT_TO_LONG_MAP) - set(
        metrics.PYGRAIN_SHORT_TO_LONG_MAP)
    assert grpc_metrics == CHECKED | NOT_GRPC, "tpu-info's metrics changed; cover the new ones"
    proto = host.proto
    channel = grpc.insecure_channel(host.metrics_address)
    call = channel.unary_unary(SERVICE + "ListSupportedMetrics",
                               request_serializer=lambda m: m.SerializeToString(),
                               response_deserializer=proto.message(
                                   "ListSupportedMetricsResponse").FromString)
    listed = {m.metric_name for m in call(proto.message("ListSupportedMetricsRequest")(),
                                          timeout=10).supported_metric}
    channel.close()
    wanted = {m.value for m in metrics.MetricName} | set(metrics.LIBTPU_METRIC_MAP.values())
    assert wanted <= listed, f"not served: {sorted(wanted - listed)}"


def test_tpu_info_reaches_the_host_directly(host):
    """tpu-info's own channel (local-connection credentials) talks to the host's port as it
    does to libtpu's; capacities do not move with the clock, so they compare without a proxy."""
    usage = (metrics.get_chip_usage_new if host.chip is device.TpuChip.V7X
             else metrics.get_chip_usage)(host.chip, host.metrics_address)
    assert [u.device_id for u in usage] == list(range(CHIPS))
    assert {u.total_memory for u in usage} == {host.hbm}


def test_hbm_usage_and_duty_cycle(host):
    # The CLI's choice (cli_helper.get_device_usage): v7x reports duty cycle per device.
    read = metrics.get_chip_usage_new if host.chip is device.TpuChip.V7X else metrics.get_chip_usage
    with host.proxy.recording() as calls:
        got = read(host.chip, host.proxy.address)
    total = {device_id(m): gauge(m, "as_int")
             for m in host.served(calls, "tpu.runtime.hbm.memory.total.bytes")}
    used = {device_id(m): gauge(m, "as_int")
            for m in host.served(calls, "tpu.runtime.hbm.memory.usage.bytes")}
    duty = {device_id(m): gauge(m, "as_double")
            for m in host.served(calls, "tpu.runtime.tensorcore.dutycycle.percent")}
    assert sorted(total) == sorted(used) == sorted(duty) == list(range(CHIPS))
    assert got == [metrics.Usage(d, used[d], total[d], duty[d]) for d in range(CHIPS)]
    for u in got:
        assert u.total_memory == host.hbm
        assert 0 < u.memory_usage < u.total_memory
        assert 0 < u.duty_cycle_pct <= 100


def test_hbm_bandwidth_and_idle_time(host):
    with host.proxy.recording() as calls:
        bandwidth = metrics.get_runtime_hbm_utilization(host.proxy.address)
        idle = metrics.get_tensorcore_idle_duration(host.proxy.address)
    served_bw = host.served(calls, "tpu.runtime.hbm.utilization.percent")
    served_idle = host.served(calls, "tpu.runtime.tensorcore.idle_duration.seconds")
    assert bandwidth == sorted((device_id(m), gauge(m, "as_double")) for m in served_bw)
    assert idle == sorted((device_id(m), gauge(m, "as_double")) for m in served_idle)
    assert [d for d, _ in bandwidth] == [d for d, _ in idle] == list(range(CHIPS))
    assert all(0 < v < 100 for _, v in bandwidth)
    assert all(v >= 0 for _, v in idle)


def test_hlo_queue_size_and_execution_timing(host):
    with host.proxy.recording() as calls:
        queues = metrics.get_hlo_queue_size(host.chip, host.proxy.address)
        timings = metrics.get_hlo_exec_timing(host.chip, host.proxy.address)
    served_queues = host.served(calls, "hlo.queue.size.gauge")
    served_timings = host.served(calls, "hlo.execution.timing.distribution.microseconds")
    assert queues == sorted(metrics.HloQueueSize(device_ordinal(m), gauge(m, "as_int"))
                            for m in served_queues)
    expected = {}
    for m in served_timings:
        assert m.WhichOneof("measure") == "distribution"
        d = m.distribution
        expected[device_ordinal(m)] = [d.mean] + [percentile(d, q) for q in (0.5, 0.9, 0.95, 0.999)]
    assert [t.device_id for t in timings] == sorted(expected) == list(range(CHIPS))
    for t in timings:
        assert [t.mean, t.p50, t.p90, t.p95, t.p999] == [approx(v) for v in expected[t.device_id]]
        # A step's program runs for milliseconds.
        assert 100 <= t.p50 <= t.p90 <= t.p95 <= t.p999 < 1e5
    # One run of the step's program per step on every chip, counted since the host started.
    counts = {m.distribution.count for m in served_timings}
    assert len(counts) == 1 and counts.pop() > 0
    assert all(q.queue_size >= 0 for q in queues)


LATENCIES = {
    "buffer_transfer_latency": True, "inbound_buffer_transfer_latency": True,
    "host_to_device_transfer_latency": True, "device_to_host_transfer_latency": True,
    "collective_e2e_latency": True, "host_compute_latency": True,
    # Connection metrics: one distribution for all of the host's connections, no size.
    "grpc_tcp_min_rtt": False, "grpc_tcp_delivery_rate": False,
}


@pytest.mark.parametrize("metric_arg", sorted(LATENCIES))
def test_transfer_latency_distributions(host, metric_arg):
    name = metrics.LIBTPU_METRIC_MAP[metric_arg]
    # The unit the client prints (Mbps for the delivery rate, else us) is the one in the name.
    assert (".Mbps." in name) == (metric_arg == "grpc_tcp_delivery_rate")
    assert (".microsecond." in name) == (metric_arg != "grpc_tcp_delivery_rate")
    with host.proxy.recording() as calls:
        got = metrics.get_transfer_latency(metric_arg, host.proxy.address)
    expected = {}
    for m in host.served(calls, name):
        assert m.attribute.key == "megascale"
        assert m.attribute.value.WhichOneof("attr") == "kvlist_attr"
        attributes = {a.key: a.value for a in m.attribute.value.kvlist_attr.attributes}
        if LATENCIES[metric_arg]:
            assert attributes["buffer-size"].WhichOneof("attr") == "string_attr"
            size = attributes["buffer-size"].string_attr
            assert re.fullmatch(r"[1-9][0-9]*(B|KB|MB|GB)\+", size), size
        else:
            assert not attributes
            size = "N/A"  # what tpu-info shows for a distribution without a size
        assert size not in expected, f"{size} served twice"
        assert m.WhichOneof("measure") == "distribution" and m.distribution.count > 0
        # Cumulative: the interval the observations accumulate over is given.
        assert 0 < m.start_timestamp.ToNanoseconds() < m.timestamp.ToNanoseconds()
        expected[size] = [percentile(m.distribution, q) for q in (0.5, 0.9, 0.95, 0.999)]
    assert {d.transfer_size for d in got} == set(expected) and len(got) == len(expected)
    for d in got:
        assert [d.p50, d.p90, d.p95, d.p999] == [approx(v) for v in expected[d.transfer_size]]
        assert 1 <= d.p50 <= d.p90 <= d.p95 <= d.p999


@pytest.mark.parametrize("include_hlo_info", [False, True])
def test_core_sequencer_and_queued_program_state(host, include_hlo_info):
    """`core_state`, `sequencer_state` and `queued_programs` read GetTpuRuntimeStatus without
    HLO information, `sequencer_state_detailed` with it."""
    with host.proxy.recording() as calls:
        got = metrics.get_tpuz_info(host.proxy.address, include_hlo_info=include_hlo_info)
    assert [c[0] for c in calls] == [SERVICE + "GetTpuRuntimeStatus"]
    request = host.proto.message("GetTpuRuntimeStatusRequest").FromString(calls[0][1])
    assert request.include_hlo_info == include_hlo_info
    status = host.proto.message("GetTpuRuntimeStatusResponse").FromString(calls[0][2])
    assert status.host_name == host.host_name

    def optional(message, field):
        return getattr(message, field) if message.HasField(field) else None

    expected = []
    for core_id in sorted(status.core_states):
        s = status.core_states[core_id]
        expected.append(dict(
            global_core_id=core_id, chip_id=s.core_id.chip_id,
            core_on_chip_index=s.core_id.core_on_chip.index,
            core_type=host.proto.enum_name("TpuCoreType", s.core_id.core_on_chip.type),
            xdb_server=s.xdb_server_running,
            sequencer_states=[dict(
                sequencer_type=host.proto.enum_name("TpuSequencerType", q.sequencer_type),
                sequencer_index=q.sequencer_index, pc=q.pc, tag=q.tag, tracemark=q.tracemark,
                program_id=q.program_id, run_id=q.run_id,
                hlo_location=optional(q, "hlo_location"),
                hlo_detailed_info=optional(q, "hlo_detailed_info")) for q in s.sequencer_info],
            program_fingerprint=s.program_fingerprint.hex(),
            error_message=optional(s, "error_message"),
            queued_programs=[dict(run_id=p.run_id, launch_id=p.launch_id,
                                  program_fingerprint=p.program_fingerprint.hex())
                             for p in s.queued_program_info]))
    assert [dataclasses.asdict(c) for c in got] == expected

    # The model: this host's chips are pod-wide chips 4..7, each with its TensorCores.
    cores = host.cores_per_chip
    first_chip = HOST_INDEX * CHIPS
    assert [(c.chip_id, c.core_on_chip_index, c.global_core_id) for c in got] == [
        (chip, k, chip * cores + k) for chip in range(first_chip, first_chip + CHIPS)
        for k in range(cores)]
    fingerprint = host.truth["program_id"].to_bytes(8, "big").hex()
    for c in got:
        assert c.core_type == "TPU_CORE_TYPE_TENSOR_CORE" and not c.xdb_server
        assert c.error_message is None and c.program_fingerprint == fingerprint
        [seq] = c.sequencer_states
        assert seq.sequencer_type == "TPU_SEQUENCER_TYPE_TENSOR_CORE_SEQUENCER"
        assert seq.program_id % 2**64 == host.truth["program_id"]
        assert seq.run_id == seq.tracemark > 0
        assert [(p.run_id, p.program_fingerprint) for p in c.queued_programs] == [
            (seq.run_id + 1, fingerprint)]
        # HLO information only when asked for, and then for a core inside a kernel.
        if not include_hlo_info or seq.tag == 0:
            assert seq.hlo_location is None and seq.hlo_detailed_info is None
        else:
            assert seq.hlo_location and seq.hlo_detailed_info.startswith(f"%{seq.hlo_location} ")
    # The step is the one the host's clock is in (steps are a few ms long, and every core of
    # one answer sees the same instant).
    assert len({c.sequencer_states[0].run_id for c in got}) == 1
    step_ns = host.truth["step_period_ns"]
    assert abs(got[0].sequencer_states[0].run_id * step_ns - time.time_ns()) < 60e9
