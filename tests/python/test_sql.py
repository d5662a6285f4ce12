"""Client.sql and `podprof sql` against a real aggregator serving hand-made captures.

podprof-test-dcn-store writes the store (tests/util/dcn_pod.h: two slices of one host with two
chips, 20 steps, each chip one compute op then the four host-transfer ops a step). The counts
asked here follow from that layout, not from podprof's reading of it; the frame is held equal
to the CLI's CSV, and refused statements answer 400 naming what was refused.
"""
import io
import subprocess

import pandas as pd
import pytest

import podprof
from podprof.errors import PodprofError
from peerlib import BIN, dcn_store_pod, podprof as cli


@pytest.fixture(scope="module")
def pod():
    yield from dcn_store_pod("sql")


QUERY = ("SELECT host, chip, line, count(*) AS n, min(start_ns) AS first_ns FROM events "
         "GROUP BY host, chip, line ORDER BY host, chip, line")


def test_the_frame_is_the_clis_csv(pod):
    frame = podprof.Client(pod["url"]).sql("dcn-1", QUERY)
    assert list(frame.columns) == ["host", "chip", "line", "n", "first_ns"]
    assert frame.attrs["truncated"] is False
    assert frame.attrs["provenance"]["capture"] == "dcn-1"
    assert frame.attrs["provenance"]["hosts"] == 2
    expected = pd.read_csv(io.StringIO(cli("sql", "dcn-1", QUERY, "--aggregator", pod["address"],
                                           "--format", "csv")))
    pd.testing.assert_frame_equal(frame, expected, check_dtype=False)
    # Two slices' hosts, two chips each; every chip ran 20 program runs (XLA Modules).
    assert sorted(set(frame.host)) == ["slice0-host0", "slice1-host0"]
    modules = frame[frame.line == "XLA Modules"]
    assert len(modules) == 4 and (modules.n == 20).all()


def test_rows_past_max_rows_are_cut_and_said(pod):
    frame = podprof.Client(pod["url"]).sql("dcn-1", "SELECT * FROM events", max_rows=5)
    assert len(frame) == 5 and frame.attrs["truncated"] is True


@pytest.mark.parametrize("query,why", [
    ("ATTACH DATABASE '/tmp/x.db' AS x", "ATTACH"),
    ("SELECT load_extension('/tmp/x.so')", "load_extension"),
    ("DELETE FROM events", "may not be modified"),
    ("SELECT 1; SELECT 2", "one statement"),
])
def test_refused_statements_name_what_was_refused(pod, query, why):
    with pytest.raises(PodprofError, match=why):
        podprof.Client(pod["url"]).sql("dcn-1", query)
    out = subprocess.run([BIN / "podprof", "sql", "dcn-1", query, "--aggregator",
                          pod["address"]], capture_output=True, text=True)
    assert out.returncode != 0 and why in out.stderr


def test_every_example_in_the_docs_runs(pod):
    """docs/SQL.md's examples run as written (on this store some find no rows)."""
    from peerlib import SOURCE
    text = (SOURCE / "docs/SQL.md").read_text()
    block = text.split("## Examples")[1].split("```sql")[1].split("```")[0]
    statements = [s.strip() for s in block.split(";") if s.strip()]
    statements = ["\n".join(l for l in s.splitlines() if not l.startswith("--")) for s in statements]
    assert len(statements) == 5
    client = podprof.Client(pod["url"])
    for statement in statements:
        frame = client.sql("dcn-1", statement)
        assert frame.attrs["provenance"]["capture"] == "dcn-1", statement
