"""podprof.fleet.Fleet against a real fleet store, every frame held equal to `podprof fleet`'s CSV.

Debian's clickhouse-server 18.16 (started as tests/peers/test_clickhouse_current.py starts it:
a folder of its own, users default, writer and reader), an aggregator replicating to it as
`writer`, two emulated agents (podprof-loadgen) and three captures taken by the CLI, the first
seconds before the others so that `regressions` has a baseline and a current period. Fleet asks
by both of its ways, the aggregator's /api/v1/fleet routes and the podprof binary against
ClickHouse as the read-only `reader`; each frame is compared with the CLI's CSV of the same
question: same columns, rows in the same order, same values. Then the errors a Python user
expects: an unreachable server, bad arguments, a refused password, no [fleet].
"""
import io
import json
import math
import shutil
import time

import pandas as pd
import pytest

from peerlib import BIN, OUT, Processes, free_port, podprof as cli, wait_file
from test_clickhouse_current import CLICKHOUSE_SERVER, PASSWORDS, ClickHouse1816
import podprof
from podprof import errors
from podprof.fleet import Fleet

HOSTS, CHIPS = 2, 2
# Seconds between the first capture's start and the second's: the regressions period puts the
# first in the baseline, the others in the current period, with seconds of margin each side.
CAPTURE_GAP_S = 8


@pytest.fixture(scope="module")
def store():
    folder = OUT / "store"
    shutil.rmtree(folder, ignore_errors=True)
    procs = Processes(folder)
    try:
        assert CLICKHOUSE_SERVER.exists(), \
            f"{CLICKHOUSE_SERVER} is missing: bash scripts/install-deps.sh installs it"
        ch = ClickHouse1816(procs, folder / "ch")
        ch.sql("CREATE DATABASE podprof")
        address, http = start_pod(procs, folder, ch)
        began = time.monotonic()
        captures = [capture(address, "job=train", "run=r0")]
        time.sleep(max(0.0, CAPTURE_GAP_S - (time.monotonic() - began)))
        captures += [capture(address, "job=train", "run=r1"), capture(address, "job=serve")]
        wait_replicated(address, len(captures))
        (folder / "reader.pw").write_text(PASSWORDS["reader"] + "\n")
        yield {"ch": ch, "url": f"http://127.0.0.1:{ch.http}", "captures": captures,
               "reader_pw": folder / "reader.pw", "http": http, "procs": procs,
               "folder": folder}
    finally:
        procs.stop()


def start_pod(procs, folder, ch):
    """An aggregator replicating to `ch` as pod-a, with HOSTS emulated agents online."""
    (folder / "writer.pw").write_text(PASSWORDS["writer"] + "\n")
    (folder / "agg.toml").write_text(
        f'[fleet]\nclickhouse_url = "http://127.0.0.1:{ch.http}"\nuser = "writer"\n'
        f'password_file = "{folder / "writer.pw"}"\npod = "pod-a"\nflush_interval = "100ms"\n')
    agg = procs.start("aggregator", [BIN / "podprof-aggregator", "--insecure",
                                     "--listen=127.0.0.1:0", "--http-listen=127.0.0.1:0",
                                     f"--config={folder / 'agg.toml'}",
                                     f"--db={folder / 'podprof.db'}",
                                     f"--ready-file={folder / 'agg.json'}"])
    ready = wait_file(folder / 'agg.json', 30, agg)
    address = f"127.0.0.1:{ready['port']}"
    lg = procs.start("loadgen", [BIN / "podprof-loadgen", "--insecure", f"--aggregator={address}",
                                 f"--agents={HOSTS}", f"--chips={CHIPS}",
                                 f"--ready-file={folder / 'lg.json'}"])
    wait_file(folder / "lg.json", 30, lg)
    end = time.monotonic() + 30
    while len([a for a in json.loads(cli("agents", "--aggregator", address, "--format", "json"))
               .get("agents", []) if a.get("state") == "online"]) < HOSTS:
        assert time.monotonic() < end, "the agents did not come online"
        time.sleep(0.2)
    return address, f"http://127.0.0.1:{ready['http_port']}"


def capture(address, *labels):
    args = [a for label in labels for a in ("--label", label)]
    got = json.loads(cli("capture", "--duration", "500ms", "--aggregator", address, *args,
                         "--format", "json"))
    return got["capture_id"]


def wait_replicated(address, n):
    end = time.monotonic() + 60
    while True:
        s = json.loads(cli("fleet", "status", "--format", "json", "--aggregator", address))
        if s["pending"] == 0 and s["replicated"] >= n:
            return
        assert time.monotonic() < end, f"the captures did not reach ClickHouse: {s}"
        time.sleep(0.1)


def reader(store):
    """Fleet through the podprof binary, against ClickHouse as the read-only user."""
    return Fleet(store["url"], user="reader", password_file=store["reader_pw"],
                 podprof=BIN / "podprof")


@pytest.fixture(params=["aggregator", "binary"])
def fleet(request, store):
    """Fleet by each of its ways: the aggregator's routes, the podprof binary."""
    if request.param == "aggregator":
        return podprof.Client(store["http"]).fleet()
    return reader(store)


def fleet_cli(store, *args, fmt="csv"):
    """`podprof fleet ARGS` as the read-only user."""
    return cli("fleet", *args, "--clickhouse", store["url"], "--clickhouse-user", "reader",
               "--clickhouse-password-file", store["reader_pw"], "--format", fmt)


def assert_same(frame, csv):
    """`frame` (Fleet's, typed) holds exactly what the CLI's `csv` text prints."""
    want = pd.read_csv(io.StringIO(csv), dtype=str, keep_default_na=False)
    assert list(frame.columns) == list(want.columns)
    assert len(frame) == len(want), (len(frame), len(want))
    for column in want.columns:
        got = frame[column]
        if isinstance(got.dtype, pd.DatetimeTZDtype):
            got = got.astype("int64")
        elif pd.api.types.is_bool_dtype(got.dtype):
            got = got.astype(int)
        elif pd.api.types.is_float_dtype(got.dtype):
            # The CLI prints doubles with 6 significant digits (absl::StrCat): the same digits.
            got = got.map(lambda v: f"{v:.6g}")
        assert got.astype(str).tolist() == want[column].tolist(), column


def test_frames_equal_the_clis(store, fleet):
    f = fleet
    assert_same(f.top(since="1h"), fleet_cli(store, "top", "--since", "1h"))
    assert_same(f.top(by="pod", since="1h"),
                fleet_cli(store, "top", "--by", "pod", "--since", "1h"))
    assert_same(f.top(by="host", since="1h", top=3),
                fleet_cli(store, "top", "--by", "host", "--since", "1h", "--top", "3"))
    assert_same(f.top(pod="pod-b"), fleet_cli(store, "top", "--pod", "pod-b"))
    kernels = f.top(since="1h", top=1000)
    assert len(kernels) > 1
    name = kernels.kernel[0]
    assert_same(f.history(name), fleet_cli(store, "history", name))
    assert_same(f.history(".", since="1h", pod="pod-a", labels={"job": "train"}),
                fleet_cli(store, "history", ".", "--since", "1h", "--pod", "pod-a",
                          "--label", "job=train"))
    assert_same(f.history(r"\.", labels=["job=train", "run=r1"]),
                fleet_cli(store, "history", r"\.", "--label", "job=train", "--label", "run=r1"))


def test_history_holds_each_capture(store, fleet):
    f = fleet
    name = f.top(since="1h").kernel[0]
    h = f.history(f"^{name}$")
    assert sorted(set(h.capture)) == sorted(store["captures"])
    assert (h.kernel == name).all() and (h.pod == "pod-a").all()
    train = f.history(f"^{name}$", labels={"job": "train"})
    assert sorted(set(train.capture)) == sorted(store["captures"][:2])


def test_regressions_equal_the_clis(store, fleet):
    f = fleet
    period = regressions_period(store)
    got = f.regressions(since=f"{period}s", threshold=0.0)
    assert_same(got, fleet_cli(store, "regressions", "--since", f"{period}s", "--threshold", "0"))
    # Every kernel of the pod ran in both periods: one capture before, two in.
    assert len(got) == len(f.top(since="1h", top=1000)), got
    assert (got.baseline_captures == 1).all() and (got.candidate_captures == 2).all()
    # The changes are the JSON's doubles, every digit.
    full = json.loads(fleet_cli(store, "regressions", "--since", f"{period}s", "--threshold",
                                "0", fmt="json"))["kernels"]
    assert got.p50_change.tolist() == [k["p50_change"] for k in full]
    assert got.p99_change.tolist() == [k["p99_change"] for k in full]
    assert_same(f.regressions(since="1h", pod="pod-a"),
                fleet_cli(store, "regressions", "--since", "1h", "--pod", "pod-a"))


def regressions_period(store):
    """Seconds p with now - 2p <= the first capture's start < now - p <= the second's, a few
    seconds from either bound (the CLI asks a little later than Fleet)."""
    starts = sorted(int(store["ch"].sql(
        f"SELECT start_ns FROM podprof.captures WHERE capture_id = '{c}'")) for c in
        store["captures"])
    now = time.time_ns()
    lo = max((now - starts[0]) / 2, now - starts[1]) / 1e9
    hi = (now - starts[0]) / 1e9
    period = math.ceil((lo + hi) / 2)
    assert lo + 1 < period < hi - 1, (lo, period, hi)
    return period


def test_the_clis_environment_configures_it(store, monkeypatch):
    monkeypatch.setenv("PODPROF_CLICKHOUSE", store["url"])
    monkeypatch.setenv("PODPROF_CLICKHOUSE_USER", "reader")
    monkeypatch.setenv("PODPROF_CLICKHOUSE_PASSWORD", PASSWORDS["reader"])
    monkeypatch.setenv("PODPROF_BIN", str(BIN))  # a folder: its podprof
    assert_same(Fleet().top(by="pod"), cli("fleet", "top", "--by", "pod", "--format", "csv"))


def test_frames_have_real_dtypes(store, fleet):
    f = fleet
    h = f.history(".", since="1h")
    assert str(h.start_ns.dtype) == "datetime64[ns, UTC]"
    assert h.start_ns.min() > pd.Timestamp.now(tz="UTC") - pd.Timedelta("1h")
    for c in ("count", "chips", "mean_ps", "p50_ps", "p90_ps", "p99_ps", "total_ps"):
        assert h[c].dtype == "int64", c
    assert all(pd.api.types.is_string_dtype(h[c]) for c in ("pod", "kernel", "module", "capture"))
    r = f.regressions(since="1h")
    assert r.p50_regressed.dtype == bool and r.p99_change.dtype == "float64"
    empty = f.top(pod="nope")
    assert list(empty.columns) == list(f.top().columns) and len(empty) == 0
    assert empty.total_ps.dtype == "int64"


def test_errors_are_pythons_own_kinds(store):
    with pytest.raises(ConnectionError, match="cannot reach ClickHouse") as e:
        Fleet(f"http://127.0.0.1:{free_port()}", podprof=BIN / "podprof").top()
    assert isinstance(e.value, errors.UnreachableError) and not e.value.tls
    with pytest.raises(PermissionError, match="reader"):
        Fleet(store["url"], user="reader", password="wrong",
              podprof=BIN / "podprof").history("fusion")
    with pytest.raises(FileNotFoundError, match="PODPROF_BIN"):
        Fleet(store["url"], podprof=store["folder"] / "no-such-podprof").top()
    for f in (reader(store), podprof.Client(store["http"]).fleet()):
        with pytest.raises(ValueError, match="by 'chip'"):
            f.top(by="chip")
        with pytest.raises(ValueError, match="-1d"):
            f.history("fusion", since="-1d")
        with pytest.raises(ValueError, match="30 days"):
            f.regressions(since="30 days")
        with pytest.raises(ValueError, match="regex"):
            f.history("fusion(")
    f = reader(store)
    with pytest.raises(ValueError, match="labels"):
        f.history("fusion", labels=["job"])
    with pytest.raises(ValueError, match="regex"):
        f.history("fusion(")  # refused by ClickHouse's RE2, as by the CLI's
    with pytest.raises(ValueError, match="url"):
        Fleet("https://127.0.0.1:8443")
    with pytest.raises(ValueError, match="database"):
        Fleet(store["url"], database="pod-prof")
    with pytest.raises(ValueError, match="nope"):
        Fleet(store["url"], user="reader", password_file=store["reader_pw"],
              database="nope", podprof=BIN / "podprof").top()
    with pytest.raises(ValueError, match="database"):
        Fleet(aggregator=store["http"], database="other")


def test_an_aggregator_without_fleet_says_so(store):
    """Fleet through an aggregator that has no [fleet]: NotFoundError naming the setting."""
    folder = store["folder"] / "plain"
    folder.mkdir(exist_ok=True)
    (folder / "agg.toml").write_text("")
    agg = store["procs"].start("plain", [BIN / "podprof-aggregator", "--insecure",
                                         "--listen=127.0.0.1:0", "--http-listen=127.0.0.1:0",
                                         f"--config={folder / 'agg.toml'}",
                                         f"--db={folder / 'podprof.db'}",
                                         f"--ready-file={folder / 'agg.json'}"])
    port = wait_file(folder / "agg.json", 30, agg)["http_port"]
    with pytest.raises(errors.NotFoundError, match=r"no \[fleet\] ClickHouse configured"):
        Fleet(aggregator=f"http://127.0.0.1:{port}").top()
