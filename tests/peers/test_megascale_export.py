"""XProf's `megascale_stats` (the pinned xprof) reads podprof's XProf export of a multi-slice
capture as it reads the original (issue #56): a simulated 2-slice x 2-host job's files
(`podprof-simhost --write-captures`, megascale_cases.write_pod) are imported into a real
aggregator (the trace reader makes each a HostCapture, the store keeps it), exported with
`podprof export --format xprof` (export/xspace_export.h rebuilds the DCN ops' program from
their stored HLO texts), and for every host XProf's per-rendezvous rows of the export equal
those of the original file.

The export's lines start at the profile start, the original's at the simulator's own origin:
XProf truncates each op's start and end to whole microseconds on its own clock, so a figure
made of two truncated stamps (observed duration, slack) may differ by 1 us; the durations
(stalls) are exact in ps in both and may also differ by 1 us only after XProf's own
per-instance truncations. The tolerance is 1 us (0.001 ms) on the timed columns and none on
the rest (names, transfer type, occurrences, bytes).
"""
import json
import shutil

import pytest

from megascale_cases import write_pod, xprof_rows
from peerlib import BIN, OUT, Processes, podprof, podprof_json, start_aggregator

TIMED = ("slack_time", "observed_duration", "send_stall", "send_done_stall", "recv_stall",
         "recv_done_stall", "stall_duration")
EXACT = ("recv_op_name", "send_op_name", "transfer_type", "occurrences", "net_tx_bytes",
         "host_stall")
US_IN_MS = 1e-3


@pytest.fixture(scope="module")
def pod():
    folder = OUT / "megascale_export"
    shutil.rmtree(folder, ignore_errors=True)  # a rerun's store, ready file and caches start anew
    truth = write_pod(BIN, folder / "captures", hosts=4, slices=2, window="100ms")
    originals = [f["path"] for f in truth["files"]]
    procs = Processes(folder / "procs")
    try:
        info = start_aggregator(procs, folder / "procs")
        agg = f"127.0.0.1:{info['port']}"
        imported = podprof_json("import", *originals, "--aggregator", agg)
        assert not imported["file_errors"], imported["file_errors"]
        logdir = folder / "logdir"
        podprof("export", imported["capture"], "--format", "xprof", "-o", logdir,
                "--aggregator", agg)
        exported = sorted(logdir.glob("plugins/profile/*/*.xplane.pb"))
        assert len(exported) == len(originals), exported
        rows = {}
        for f in truth["files"]:
            rows[f["host"]] = {"original": xprof_rows(originals, f["host"]),
                               "export": xprof_rows(exported, f["host"])}
        (folder / "rows.json").write_text(json.dumps(rows, indent=2) + "\n")
        print(f"XProf's rows of both: {folder / 'rows.json'}")
        yield truth, rows
    finally:
        procs.stop()


def by_rendezvous(rows):
    return {r["rendezvous_name"]: r for r in rows}


def test_every_host_of_the_export_has_the_originals_rows(pod):
    truth, rows = pod
    assert sorted(rows) == [f"simhost-{i}" for i in range(4)]
    for host, both in rows.items():
        original, export = by_rendezvous(both["original"]), by_rendezvous(both["export"])
        assert sorted(original) == ["dcn_grads.0", "dcn_grads.1"], (host, original)
        assert sorted(export) == sorted(original), (host, export)
        for name, want in original.items():
            got = export[name]
            assert want["occurrences"] >= 10, (host, name, want)
            for col in EXACT:
                assert got[col] == want[col], (host, name, col, got[col], want[col])
            for col in TIMED:
                assert abs(got[col] - want[col]) <= US_IN_MS + 1e-9, (
                    host, name, col, got[col], want[col])
            # total_stall is stall x occurrences, so it may differ by occurrences us.
            assert abs(got["total_stall"] - want["total_stall"]) <= (
                want["occurrences"] * US_IN_MS + 1e-9), (host, name, got, want)


def test_the_export_is_not_trivially_equal(pod):
    """The rows compared are real: the model's DCN phase (~170 us of send, ~40 us of network)."""
    _, rows = pod
    for host, both in rows.items():
        for row in both["export"]:
            assert 0.15 < row["observed_duration"] < 0.4, (host, row)
            assert row["net_tx_bytes"] == 1 << 20, (host, row)
