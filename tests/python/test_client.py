"""podprof.Client against a real aggregator and agents, every table held equal to the CLI's.

One aggregator with four emulated agents (podprof-loadgen, as `podprof demo` uses) and two
captures taken by the CLI; each Client method's frame is compared with the CLI's CSV of the
same question (same columns, rows and values). Then writes (a capture started, followed over
server-sent events and cancelled), the errors a Python user expects, and mutual TLS with an
operator and a viewer (an aggregator of its own, with certificates from scripts/make-certs.sh
and the CLI's profile file).
"""
import io
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

import podprof
from peerlib import BIN, OUT, SOURCE, FIXTURES, Processes, podprof as cli, podprof_json, start_aggregator, wait_file

HOSTS, CHIPS = 4, 2


@pytest.fixture(scope="module")
def pod():
    folder = OUT / "pod"
    shutil.rmtree(folder, ignore_errors=True)  # a rerun's ready files and store start anew
    procs = Processes(folder)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "agg.toml").write_text('[telemetry]\nstore_interval = "1s"\n')
        agg = start_aggregator(procs, folder, [f"--config={folder / 'agg.toml'}"])
        address = f"127.0.0.1:{agg['port']}"
        lg = procs.start("loadgen", [BIN / "podprof-loadgen", "--insecure",
                                     f"--aggregator={address}", f"--agents={HOSTS}",
                                     f"--chips={CHIPS}", "--telemetry-interval=1s",
                                     f"--ready-file={folder / 'lg.json'}"])
        wait_file(folder / "lg.json", 30, lg)
        wait_online(address, HOSTS)
        taken = [json.loads(cli("capture", "--duration", "500ms", "--aggregator", address,
                                "--label", f"run=r{i}", "--format", "json")) for i in range(2)]
        yield {"address": address, "url": f"http://127.0.0.1:{agg['http_port']}",
               "captures": [t["capture_id"] for t in taken], "taken": taken, "folder": folder}
    finally:
        procs.stop()


def wait_online(address, n):
    end = time.monotonic() + 30
    while len([a for a in json.loads(cli("agents", "--aggregator", address, "--format", "json"))
               .get("agents", []) if a.get("state") == "online"]) < n:
        assert time.monotonic() < end, "agents did not come online"
        time.sleep(0.2)


def cli_csv(pod, *args):
    return pd.read_csv(io.StringIO(cli(*args, "--aggregator", pod["address"], "--format", "csv")),
                       dtype=str, keep_default_na=False)


def assert_same(frame, expected):
    """`frame` (the client's, typed) holds exactly the CLI's CSV `expected` (as text)."""
    assert list(frame.columns) == list(expected.columns)
    assert len(frame) == len(expected)
    for column in expected.columns:
        got, want = frame[column], expected[column]
        if isinstance(got.dtype, pd.DatetimeTZDtype):
            got = got.astype("int64").astype(str).where(got.notna(), "")
        elif pd.api.types.is_bool_dtype(got.dtype):
            got = got.map({True: "true", False: "false"})
        elif pd.api.types.is_float_dtype(got.dtype):
            numbers = pd.to_numeric(want.replace("", None))
            assert ((got == numbers) | (got.isna() & numbers.isna())).all(), column
            continue
        got = got.astype(object).where(got.notna(), "").astype(str)
        assert got.tolist() == want.tolist(), column


def as_cli_table(captures):
    """Client.captures() as the CLI's table: its first columns, labels joined as the CLI joins
    them (sorted k=v;k=v)."""
    table = captures.iloc[:, :9].copy()
    table["labels"] = [";".join(f"{k}={v}" for k, v in sorted(d.items())) for d in table.labels]
    return table


def test_the_version_is_podprofs():
    assert podprof.__version__ in cli("--version")
    cmake = (SOURCE / "CMakeLists.txt").read_text()
    assert f"project(podprof VERSION {podprof.__version__} " in cmake


def test_podprof_capture_json_has_the_keys_the_registry_gives(pod):
    tool = next(t for t in podprof_json("tools")["tools"] if t["name"] == "start_capture")
    assert tool["cli"] == "capture" and not tool["cli_json_is_array"]
    for taken in pod["taken"]:
        missing = [k for k in tool["cli_result_keys"] if k not in taken]
        assert not missing, f"podprof capture --format json lacks {missing}"


def test_tables_equal_the_clis(pod):
    c = podprof.Client(pod["url"])
    a, b = pod["captures"]
    assert_same(as_cli_table(c.captures()), cli_csv(pod, "captures"))
    assert_same(as_cli_table(c.captures(labels={"run": "r0"})),
                cli_csv(pod, "captures", "--label", "run=r0"))
    assert_same(as_cli_table(c.captures(limit=1, all=True)), cli_csv(pod, "captures", "--all"))
    assert_same(c.kernels(a), cli_csv(pod, "stats", a))
    assert_same(c.kernels(a, by="chip", kernel="fusion", top=5),
                cli_csv(pod, "stats", a, "--by", "chip", "--kernel", "fusion", "--top", "5"))
    assert_same(c.kernels(b, by="host"), cli_csv(pod, "stats", b, "--by", "host"))
    assert_same(c.kernels(b, host="host-2", chip=1, sort="p99", top=4),
                cli_csv(pod, "stats", b, "--host", "host-2", "--chip", "1", "--sort", "p99",
                        "--top", "4"))
    assert_same(c.kernels(b, by="kernel", category="convolution fusion", sort="count"),
                cli_csv(pod, "stats", b, "--by", "kernel", "--category", "convolution fusion",
                        "--sort", "count"))
    assert_same(c.stragglers(a), cli_csv(pod, "stragglers", a))
    assert_same(c.diff(a, b), cli_csv(pod, "diff", a, b))
    kernel = c.kernels(a).kernel[0]
    assert_same(c.history(kernel), cli_csv(pod, "history", kernel))
    # The clock columns move with every probe; the rest holds still between two calls.
    live = ["last_heartbeat_ns", "clock_offset_ns", "clock_uncertainty_ns", "clock_drift_ppb",
            "min_rtt_ns", "probe_count"]
    agents = c.agents()
    assert list(agents.columns) == list(cli_csv(pod, "agents").columns)
    assert_same(agents.drop(columns=live), cli_csv(pod, "agents").drop(columns=live))
    assert agents.clock_offset_ns.dtype == "int64"


def test_a_captures_hosts_are_what_podprof_capture_printed(pod):
    c = podprof.Client(pod["url"])
    taken = pod["taken"][1]
    hosts = c.capture(taken["capture_id"]).set_index("host")
    assert sorted(hosts.index) == sorted(h["host"] for h in taken["hosts"])
    for h in taken["hosts"]:
        row = hosts.loc[h["host"]]
        assert (row.status, row.events) == (h["status"], h["events"])
        assert row.clock_offset_ns == h["correction_ns"]
        assert row.clock_uncertainty_ns == h["uncertainty_ns"]
        assert row.analysed_by == "agent"


def test_frames_have_real_dtypes(pod):
    c = podprof.Client(pod["url"])
    a = pod["captures"][0]
    k = c.kernels(a)
    assert k.p50_ps.dtype == "int64" and k["count"].dtype == "int64"
    assert isinstance(k.verdict.dtype, pd.CategoricalDtype)
    caps = c.captures()
    assert str(caps.start_ns.dtype) == "datetime64[ns, UTC]"
    assert set(caps.capture) >= set(pod["captures"])
    hosts = c.capture(a)
    assert sorted(hosts.host) == [f"host-{i}" for i in range(HOSTS)]
    assert hosts.clock_offset_ns.dtype == "int64"
    assert hosts.attrs["capture"]["capture"] == a
    history = c.history(k.kernel[0])
    assert str(history.start_ns.dtype) == "datetime64[ns, UTC]"
    assert history.regression.dtype == bool


def test_a_capture_started_from_python_is_followed_to_its_end(pod):
    c = podprof.Client(pod["url"])
    h = c.start_capture("300ms", labels={"from": "python"})
    assert h.id.startswith("cap-") and len(h.hosts) == HOSTS
    seen = []
    assert h.wait(timeout=60, on_progress=seen.append) == "complete"
    assert seen[-1]["event"] == "done" and any(e.get("detail") == "capturing" for e in seen)
    assert len(h.kernels()) > 0
    assert h.url == f"{pod['url']}/captures/{h.id}"
    listed = c.captures(labels={"from": "python"})
    assert listed.capture.tolist() == [h.id] and listed.status[0] == "complete"


# The test pod arms no flight recorder: the snapshot holds the 400 ms after the request, and is
# stored and labelled so (#53; it was stored as the 400 ms before it).
def test_a_snapshot_without_a_recorder_says_it_holds_the_window_after_it(pod):
    c = podprof.Client(pod["url"])
    asked = pd.Timestamp.now(tz="UTC")
    h = c.snapshot("400ms", reason="from python")
    assert h.window is None and h.wait(timeout=60) == "complete"
    assert h.window == "after-request" and h.start >= asked
    listed = c.captures(labels={"reason": "from python"})
    assert listed.capture.tolist() == [h.id]
    assert listed.source[0] == "snapshot" and listed.labels[0]["trigger"] == "manual"
    assert listed.window[0] == "after-request" and listed.start_ns[0] == h.start
    assert abs(listed.end_ns[0] - listed.start_ns[0] - pd.Timedelta(400, "ms")) < pd.Timedelta(
        100, "ms")
    assert len(h.kernels()) > 0
    with pytest.raises(ValueError, match="window"):
        c.snapshot(0)


def test_telemetry_of_every_chip_and_the_triggers(pod):
    c = podprof.Client(pod["url"])
    end = time.monotonic() + 30
    while len(t := c.telemetry(since="1m")) < HOSTS * CHIPS * 2:
        assert time.monotonic() < end, "no telemetry stored"
        time.sleep(0.5)
    expected = cli_csv(pod, "telemetry", "--since", "1m")
    assert list(t.columns) == list(expected.columns)
    assert t.time_ns.is_monotonic_increasing and len(t) >= HOSTS * CHIPS * 2
    assert set(zip(t.host, t.chip)) == {(f"host-{h}", str(ch)) for h in range(HOSTS)
                                        for ch in range(CHIPS)}
    # What podprof-loadgen reports of a healthy pod: ten steps a second of about 90 ms, and
    # forty collectives a step of about 1.2 ms (the host's, on each of its chips). A row sums
    # the samples whose instants fall in its second: one, or two when a late send crossed it.
    assert t.steps.isin([10, 20]).all() and t.step_mean_us.between(89_000, 92_000).all()
    assert (t.collectives == 40 * t.steps).all()
    assert t.collective_mean_us.between(1_200, 1_212).all()
    one = c.telemetry(since="1m", hosts=["host-1"])
    assert set(one.host) == {"host-1"}
    # A healthy pod fires nothing.
    assert c.triggers()["events"] == [] and c.triggers()["settings"]["step_regression"] == 0.1


def test_a_capture_can_be_cancelled(pod):
    c = podprof.Client(pod["url"])
    h = c.start_capture("20s", delay="2s")
    h.cancel()
    assert h.wait(timeout=60) == "cancelled"


def test_a_start_instant_is_kept_or_refused(pod):
    c = podprof.Client(pod["url"])
    at = time.time_ns() + 3_000_000_000
    h = c.start_capture("20s", start_ns=at)
    assert h.start == pd.Timestamp(at, unit="ns", tz="UTC")
    h.cancel()
    assert h.wait(timeout=60) == "cancelled"
    with pytest.raises(ValueError, match="ms to reach the capture's 4 hosts"):
        c.start_capture(1, start_ns=time.time_ns() + 1_000_000)
    with pytest.raises(ValueError, match="cannot come with delay_ms"):
        c.start_capture(1, start_ns=at, delay="1s")
    with pytest.raises(ValueError, match="positive int"):
        c.start_capture(1, start_ns=1.5)  # type: ignore[arg-type]


def test_errors_are_pythons_own_kinds(pod):
    c = podprof.Client(pod["url"])
    with pytest.raises(ValueError, match='no capture with id "nope"'):
        c.kernels("nope")
    with pytest.raises(LookupError):
        c.stragglers("nope")
    with pytest.raises(ValueError, match="not a regular expression"):
        c.kernels(pod["captures"][0], kernel="(")
    with pytest.raises(ValueError, match="by='pod'"):
        c.kernels(pod["captures"][0], by="pod")
    with pytest.raises(ValueError, match="not an online agent"):
        c.start_capture(1, hosts=["no-such-host"])
    with pytest.raises(ValueError, match="positive"):
        c.start_capture(0)
    with pytest.raises(ConnectionError, match="connection refused") as e:
        podprof.Client(f"http://127.0.0.1:{closed_port()}").captures()
    assert not e.value.tls
    with pytest.raises(ValueError, match="all three"):
        podprof.Client(pod["url"], cert="a.crt")


def closed_port():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_export_streams_what_the_cli_writes(pod, tmp_path):
    c = podprof.Client(pod["url"])
    a = pod["captures"][0]
    got = c.export(a, tmp_path / "py.pftrace", progress=False)
    cli("export", a, "--aggregator", pod["address"], "--output", tmp_path / "cli.pftrace")
    assert got.read_bytes() == (tmp_path / "cli.pftrace").read_bytes()
    # Chrome JSON with tqdm's progress bar (the venv has tqdm), a window of it.
    # Both from the capture's first event: `start=0` would leave out the samples a host's
    # counters took a few microseconds before the capture's start, which `--to` alone keeps.
    got = c.export(a, tmp_path / "py.json", format="chrome", end=100_000_000, progress=True)
    cli("export", a, "--aggregator", pod["address"], "--format", "chrome", "--to", "100ms",
        "--output", tmp_path / "cli.json")
    assert got.read_bytes() == (tmp_path / "cli.json").read_bytes()
    assert not list(tmp_path.glob("*.part"))
    with pytest.raises(ValueError, match="format='svg'"):
        c.export(a, tmp_path / "x.svg", format="svg")


def test_timeline_is_the_events_of_a_window_on_the_pods_clock(pod, tmp_path):
    c = podprof.Client(pod["url"])
    a = pod["captures"][0]
    cli("export", a, "--aggregator", pod["address"], "--format", "csv", "--from", "100ms",
        "--to", "200ms", "--hosts", "host-1", "--output", tmp_path / "cli.csv")
    expected = pd.read_csv(tmp_path / "cli.csv", dtype=str, keep_default_na=False)
    window = c.timeline(a, hosts=["host-1"], start=100_000_000, end=200_000_000)
    assert len(window) > 0
    assert_same(window, expected)
    assert str(window.start_ns.dtype) == "datetime64[ns, UTC]"
    assert window.duration_ps.dtype == "int64"
    # The same window given as instants on the pod's clock, and one chip of it.
    start = c.captures().set_index("capture").start_ns[a]
    by_instant = c.timeline(a, hosts=["host-1"], chips=[1],
                            start=start + pd.Timedelta(100, "ms"),
                            end=start + pd.Timedelta(200, "ms"))
    assert_same(by_instant, expected[expected.chip == "1"].reset_index(drop=True))
    with pytest.raises(ValueError, match="no time zone"):
        c.timeline(a, start=pd.Timestamp("2026-01-01"))


# --- mutual TLS -------------------------------------------------------------------------------

def make_certs(folder):
    sh = ["bash", SOURCE / "scripts/make-certs.sh", "--dir", folder]
    for args in (["ca"], ["aggregator", "agg", "127.0.0.1", "localhost"],
                 ["operator", "alice"], ["operator", "viewer"]):
        subprocess.run([str(x) for x in sh + args], check=True, capture_output=True)
    other = folder / "other"
    other.mkdir()
    for args in (["ca"], ["operator", "mallory"]):
        subprocess.run(["bash", str(SOURCE / "scripts/make-certs.sh"), "--dir", str(other),
                        *args], check=True, capture_output=True)
    return folder


@pytest.fixture(scope="module")
def tls_pod():
    folder = OUT / "tls"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    certs = make_certs(folder / "certs")
    (folder / "agg.toml").write_text(
        f'[tls]\ncert = "{certs}/agg.crt"\nkey = "{certs}/agg.key"\nca = "{certs}/ca.crt"\n'
        'allowed_operators = ["alice"]\n')
    procs = Processes(folder)
    try:
        ready = folder / "agg.json"
        p = procs.start("aggregator", [BIN / "podprof-aggregator", f"--config={folder / 'agg.toml'}",
                                       "--listen=127.0.0.1:0", "--http-listen=127.0.0.1:0",
                                       f"--db={folder / 'p.db'}", f"--ready-file={ready}"])
        info = wait_file(ready, 30, p)
        tls = ["--tls-cert", certs / "alice.crt", "--tls-key", certs / "alice.key",
               "--tls-ca", certs / "ca.crt"]
        cli("import", FIXTURES / "tpu_v6e_4chip_host_offload.xplane.pb", "--aggregator",
            f"127.0.0.1:{info['port']}", *tls)
        yield {"url": f"https://127.0.0.1:{info['http_port']}", "certs": certs,
               "address": f"127.0.0.1:{info['port']}", "tls": tls}
    finally:
        procs.stop()


def tls_client(pod, who, ca=None):
    c = pod["certs"]
    return podprof.Client(pod["url"], cert=str(c / f"{who}.crt"), key=str(c / f"{who}.key"),
                          ca=str(ca or c / "ca.crt"))


def test_mutual_tls_a_viewer_reads_and_only_an_operator_writes(tls_pod):
    viewer, alice = tls_client(tls_pod, "viewer"), tls_client(tls_pod, "alice")
    caps = viewer.captures()
    assert len(caps) == 1 and caps.source[0] == "import"
    expected = pd.read_csv(io.StringIO(cli("stats", caps.capture[0], "--aggregator",
                                           tls_pod["address"], *tls_pod["tls"], "--format", "csv")),
                           dtype=str, keep_default_na=False)
    assert_same(viewer.kernels(caps.capture[0]), expected)
    with pytest.raises(PermissionError, match="allowed_operators"):
        viewer.start_capture(1)
    with pytest.raises(PermissionError, match="viewer"):
        viewer.cancel(caps.capture[0])
    with pytest.raises(PermissionError, match="viewer"):
        viewer.snapshot("1s")
    alert = {"status": "firing", "alerts": [{"status": "firing",
                                             "labels": {"alertname": "StepTimeHigh"}}]}
    with pytest.raises(PermissionError, match="viewer"):
        viewer._http.json("POST", "/api/v1/snapshots/webhook", body=alert)
    # The operator gets past the role check, to the pod's answer: no agents to capture.
    with pytest.raises(ValueError) as e:
        alice.start_capture(1)
    assert not isinstance(e.value, PermissionError)


def test_tls_failures_say_so(tls_pod):
    other = tls_pod["certs"] / "other"
    with pytest.raises(ConnectionError, match="TLS") as e:
        tls_client(tls_pod, "viewer", ca=other / "ca.crt").captures()
    assert e.value.tls
    mallory = podprof.Client(tls_pod["url"], cert=str(other / "mallory.crt"),
                             key=str(other / "mallory.key"), ca=str(tls_pod["certs"] / "ca.crt"))
    with pytest.raises(ConnectionError) as e:
        mallory.captures()
    assert e.value.tls
    with pytest.raises(ValueError, match="https"):
        podprof.Client(tls_pod["url"])


def test_a_profile_of_the_cli_configures_the_client(tls_pod, tmp_path, monkeypatch):
    c = tls_pod["certs"]
    config = tmp_path / "cli.toml"
    config.write_text(
        f'aggregator = "{tls_pod["address"]}"\nformat = "csv"\n[profiles.pod]\n'
        f'http = "{tls_pod["url"]}"\ntls_cert = "{c}/viewer.crt"\ntls_key = "{c}/viewer.key"\n'
        f'tls_ca = "{c}/ca.crt"\ntimeout = "10s"\n')
    monkeypatch.setenv("PODPROF_CLI_CONFIG", str(config))
    assert len(podprof.Client(profile="pod").captures()) == 1
    # The CLI reads the same file, `http` included, and answers the same.
    cli("captures", "--profile", "pod")
    with pytest.raises(ValueError, match=r"no \[profiles.nope\]"):
        podprof.Client(profile="nope")
    config.write_text(config.read_text() + "colour = \"red\"\n")
    with pytest.raises(ValueError, match="unknown key 'colour'"):
        podprof.Client(profile="pod")
