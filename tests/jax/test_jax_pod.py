"""A real JAX job of four processes on this machine, captured by podprof as a pod.

Four Python processes form one JAX job (tests/jax/pod_worker.py: jax.distributed on a
loopback coordinator, CPU collectives over gloo), each serving JAX's own profiler. One
podprof-agent per process and one aggregator, as on a real pod; then `podprof capture`.
JAX on CPU records its XLA ops on host threads (`/host:CPU`, stats hlo_op/hlo_module/run_id)
and each program's HLO on `/host:metadata`: podprof must read those as the CPU device's
kernels (trace/xspace_reader.cc), with the psum as one collective across the four hosts.
"""
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from peerlib import (BIN, OUT, SOURCE, Processes, free_port, podprof, podprof_json,
                     start_aggregator, wait_file)

HOSTS = 4
WORKER = SOURCE / "tests/jax/pod_worker.py"
# One machine has one clock: every host's correction must be within this of zero. Measured:
# a few hundred ns from the probes; the bound leaves room for probe round trips on a 2-core
# machine that four JAX processes keep busy (the probes' error is at most half a round trip).
MAX_CORRECTION_NS = 100_000


@pytest.fixture(scope="module")
def pod():
    folder = OUT / "jax_pod"
    shutil.rmtree(folder, ignore_errors=True)  # a rerun's exports and ready files start anew
    procs = Processes(folder)
    try:
        yield start_pod(procs, folder)
    finally:
        procs.stop()


def start_pod(procs, folder):
    agg = start_aggregator(procs, folder)
    address = f"127.0.0.1:{agg['port']}"
    coordinator = f"127.0.0.1:{free_port()}"
    workers = []
    for i in range(HOSTS):
        port = free_port()
        p = procs.start(f"worker{i}", [sys.executable, WORKER, "--process-id", i,
                                       "--num-processes", HOSTS, "--coordinator", coordinator,
                                       "--profiler-port", port, "--seconds", 600,
                                       "--ready-file", folder / f"worker{i}.json"])
        workers.append((p, port))
    for i, (p, _) in enumerate(workers):
        wait_file(folder / f"worker{i}.json", 120, p)
    facade = free_port()
    for i, (_, port) in enumerate(workers):
        tmp = folder / f"agent{i}-tmp"
        sysfs = folder / f"agent{i}-sys"
        tmp.mkdir(exist_ok=True)
        sysfs.mkdir(exist_ok=True)
        extra = [f"--profiler-service-listen=127.0.0.1:{facade}"] if i == 0 else []
        p = procs.start(f"agent{i}", [
            BIN / "podprof-agent", "--insecure",
            "--listen=127.0.0.1:0", "--advertise=127.0.0.1:0", "--http-listen=off",
            f"--host-name=jax-{i}", f"--sysfs-root={sysfs}", f"--temp-dir={tmp}",
            f"--workload-profiler=127.0.0.1:{port}", "--workload-metrics=none",
            f"--aggregator={address}", f"--ready-file={folder / f'agent{i}.json'}", *extra])
        wait_file(folder / f"agent{i}.json", 30, p)
    end = time.monotonic() + 30
    while True:
        agents = podprof_json("agents", "--aggregator", address)
        rows = agents if isinstance(agents, list) else agents.get("agents", agents.get("rows", []))
        online = [a for a in rows if "online" in json.dumps(a)]
        if len(online) >= HOSTS:
            break
        assert time.monotonic() < end, f"agents online: {rows}"
        time.sleep(0.3)
    capture = podprof_json("capture", "--duration", "2s", "--aggregator", address, timeout=180)
    (folder / "capture.json").write_text(json.dumps(capture, indent=1))
    return {"address": address, "capture": capture, "folder": folder, "facade": facade,
            "tmp0": folder / "agent0-tmp"}


def test_every_host_completes(pod):
    c = pod["capture"]
    assert c["state"] == "complete", c
    hosts = {h["host"]: h for h in c["hosts"]}
    assert sorted(hosts) == [f"jax-{i}" for i in range(HOSTS)], hosts
    for name, h in hosts.items():
        assert h.get("events", 0) > 0, f"{name}: no events: {h}"


def test_user_ops_are_kernels_with_statistics(pod):
    stats = podprof_json("stats", pod["capture"]["capture_id"], "--by", "kernel",
                         "--aggregator", pod["address"])
    (pod["folder"] / "stats.json").write_text(json.dumps(stats, indent=1))
    rows = {r["kernel"]: r for r in stats["rows"]}
    # The step's matmuls, its tanh and the psum's all-reduce, each on all four hosts.
    for op in ("dot", "wrapped_tanh", "all-reduce"):
        assert op in rows, f"{op} not among the kernels: {sorted(rows)}"
    for name, r in rows.items():
        assert r["count"] > 0 and r["total_ps"] > 0, r
        assert r["module"] == "jit_local_step", r
    # Categories are the HLO opcodes, from the programs' HLO (the agent asks for it).
    assert rows["dot"]["category"] == "dot", rows["dot"]
    collectives = [k for k, r in rows.items() if r["category"] == "all-reduce"]
    assert len(collectives) >= 2, f"the gradient and loss psums: {collectives}"


def test_named_scopes_reach_the_kernels(pod):
    # The framework op path with the user's named scopes, from the HLO's OpMetadata.op_name.
    text = podprof("kernel", "dot", "--capture", pod["capture"]["capture_id"],
                   "--aggregator", pod["address"])
    (pod["folder"] / "kernel-dot.txt").write_text(text)
    assert "jit(local_step)" in text and "dense" in text, text[:3000]


def test_the_psum_is_one_collective_across_the_four_hosts(pod):
    s = podprof_json("stragglers", pod["capture"]["capture_id"], "--aggregator", pod["address"])
    (pod["folder"] / "stragglers.json").write_text(json.dumps(s, indent=1))
    text = json.dumps(s)
    assert "all-reduce" in text, s
    hosts_in = [f"jax-{i}" for i in range(HOSTS) if f"jax-{i}" in text]
    assert len(hosts_in) == HOSTS, f"collective hosts: {hosts_in}: {text[:2000]}"


def test_clock_corrections_are_near_zero(pod):
    for h in pod["capture"]["hosts"]:
        assert abs(h["correction_ns"]) <= MAX_CORRECTION_NS, h
        # A CPU device's collectives end on host threads: they must not move the clock.
        assert h["collectives_matched"] == 0, h
        assert h["correction_ns"] == h["probe_correction_ns"], h


def test_exports_pass_the_checker(pod):
    cid = pod["capture"]["capture_id"]
    folder = pod["folder"]
    podprof("export", cid, "-o", folder / f"{cid}.pftrace", "--aggregator", pod["address"])
    podprof("export", cid, "--format", "xprof", "-o", folder / "xprof",
            "--aggregator", pod["address"])
    for kind, target in (("perfetto", folder / f"{cid}.pftrace"), ("xprof", folder / "xprof")):
        r = subprocess.run([BIN / "podprof-check-export", kind, target], capture_output=True,
                           text=True)
        assert r.returncode == 0, f"podprof-check-export {target}: {r.stdout[-2000:]}{r.stderr[-2000:]}"


def test_jax_own_client_through_the_agents_facade(pod):
    """JAX's own client (jax.collect_profile, XProf's capture) against agent 0's XProf facade:
    the session it writes is one XProf and podprof read, with the job's ops in it."""
    log_dir = pod["tmp0"] / "xprof" / "facade"  # under the agent's spool: the facade allows it
    r = subprocess.run([sys.executable, "-m", "jax.collect_profile", str(pod["facade"]), "1000",
                        f"--log_dir={log_dir}", "--no_perfetto_link"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-3000:]
    files = sorted(log_dir.rglob("*.xplane.pb"))
    assert files, f"no .xplane.pb under {log_dir}: {r.stderr[-2000:]}"
    got = json.loads(podprof("inspect", files[0], "--by", "kernel", "--format", "json"))
    (pod["folder"] / "facade-inspect.json").write_text(json.dumps(got, indent=1))
    kernels = {k["kernel"] for k in got["kernels"]}
    assert {"dot", "all-reduce"} <= kernels, kernels
