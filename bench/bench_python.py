#!/usr/bin/env python3
"""The Python client's two targets (#38), each against a baseline measured in the same run.

1. `Client.kernels()` of a 64-host x 4-chip capture (podprof-loadgen's pod, one aggregator on
   loopback) into a DataFrame, against pandas reading the same CSV from a local file: the
   request, the aggregator's answer and the typing together. Target: under 2 s.
2. A training step with `podprof.jax.capture` armed but not capturing (a process other than
   the first, and StepTraceAnnotation around the step, as the job's loop has it), against the
   same step with nothing armed. Target: under 50 us added per step.

    .venv/bin/python3 bench/bench_python.py [--bin build/bin] [--hosts 64] [--chips 4]

The last line is `armed_step_overhead_us=...`; the kernels figure is `kernels_frame_s=...`.
"""
import argparse
import io
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "python"))

import pandas as pd  # noqa: E402

import podprof  # noqa: E402
import podprof.jax  # noqa: E402


def wait_json(path, seconds):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if path.is_file() and path.stat().st_size:
            return json.loads(path.read_text())
        time.sleep(0.05)
    raise SystemExit(f"{path} did not appear in {seconds} s")


def kernels_bench(binaries, hosts, chips, folder):
    env = {**os.environ, "NO_PROXY": "*"}
    agg = subprocess.Popen([binaries / "podprof-aggregator", "--insecure", "--listen=127.0.0.1:0",
                            "--http-listen=127.0.0.1:0", f"--db={folder / 'p.db'}",
                            f"--ready-file={folder / 'agg.json'}"], env=env,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    procs = [agg]
    try:
        info = wait_json(folder / "agg.json", 30)
        address = f"127.0.0.1:{info['port']}"
        procs.append(subprocess.Popen(
            [binaries / "podprof-loadgen", "--insecure", f"--aggregator={address}",
             f"--agents={hosts}", f"--chips={chips}", f"--ready-file={folder / 'lg.json'}"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        wait_json(folder / "lg.json", 60)
        client = podprof.Client(f"http://127.0.0.1:{info['http_port']}", timeout=120)
        while (client.agents().state == "online").sum() < hosts:
            time.sleep(0.2)
        handle = client.start_capture("1s")
        if handle.wait(timeout=600) != "complete":
            raise SystemExit(f"capture {handle.id}: {handle.status}")
        return time_kernels(client, handle.id, folder)
    finally:
        for p in procs:
            p.terminate()
            p.wait()


def time_kernels(client, capture, folder, runs=5):
    csv = folder / "kernels.csv"
    csv.write_bytes(client._http.read("GET", f"/api/v1/captures/{capture}/kernels",
                                      {"format": "csv", "by": "chip"}))
    frame_s, file_s, rows = [], [], 0
    for _ in range(runs):
        t = time.perf_counter()
        rows = len(client.kernels(capture))
        frame_s.append(time.perf_counter() - t)
        t = time.perf_counter()
        pd.read_csv(csv)
        file_s.append(time.perf_counter() - t)
    return statistics.median(frame_s), statistics.median(file_s), rows, csv.stat().st_size


def step_bench(steps=20000, rounds=5):
    import jax

    def loop():
        t = time.perf_counter_ns()
        for n in range(steps):
            with jax.profiler.StepTraceAnnotation("train", step_num=n):
                pass
        return (time.perf_counter_ns() - t) / steps / 1000

    plain, armed = [], []
    for _ in range(rounds):
        plain.append(loop())
        # Process 1: armed, boundaries counted, never asks (only process 0 does).
        with podprof.jax.capture("http://127.0.0.1:9", steps=3, process_index=1):
            armed.append(loop())
    return statistics.median(plain), statistics.median(armed)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--bin", default=str(ROOT / "build/bin"))
    p.add_argument("--hosts", type=int, default=64)
    p.add_argument("--chips", type=int, default=4)
    a = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench_python_") as d:
        frame_s, file_s, rows, size = kernels_bench(Path(a.bin), a.hosts, a.chips, Path(d))
    print(f"kernels(): {rows} rows ({size / 1e6:.1f} MB of CSV) of a {a.hosts}x{a.chips} capture "
          f"in {frame_s:.3f} s ({rows / frame_s:,.0f} rows/s); pandas reading the same CSV "
          f"from a file: {file_s:.3f} s ({rows / file_s:,.0f} rows/s); "
          f"kernels_over_read_csv={frame_s / file_s:.2f}")
    print(f"kernels_frame_s={frame_s:.3f} (target < 2)")
    plain_us, armed_us = step_bench()
    print(f"a step with StepTraceAnnotation: {plain_us:.2f} us; armed: {armed_us:.2f} us")
    print(f"armed_step_overhead_us={armed_us - plain_us:.2f} (target < 50)")


if __name__ == "__main__":
    main()
