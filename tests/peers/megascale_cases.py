"""A simulated multi-slice job's captures and XProf's `megascale_stats` of them (issue #56).

`write_pod` has podprof-simhost write every host's capture of one window
(`--write-captures`: <dir>/<host>.xplane.pb and <dir>/truth.json, docs/MEGASCALE.md
"podprof's multi-slice layout"); `xprof_rows` asks the pinned XProf's `megascale_stats` for one
host's rows (its per-rendezvous DcnSlackSummary, docs/MEGASCALE.md 1.1), as numbers in XProf's
units. The megascale peer test asserts on them; a differential test compares podprof's figures
(insight::HostXprofFigures) with the JSON `write_rows` leaves.

Run alone, it writes a pod and its rows:
  .venv/bin/python3 tests/peers/megascale_cases.py --bin build/bin --dir /tmp/ms [--slices 2]
      [--hosts 4] [--window 100ms] [-- extra podprof-simhost flags, e.g. --dcn-delay-at 0s:1:500]
"""
import argparse
import json
import subprocess
import sys
from pathlib import Path

# A fixed true start (2027-01-15), so a run's files are the same every time.
START_NS = 1_800_000_000_000_000_000


def write_pod(bin_dir, folder, hosts=4, slices=2, chips=4, window="100ms", seed=1, extra=()):
    """Every host's capture of one window of a `slices` x `hosts / slices` job, and its truth
    (the parsed truth.json). `extra`: more podprof-simhost flags (faults)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    for stale in folder.glob("*"):
        if stale.is_file():
            stale.unlink()  # XProf caches its results beside the files
    cmd = [str(Path(bin_dir) / "podprof-simhost"), "--hosts", str(hosts), "--slices", str(slices),
           "--chips", str(chips), "--generation", "v5e", "--pod-seed", str(seed), "--no-counters",
           "--write-captures", str(folder), "--capture-window", window,
           "--capture-start-ns", str(START_NS), "--fault-epoch-ns", str(START_NS), *extra]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} exited {r.returncode}:\n{r.stderr[-3000:]}")
    return json.loads((folder / "truth.json").read_text())


def xprof_rows(paths, host):
    """XProf's megascale_stats of `host` (one of the files `paths`, named <host>.xplane.pb):
    its rows as dicts by column id, the "-" of an absent host stall as None."""
    from xprof.convert import raw_to_tool_data
    data, content_type = raw_to_tool_data.xspace_to_tool_data(
        [str(p) for p in paths], "megascale_stats", {"use_saved_result": False, "host": host})
    assert content_type == "application/json", content_type
    tables = json.loads(data)
    assert isinstance(tables, list) and len(tables) == 1, str(data)[:500]
    cols = [c["id"] for c in tables[0]["cols"]]
    rows = []
    for row in tables[0]["rows"]:
        values = dict(zip(cols, [c.get("v") if c else None for c in row["c"]]))
        if values.get("host_stall") == "-":
            values["host_stall"] = None
        rows.append(values)
    return rows


def write_rows(truth, out_path):
    """XProf's rows of every host of `truth`'s pod, as {"hosts": {host: [row, ...]}, "truth":
    truth}, written to `out_path`; returns that dict."""
    paths = [f["path"] for f in truth["files"]]
    result = {"truth": truth, "hosts": {}}
    for f in truth["files"]:
        result["hosts"][f["host"]] = xprof_rows(paths, f["host"])
    Path(out_path).write_text(json.dumps(result, indent=2) + "\n")
    return result


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--bin", default="build/bin")
    p.add_argument("--dir", required=True)
    p.add_argument("--hosts", type=int, default=4)
    p.add_argument("--slices", type=int, default=2)
    p.add_argument("--window", default="100ms")
    p.add_argument("extra", nargs="*", help="more podprof-simhost flags, after --")
    a = p.parse_args(argv)
    truth = write_pod(a.bin, a.dir, a.hosts, a.slices, window=a.window, extra=a.extra)
    out = Path(a.dir) / "xprof_megascale.json"
    write_rows(truth, out)
    print(out)


if __name__ == "__main__":
    main(sys.argv[1:])
