#!/usr/bin/env python3
"""`podprof sql` on a 64-host capture (#59), against a baseline measured in the same run.

Starts an aggregator and `podprof-loadgen`'s pod of N hosts x 4 chips (the emulated agents
analyse and stream as podprof-agent does; `podprof demo`'s simulated hosts do not fit 64 on two
cores: their profilers miss the minute they are given), takes one capture of 1 s with
`podprof capture`, then times, end to end through the CLI, the two questions the issue names:

1. the 10 slowest executions of a kernel with their host, chip and aligned start;
2. per step, which chip arrived last at an all-reduce;

each against `podprof stragglers` of the same capture (the stored answer to a pod-wide
question, read whole) as the baseline. Target: each question under 1 s.

    python3 bench/bench_sql.py [--bin build/bin] [--hosts 64] [--chips 4] [--runs 5]

Prints each question's median and best time and its ratio to the baseline's median; the last
line is `sql_worst_median_s=...`, the slower question's median.
"""
import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def timed(cmd, runs):
    """The wall times of `runs` runs of `cmd` (each must succeed), and its last output."""
    times, out = [], ""
    for _ in range(runs):
        t0 = time.monotonic()
        p = subprocess.run(cmd, capture_output=True, text=True)
        times.append(time.monotonic() - t0)
        if p.returncode != 0:
            sys.exit(f"bench_sql: {' '.join(map(str, cmd[:3]))} failed: {p.stderr.strip()}")
        out = p.stdout
    return times, out


def wait_json(path, seconds):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if path.is_file() and path.stat().st_size:
            return json.loads(path.read_text())
        time.sleep(0.05)
    sys.exit(f"bench_sql: {path} not written within {seconds} s")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=str(ROOT / "build/bin"))
    ap.add_argument("--hosts", type=int, default=64)
    ap.add_argument("--chips", type=int, default=4)
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    binaries = Path(args.bin)
    podprof = binaries / "podprof"
    folder = Path(tempfile.mkdtemp(prefix="bench_sql_"))
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    procs = [subprocess.Popen([binaries / "podprof-aggregator", "--insecure",
                               "--listen=127.0.0.1:0", "--http-listen=127.0.0.1:0",
                               f"--db={folder / 'p.db'}", f"--ready-file={folder / 'agg.json'}"],
                              **quiet)]
    try:
        address = f"127.0.0.1:{wait_json(folder / 'agg.json', 30)['port']}"
        procs.append(subprocess.Popen(
            [binaries / "podprof-loadgen", "--insecure", f"--aggregator={address}",
             f"--agents={args.hosts}", f"--chips={args.chips}",
             f"--ready-file={folder / 'lg.json'}"], **quiet))
        wait_json(folder / "lg.json", 60)
        end = time.monotonic() + 120
        while True:
            agents = json.loads(subprocess.run([podprof, "agents", "--aggregator", address,
                                                "--format", "json"], capture_output=True,
                                               text=True, check=True).stdout)
            registered = len(agents.get("agents", []))
            if registered >= args.hosts:
                break
            if time.monotonic() > end:
                sys.exit(f"bench_sql: {registered} of {args.hosts} agents registered")
            time.sleep(0.5)
        t0 = time.monotonic()
        taken = subprocess.run([podprof, "capture", "--duration", "1s", "--aggregator", address,
                                "--format", "json", "--timeout", "600s"],
                               capture_output=True, text=True)
        if taken.returncode != 0:
            sys.exit(f"bench_sql: podprof capture failed: {taken.stderr[-2000:]}")
        capture = json.loads(taken.stdout)["capture_id"]

        def sql(query, runs):
            return timed([podprof, "sql", capture, query, "--aggregator", address, "--format",
                          "json"], runs)

        _, out = sql("SELECT count(DISTINCT host), count(*) FROM events", 1)
        hosts, events = json.loads(out)["rows"][0]
        print(f"{hosts} hosts x {args.chips} chips captured in {time.monotonic() - t0:.0f} s: "
              f"capture {capture}, {events} events")
        # Names the pod's programs use, read from the capture itself.
        _, out = sql("SELECT kernel FROM kernels WHERE hlo_category LIKE '%fusion%' "
                     "GROUP BY kernel ORDER BY sum(total_ns) DESC LIMIT 1", 1)
        kernel = json.loads(out)["rows"][0][0]
        _, out = sql("SELECT kernel FROM collectives GROUP BY kernel "
                     "ORDER BY kernel LIKE 'all-reduce%' DESC, kernel LIMIT 1", 1)
        collective = json.loads(out)["rows"][0][0]
        questions = {
            f"the 10 slowest executions of {kernel}":
                f"SELECT host, chip, start_ns, start_error_ns, duration_ns FROM events WHERE "
                f"kernel = '{kernel}' ORDER BY duration_ns DESC LIMIT 10",
            f"per step, which chip arrived last at {collective}":
                f"SELECT step, host, chip, wait_ns FROM collectives WHERE kernel = "
                f"'{collective}' AND last = 1 ORDER BY step",
        }
        base, _ = timed([podprof, "stragglers", capture, "--aggregator", address, "--format",
                         "json"], args.runs)
        base_median = statistics.median(base)
        print(f"baseline podprof stragglers: median {base_median:.3f} s, best {min(base):.3f} s")
        worst = 0.0
        for name, query in questions.items():
            times, out = sql(query, args.runs)
            rows = len(json.loads(out)["rows"])
            median = statistics.median(times)
            worst = max(worst, median)
            print(f"{name}: {rows} rows, median {median:.3f} s, best {min(times):.3f} s "
                  f"({median / base_median:.2f} x the baseline); target 1 s")
        print(f"sql_worst_median_s={worst:.3f}")
    finally:
        for p in procs:
            p.terminate()
            p.wait()


if __name__ == "__main__":
    main()
