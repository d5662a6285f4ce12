"""XProf's `megascale_stats` (the pinned xprof) reads the simulator's multi-slice captures
(issue #56): a 2-slice x 2-host job's files from `podprof-simhost --write-captures`, and for
every host a row per DCN rendezvous (`dcn_grads.0`, `dcn_grads.1`) counting every instance the
window holds, with the observed duration and stall the model gives.

XProf's rows per host are left as JSON (the test prints where) for the differential test of
podprof's own figures (insight::HostXprofFigures).
"""
import json

import pytest

from megascale_cases import write_pod, write_rows
from peerlib import BIN, OUT

MS_PER_US = 1e-3


@pytest.fixture(scope="module")
def pod():
    folder = OUT / "megascale"
    truth = write_pod(BIN, folder / "captures", hosts=4, slices=2, window="100ms")
    rows = write_rows(truth, folder / "xprof_megascale.json")
    print(f"XProf's megascale_stats rows: {folder / 'xprof_megascale.json'}")
    return truth, rows["hosts"]


def test_every_host_has_both_rendezvous_with_every_instance(pod):
    truth, hosts = pod
    assert truth["slices"] == 2 and truth["hosts_per_slice"] == 2
    assert sorted(hosts) == [f"simhost-{i}" for i in range(4)]
    for f in truth["files"]:
        rows = {r["rendezvous_name"]: r for r in hosts[f["host"]]}
        assert sorted(rows) == ["dcn_grads.0", "dcn_grads.1"], (f["host"], rows)
        for name, row in rows.items():
            want = f["xprof_occurrences"][name]
            assert want >= 10, (f["host"], name, want)  # a 100 ms window of ~5 ms steps
            assert row["occurrences"] == want, (f["host"], name, row)
            assert row["transfer_type"] == "ONE_TO_ONE"
            assert row["send_op_name"] == "send." + ("101" if name.endswith(".0") else "102")
            assert row["recv_op_name"] == "recv-done." + row["send_op_name"].split(".")[1]
            assert row["net_tx_bytes"] == 1 << 20  # ONE_TO_ONE, group of 1, bf16[524288]
            # send to recv-done: ~170 us for the buffer to leave, ~40 us of network, the copy.
            assert 0.15 < row["observed_duration"] < 0.4, row
            assert 0.05 < row["stall_duration"] <= row["observed_duration"], row
            # The first bucket's transfer hides the optimizer's update (about 0.1 ms): XProf's
            # slack; the second has nothing between its ops.
            if name == "dcn_grads.0":
                assert 0.05 < row["slack_time"] < row["observed_duration"], row
            else:
                assert row["slack_time"] == 0, row
            assert row["total_stall"] == pytest.approx(row["stall_duration"] * want, rel=1e-6)
            # The buffer leaving (~0.17 ms), less the update hidden behind it in the first.
            assert row["send_done_stall"] > (0.03 if name == "dcn_grads.0" else 0.1), row
            assert row["host_stall"] is None  # no DCN host plane in the tool


def test_a_delayed_link_shows_in_its_receivers_rows(tmp_path):
    """With slice 1's outgoing DCN 2 ms late, slice 0 (its receivers in the ring of two) waits:
    XProf's recv-done stall there grows by about the delay; slice 1's does not."""
    truth = write_pod(BIN, tmp_path / "delayed", hosts=4, slices=2, window="100ms",
                      extra=["--dcn-delay-at", "0s:1:2000"])
    rows = write_rows(truth, tmp_path / "delayed.json")["hosts"]
    for f in truth["files"]:
        first = {r["rendezvous_name"]: r for r in rows[f["host"]]}["dcn_grads.0"]
        if f["slice"] == 0:
            assert first["recv_done_stall"] > 1.9, (f["host"], first)
        else:
            assert first["recv_done_stall"] < 0.2, (f["host"], first)
    assert json.loads((tmp_path / "delayed" / "truth.json").read_text())["dcn_delays"] == [
        {"slice": 1, "extra_ns": 2_000_000, "from_ns": truth["true_start_ns"]}]
