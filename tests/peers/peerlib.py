"""What the `realpeers` tests share: the built binaries, free loopback ports, the podprof CLI,
and daemons started as real child processes that are always stopped (fixtures: conftest.py)."""
import json
import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

BIN = Path(os.environ.get("PODPROF_BIN", "build/bin")).resolve()
OUT = Path(os.environ.get("PODPROF_TEST_OUT", "/tmp/podprof-peers")).resolve()
SOURCE = Path(os.environ.get("PODPROF_SOURCE", Path(__file__).parents[2])).resolve()
FIXTURES = Path(os.environ.get("PODPROF_FIXTURES", SOURCE.parent / "shared/fixtures/xspace"))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def podprof(*args, check=True, timeout=120):
    """Runs the podprof CLI; returns stdout. A failure shows the command and its stderr."""
    cmd = [str(BIN / "podprof"), *map(str, args)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if check and r.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} exited {r.returncode}:\n{r.stderr[-3000:]}")
    return r.stdout


def podprof_json(*args, **kw):
    return json.loads(podprof(*args, "--format", "json", **kw))


def wait_file(path, seconds, proc=None):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if Path(path).is_file() and Path(path).stat().st_size > 0:
            return json.loads(Path(path).read_text())
        if proc is not None and proc.poll() is not None:
            log = getattr(proc, "log_path", None)
            tail = Path(log).read_text(errors="replace")[-2000:] if log else ""
            raise AssertionError(
                f"{proc.args[0]} exited {proc.returncode} before {path} appeared:\n{tail}")
        time.sleep(0.05)
    raise AssertionError(f"{path} did not appear in {seconds} s")


class Processes:
    """Child processes with their logs under the test's folder, all stopped at the end."""

    def __init__(self, folder):
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.procs = []

    def start(self, name, cmd, env=None):
        log = open(self.folder / f"{name}.log", "w")
        p = subprocess.Popen([str(c) for c in cmd], stdout=log, stderr=subprocess.STDOUT,
                             env={**os.environ, **(env or {})}, cwd=self.folder)
        p.name = name
        p.log_path = self.folder / f"{name}.log"
        self.procs.append(p)
        return p

    def log(self, name):
        return (self.folder / f"{name}.log").read_text(errors="replace")

    def stop(self):
        for p in self.procs:
            if p.poll() is None:
                p.terminate()
        for p in self.procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def start_aggregator(procs, out, extra=()):
    ready = out / "aggregator.json"
    p = procs.start("aggregator", [BIN / "podprof-aggregator", "--insecure",
                                   "--listen=127.0.0.1:0", "--http-listen=127.0.0.1:0",
                                   f"--db={out / 'podprof.db'}", f"--ready-file={ready}", *extra])
    info = wait_file(ready, 30, p)
    return info


def dcn_store_pod(name):
    """An aggregator over podprof-test-dcn-store's hand-made store (tests/util/dcn_pod.h: the
    multi-slice captures dcn-1, dcn-slow and no-dcn), in OUT/name, for a pytest fixture to yield
    from: {"address" (gRPC), "url" (HTTP)}, stopped when the generator closes."""
    folder = OUT / name
    shutil.rmtree(folder, ignore_errors=True)
    procs = Processes(folder)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        subprocess.run([BIN / "podprof-test-dcn-store", folder / "podprof.db"], check=True,
                       capture_output=True)
        agg = start_aggregator(procs, folder)
        yield {"address": f"127.0.0.1:{agg['port']}",
               "url": f"http://127.0.0.1:{agg['http_port']}"}
    finally:
        procs.stop()


def start_jax_agent(procs, folder, name, profiler_port, address):
    """A podprof-agent of host `name` reading a JAX job's profiler at `profiler_port` (no
    metrics service), registered with the aggregator at `address`; waited for."""
    (folder / f"{name}-tmp").mkdir()
    (folder / f"{name}-sys").mkdir()
    p = procs.start(name, [
        BIN / "podprof-agent", "--insecure", "--listen=127.0.0.1:0",
        "--advertise=127.0.0.1:0", "--http-listen=off", f"--host-name={name}",
        f"--sysfs-root={folder / f'{name}-sys'}", f"--temp-dir={folder / f'{name}-tmp'}",
        f"--workload-profiler=127.0.0.1:{profiler_port}", "--workload-metrics=none",
        f"--aggregator={address}", f"--ready-file={folder / f'{name}.json'}"])
    wait_file(folder / f"{name}.json", 30, p)
    return p


def wait_agents_online(address, count, seconds=30):
    """Waits until the aggregator at `address` lists `count` agents online."""
    end = time.monotonic() + seconds
    while sum(a.get("state") == "online" for a in json.loads(
            podprof("agents", "--aggregator", address, "--format", "json"))["agents"]) < count:
        assert time.monotonic() < end, f"{count} agents did not come online in {seconds} s"
        time.sleep(0.2)


# --- XSpaces, read and built with podprof's xplane.proto (the profiler's schema) -------------

def protoc():
    cache = BIN.parent / "CMakeCache.txt"
    if cache.is_file():
        for line in cache.read_text().splitlines():
            if line.startswith("Protobuf_PROTOC_EXECUTABLE:FILEPATH="):
                found = shutil.which(line.split("=", 1)[1])
                if found:
                    return found
    found = shutil.which("protoc")
    assert found, "protoc is needed to read proto/xplane.proto (install protobuf-compiler)"
    return found


def xspace_class(out):
    desc = out / "xplane.desc"
    subprocess.run([protoc(), f"--proto_path={SOURCE / 'proto'}", "--include_imports",
                    f"--descriptor_set_out={desc}", "xplane.proto"], check=True)
    pool = descriptor_pool.DescriptorPool()
    for f in descriptor_pb2.FileDescriptorSet.FromString(desc.read_bytes()).file:
        pool.Add(f)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("tensorflow.profiler.XSpace"))
