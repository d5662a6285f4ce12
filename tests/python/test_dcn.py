"""Client.dcn against a real aggregator serving hand-made multi-slice captures.

podprof-test-dcn-store writes the store (tests/util/dcn_pod.h: two slices, slice 1 300 us late
each step, its host's clock 3 ms ahead; the same with a slow link instead); each of the answer's frames is held equal to
`podprof dcn --format csv --table NAME` (floats to the CSV's six digits), and a capture without
DCN ops answers its verdict with empty frames.
"""
import io

import pandas as pd
import pytest

import podprof
from peerlib import dcn_store_pod, podprof as cli


@pytest.fixture(scope="module")
def pod():
    yield from dcn_store_pod("dcn")


def cli_csv(pod, *args):
    return pd.read_csv(io.StringIO(cli("dcn", *args, "--aggregator", pod["address"],
                                       "--format", "csv")),
                       dtype=str, keep_default_na=False)


def assert_same(frame, expected):
    """`frame` (typed, from the JSON) holds the CLI's CSV `expected` (text)."""
    assert list(frame.columns) == list(expected.columns)
    assert len(frame) == len(expected)
    for column in expected.columns:
        got, want = frame[column], expected[column]
        if pd.api.types.is_bool_dtype(got.dtype):
            assert got.map({True: "true", False: "false"}).tolist() == want.tolist(), column
        elif pd.api.types.is_float_dtype(got.dtype):
            assert got.tolist() == pytest.approx(pd.to_numeric(want).tolist(), rel=1e-5), column
        else:
            assert got.astype(str).tolist() == want.tolist(), column


def test_the_frames_are_the_clis_tables(pod):
    d = podprof.Client(pod["url"]).dcn("dcn-1", top=1000)
    assert d.capture == "dcn-1"
    assert d.slices == 2 and d.transfers_paired == 80
    assert d.verdict == cli("dcn", "dcn-1", "--aggregator", pod["address"]).splitlines()[0] \
        .removeprefix("capture dcn-1: ")
    slow = podprof.Client(pod["url"]).dcn("dcn-slow", top=1000)
    for capture, report in (("dcn-1", d), ("dcn-slow", slow)):
        for name in ("links", "producers", "transfers", "xprof"):
            assert_same(getattr(report, name),
                        cli_csv(pod, capture, "--top", "1000", "--table", name))
    # What the frames say: slice 1 is the late producer, and slice 0's receivers waited.
    assert d.producers.slice[0] == 1 and bool(d.producers.named[0])
    assert len(d.transfers) == 80 and (d.transfers.dst_slice[:40] == 0).all()
    assert d.transfers.wait_ns.dtype == "int64"
    # These captures carry no runtime action graph: the network's parts are from transits.
    assert not d.runtime_network and (d.transfers.runtime_latency_ns == -1).all()
    assert sorted(d.xprof.host) == ["slice0-host0", "slice1-host0"]
    # dcn-slow: the link 0 -> 1 is named, its transit 400 us beyond the other's.
    assert (slow.links.link[0], bool(slow.links.named[0])) == ("0->1", True)
    assert slow.links.excess_ns[0] == 400_000
    assert len(podprof.Client(pod["url"]).dcn("dcn-1").transfers) == 20  # the aggregator's top


def test_a_capture_without_dcn_ops_says_so(pod):
    d = podprof.Client(pod["url"]).dcn("no-dcn")
    assert d.verdict == "no cross-slice transfers in this capture"
    assert d.links.empty and d.producers.empty and d.transfers.empty and d.xprof.empty
    assert list(d.transfers.columns) == list(cli_csv(pod, "no-dcn", "--table", "transfers").columns)
    assert d.named_after_instances == -1


def test_an_unknown_capture_is_a_lookup_error(pod):
    with pytest.raises(LookupError):
        podprof.Client(pod["url"]).dcn("nope")
