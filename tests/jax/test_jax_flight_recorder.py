"""The flight recorder's trigger against real JAX (#39): two processes of a real JAX job
(tests/jax/pod_worker.py), each with a podprof-agent whose recorder keeps JAX's own profiler
server in continuous mode. JAX on CPU has no libtpu metric service, so the step times come from
a simulated host's (podprof-simhost, metrics only), which slows a chip 1.6x at 14 s: the
aggregator's step-time trigger fires, and the snapshot it takes is the window before the trigger
from each JAX server's continuous profiling, on both hosts. Everything else is the real path.
"""
import csv
import io
import json
import shutil
import sys
import time

import pytest

from peerlib import (BIN, OUT, SOURCE, Processes, free_port, podprof, podprof_json,
                     start_aggregator, wait_file)

HOSTS = 2
WORKER = SOURCE / "tests/jax/pod_worker.py"


@pytest.fixture(scope="module")
def pod():
    folder = OUT / "jax_flight_recorder"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    procs = Processes(folder)
    try:
        yield start_pod(procs, folder)
    finally:
        procs.stop()


def start_pod(procs, folder):
    (folder / "agg.toml").write_text(
        '[agents]\nheartbeat_interval = "1s"\n[telemetry]\nstore_interval = "1s"\n'
        '[triggers]\nrecent = "3s"\nbaseline = "6s"\nwindow = "3s"\n')
    agg = start_aggregator(procs, folder, [f"--config={folder / 'agg.toml'}"])
    address = f"127.0.0.1:{agg['port']}"
    coordinator = f"127.0.0.1:{free_port()}"
    workers = []
    for i in range(HOSTS):
        port = free_port()
        workers.append((procs.start(f"worker{i}", [
            sys.executable, WORKER, "--process-id", i, "--num-processes", HOSTS,
            "--coordinator", coordinator, "--profiler-port", port, "--seconds", 300,
            "--ready-file", folder / f"worker{i}.json"]), port))
    for i, (p, _) in enumerate(workers):
        wait_file(folder / f"worker{i}.json", 120, p)
    # The step times: a simulated host's metric service, its chip 1 slowed 14 s from now.
    sim = procs.start("metrics", [
        BIN / "podprof-simhost", "--profiler-port=0", "--metrics-port=0", "--hosts=1",
        "--chips=2", f"--fault-epoch-ns={time.time_ns()}", "--slowdown-at=14s:0:1:1.6",
        f"--ready-file={folder / 'sim.json'}"])
    metrics = wait_file(folder / "sim.json", 30, sim)["metrics_port"]
    (folder / "agent.toml").write_text(
        '[recorder]\nenabled = true\nwindow = "3s"\nmax_slowdown = 0\n')
    for i, (_, port) in enumerate(workers):
        for d in ("tmp", "sys"):
            (folder / f"agent{i}-{d}").mkdir(exist_ok=True)
        p = procs.start(f"agent{i}", [
            BIN / "podprof-agent", "--insecure", f"--config={folder / 'agent.toml'}",
            "--listen=127.0.0.1:0", "--advertise=127.0.0.1:0", "--http-listen=off",
            "--profiler-service-listen=none", f"--host-name=jax-{i}",
            f"--sysfs-root={folder / f'agent{i}-sys'}", f"--temp-dir={folder / f'agent{i}-tmp'}",
            f"--workload-profiler=127.0.0.1:{port}", f"--workload-metrics=127.0.0.1:{metrics}",
            f"--aggregator={address}", f"--ready-file={folder / f'agent{i}.json'}"])
        wait_file(folder / f"agent{i}.json", 30, p)
    return {"address": address, "folder": folder}


def recorders(address):
    rows = csv.DictReader(io.StringIO(podprof("agents", "--aggregator", address, "--format", "csv")))
    return [r["recorder"] for r in rows]


def triggered(address):
    listed = podprof_json("captures", "--aggregator", address)
    rows = listed if isinstance(listed, list) else listed.get("captures", [])
    return [c for c in rows if c.get("labels", {}).get("trigger") == "step_time"]


def test_the_step_time_trigger_snapshots_every_jax_process(pod):
    address = pod["address"]
    # Each JAX server in continuous mode, as the agents' heartbeats say.
    end = time.monotonic() + 60
    while (states := recorders(address)) != ["armed"] * HOSTS:
        assert time.monotonic() < end, states
        time.sleep(1)
    end = time.monotonic() + 90
    while not (snaps := triggered(address)):
        assert time.monotonic() < end, "the step-time trigger did not fire"
        time.sleep(1)
    snap = snaps[0]
    end = time.monotonic() + 120
    while snap["status"] == "running":
        assert time.monotonic() < end, snap
        time.sleep(1)
        snap = triggered(address)[0]
    (pod["folder"] / "snapshot.json").write_text(json.dumps(snap, indent=1))
    assert snap["source"] == "snapshot" and snap["status"] == "complete", snap
    assert snap["end_ns"] - snap["start_ns"] == 3_000_000_000
    assert "pod step time" in snap["labels"]["reason"]
    assert json.loads(snap["labels"]["telemetry"])["ratio"] > 1.1
    detail = podprof_json("stats", snap["capture"], "--aggregator", address)
    assert detail, "the snapshot has kernel statistics"
    listed = podprof_json("captures", "--aggregator", address)
    rows = listed if isinstance(listed, list) else listed.get("captures", [])
    hosts = [c for c in rows if c["capture"] == snap["capture"]][0]["host_names"]
    assert sorted(hosts) == [f"jax-{i}" for i in range(HOSTS)]
