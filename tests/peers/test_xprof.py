"""XProf itself (PyPI xprof, pinned in requirements.txt) reads what podprof writes and reads, and
agrees with podprof op by op.

- podprof's XProf export (`podprof export --format xprof`) of the real v6e capture, imported
  into an aggregator, and of a simulated 4-host pod: XProf's converters (`raw_to_tool_data`)
  make its Trace Viewer, Overview and HLO Op Stats of it; every op has XProf's occurrences and
  total time equal to `podprof stats` (the export trims a nested event's end by at most 1 ns,
  export/nesting.h); the Task Environment start is the capture's, and XProf names the run
  after it. XProf places every op event of the re-exported v6e capture where it places it in
  the original.
- The real captures themselves: XProf's HLO Op Stats (TPU v6e) and Kernel Stats plus its Trace
  Viewer (GPU V100) against `podprof inspect`.
- A capture JAX writes on CPU (`jax.profiler.trace`): XProf's op statistics show no op for it
  (only IDLE; XProf reads op statistics from device planes, and JAX on CPU has none), so its
  Trace Viewer's host-thread events with `hlo_op` are compared with `podprof inspect`.
- XProf's web server on a logdir of exports lists the runs and hosts, and its Trace Viewer page
  loads in headless Chromium (screenshot in the artifact folder).
- XProf's op_profile, roofline_model and HLO Op Stats' rates on the v6e fixture and both
  exports, per op against podprof's kernel rows (time, FLOPs, bytes, rates, intensity, bound,
  efficiencies), and overview_page's step time against podprof's `Steps` events (demo export,
  JAX on CPU; the v6e fixture has none in either).

What XProf showed and what differs by design is in docs/INTEROP.md, "Real peers".
"""
import collections
import csv
import datetime
import gzip
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from peerlib import BIN, FIXTURES, OUT, SOURCE, free_port, podprof, podprof_json, xspace_class
from xprof.convert import raw_to_tool_data

V6E = "tpu_v6e_4chip_host_offload.xplane.pb"
GPU = "gpu_8xv100_34.83.195.179_6003.xplane.pb"
HOSTS = 4
PS_PER_US = 1e6
# The export trims a nested event's end by at most this (export/nesting.h, kMaxTrimNs).
TRIM_PS = 1000


# --- XProf's converters ------------------------------------------------------------------------

_converted = {}


def tool(paths, name):
    """XProf's tool `name` of the XSpace files `paths`, parsed. XProf caches converted results
    beside the files; XProf converts afresh for every file or tool not asked before (tests ask
    for the same tool of the same files more than once)."""
    key = (name, tuple((str(p), Path(p).stat().st_mtime_ns, Path(p).stat().st_size)
                       for p in paths))
    if key not in _converted:
        data, _ = raw_to_tool_data.xspace_to_tool_data([str(p) for p in paths], name,
                                                       {"use_saved_result": False})
        assert data, f"XProf's {name} of {paths} is empty"
        _converted[key] = data
    return json.loads(_converted[key])


def gviz_rows(table):
    """A gviz table ({cols, rows: [{c: [{v}]}]}) as dicts by column id."""
    cols = [c["id"] for c in table["cols"]]
    return [dict(zip(cols, [c.get("v") if c else None for c in row["c"]])) for row in table["rows"]]


def hlo_ops(paths):
    """XProf's HLO Op Stats: (op name, program id) -> occurrences, total and self time in ps."""
    ops = {}
    for r in gviz_rows(tool(paths, "hlo_stats")):
        key = (r["hlo_op_name"], str(r["program_id"]))
        assert key not in ops, f"XProf lists {key} twice"
        ops[key] = (int(r["occurrences"]), r["total_time"] * PS_PER_US,
                    r["total_self_time"] * PS_PER_US)
    return ops


def trace_events(paths):
    """XProf's Trace Viewer (one XSpace at a time, as XProf's converter takes it): its complete
    events with their process and thread names."""
    out = []
    for path in paths:
        events = tool([path], "trace_viewer")["traceEvents"]
        procs = {e["pid"]: e["args"]["name"] for e in events if e.get("name") == "process_name"}
        threads = {(e["pid"], e["tid"]): e["args"]["name"]
                   for e in events if e.get("name") == "thread_name"}
        out += [dict(e, process=procs.get(e["pid"], ""),
                     thread=threads.get((e["pid"], e.get("tid")), ""))
                for e in events if e.get("ph") == "X"]
    return out


def fresh_copy(src, folder):
    """`src` copied alone into a new `folder` (XProf writes its caches beside the file)."""
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    shutil.copy(src, folder / Path(src).name)
    return folder / Path(src).name


def close(xprof_ps, podprof_ps, count, trim_ps=0):
    """XProf reports µs as doubles: equal up to `trim_ps` per event plus their rounding."""
    return abs(xprof_ps - podprof_ps) <= count * trim_ps + 1e-9 * abs(podprof_ps) + 1


# --- The Task Environment, read with podprof's xplane.proto (the profiler's schema) ------------

def task_environment(xspace_cls, path):
    space = xspace_cls.FromString(Path(path).read_bytes())
    env = [p for p in space.planes if p.name == "Task Environment"]
    assert len(env) == 1, f"{path}: {len(env)} Task Environment planes"
    names = {k: v.name for k, v in env[0].stat_metadata.items()}
    return {names[s.metadata_id]: s.uint64_value for s in env[0].stats}


# --- The pod: `podprof demo --keep` (aggregator, 4 simulated hosts and agents) ----------------

def running(pid):
    """Whether `pid` still runs: the demo's children are not ours, so once stopped they may stay
    zombies until whoever adopted them reaps them."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def stop_pids(pids):
    for p in pids:
        try:
            os.kill(p, signal.SIGTERM)
        except ProcessLookupError:
            pass
    end = time.monotonic() + 10
    while time.monotonic() < end and any(running(p) for p in pids):
        time.sleep(0.05)
    for p in pids:
        if running(p):
            os.kill(p, signal.SIGKILL)


@pytest.fixture(scope="module")
def pod():
    folder = OUT / "xprof_pod"
    shutil.rmtree(folder, ignore_errors=True)  # a rerun's exports and caches start anew
    folder.mkdir(parents=True)
    r = subprocess.run([str(BIN / "podprof"), "demo", "--keep", "--hosts", str(HOSTS),
                        "--duration", "1s", "--format", "json", "--dir", str(folder / "demo")],
                       capture_output=True, text=True, timeout=180)
    (folder / "demo.stderr").write_text(r.stderr)
    assert r.returncode == 0, f"podprof demo exited {r.returncode}:\n{r.stderr[-3000:]}"
    demo = json.loads(r.stdout)
    try:
        assert demo["state"] == "complete", demo["state"]
        agg = demo["aggregator"]
        imported = podprof_json("import", fresh_copy(FIXTURES / V6E, folder / "v6e-in"),
                                "--aggregator", agg)
        assert not imported["file_errors"], imported["file_errors"]
        logdir = folder / "logdir"  # both exports, one run each, as XProf's server reads them
        captures = {}
        for name, cap in (("demo", demo["capture_id"]), ("v6e", imported["capture"])):
            podprof("export", cap, "--format", "xprof", "-o", logdir, "--aggregator", agg)
            summary = [c for c in podprof_json("captures", "--aggregator", agg)
                       if c["capture"] == cap][0]
            start = datetime.datetime.fromtimestamp(summary["start_ns"] // 10**9,
                                                    datetime.timezone.utc)
            run = start.strftime("%Y_%m_%d_%H_%M_%S")  # podprof's XprofRunName
            files = sorted((logdir / "plugins/profile" / run).glob("*.xplane.pb"))
            assert len(files) == summary["hosts"], f"{name}: {files}"
            stats = podprof_json("stats", cap, "--by", "kernel", "--aggregator", agg)["rows"]
            captures[name] = {"id": cap, "run": run, "files": files, "summary": summary,
                              "stats": stats}
        yield {"aggregator": agg, "folder": folder, "logdir": logdir, **captures}
    finally:
        stop_pids(demo["pids"])


def check_ops_against_stats(xprof_ops, stats, what):
    """Every op of `podprof stats --by kernel` is in XProf's HLO Op Stats with its count and its
    total (less at most 1 ns per event of nesting trim), and XProf lists no other op."""
    left = dict(xprof_ops)
    worst = 0.0
    for row in stats:
        key = (row["kernel"], str(row["program_id"]))
        assert key in left, f"{what}: XProf's HLO Op Stats lack {key}; it has {sorted(left)}"
        count, total, _ = left.pop(key)
        assert count == row["count"], \
            f"{what} {key}: XProf {count} occurrences, podprof {row['count']}"
        assert close(total, row["total_ps"], count, TRIM_PS), \
            f"{what} {key}: XProf {total} ps, podprof {row['total_ps']} ps"
        worst = max(worst, abs(total - row["total_ps"]) / count)
    assert not left, f"{what}: XProf lists ops podprof does not: {sorted(left)}"
    return worst


# --- (a) podprof's export, read by XProf -------------------------------------------------------

@pytest.mark.parametrize("name", ["v6e", "demo"])
def test_xprof_reads_the_export_and_counts_what_podprof_counts(pod, name, out):
    cap = pod[name]
    files = cap["files"]
    assert "hlo_stats" in raw_to_tool_data.xspace_to_tool_names([str(f) for f in files])
    worst = check_ops_against_stats(hlo_ops(files), cap["stats"], name)

    overview = tool(files, "overview_page")
    env = [t["p"] for t in overview if t.get("p", {}).get("host_count")]
    assert env and env[0]["host_count"] == str(cap["summary"]["hosts"]), env
    assert env[0]["device_core_count"] == str(cap["summary"]["chips"]), env

    # XProf's Trace Viewer has every op event (none is zero-length here) on its XLA Ops lines.
    events = trace_events(files)
    per_op = collections.Counter(e["name"] for e in events if e["thread"] == "XLA Ops")
    for row in cap["stats"]:
        if row["min_ps"] > 0:
            assert per_op[row["kernel"]] == row["count"], (row["kernel"], per_op[row["kernel"]])
    assert sum(per_op.values()) <= sum(r["count"] for r in cap["stats"])

    # The run: XProf names it after the start, which every host's Task Environment holds.
    xspace = xspace_class(out)
    start, stop = cap["summary"]["start_ns"], cap["summary"]["end_ns"]
    for f in files:
        assert task_environment(xspace, f) == {"profile_start_time": start,
                                               "profile_stop_time": stop}, f
    (out / "result.json").write_text(json.dumps(
        {"ops": len(cap["stats"]), "max_total_difference_ps_per_event": worst,
         "trace_viewer_op_events": sum(per_op.values()), "start_ns": start, "run": cap["run"]},
        indent=1))


def test_xprof_places_the_reexported_v6e_ops_where_it_places_the_originals(pod, out):
    """The Trace Viewer of the original and of import + export: the same ops at the same starts.
    XProf's Trace Viewer leaves out zero-length events: the original has events whose host
    time is 0 ps long (podprof keeps their device duration, so the export shows them), and ops
    whose device duration is 0 ps (podprof's min_ps 0) are left out of the export's view."""
    def starts(paths):
        return collections.Counter((e["process"], e["thread"], e["name"], e["ts"])
                                   for e in trace_events(paths)
                                   if e["thread"] in ("XLA Ops", "XLA Modules"))
    original = starts([fresh_copy(FIXTURES / V6E, out / "original")])
    exported = starts(pod["v6e"]["files"])
    zero_length = {r["kernel"] for r in pod["v6e"]["stats"] if r["min_ps"] == 0}
    missing = original - exported
    assert all(k[2] in zero_length for k in missing), sorted(missing)[:10]
    assert sum(missing.values()) < 0.01 * sum(original.values())
    assert sum((original & exported).values()) > 6000


# --- (b) the real captures: XProf and `podprof inspect` ----------------------------------------

def test_v6e_fixture_op_stats_equal_podprof_inspect(out):
    path = fresh_copy(FIXTURES / V6E, out / "v6e")
    ops = hlo_ops([path])
    kernels = podprof_json("inspect", path, "--by", "kernel")["kernels"]
    left = dict(ops)
    for k in kernels:
        count, total, self_time = left.pop((k["kernel"], str(k["program_id"])))
        assert count == k["count"], (k["kernel"], count, k["count"])
        # Both take the device-measured duration: equal but for XProf's µs doubles.
        assert close(total, k["total_ps"], count), (k["kernel"], total, k["total_ps"])
        # No op of this capture runs inside another on the device clock, so XProf's self time
        # is the whole time, as podprof's totals take it.
        assert close(self_time, total, count), (k["kernel"], self_time, total)
    assert not left, sorted(left)
    assert len(kernels) == 17


def test_gpu_fixture_kernel_stats_equal_podprof_inspect(out):
    """XProf's Kernel Stats has a row per kernel and launch shape (grid, block, registers,
    shared memory) and no copies; podprof has a row per kernel name. Summed per name they agree;
    the memcpys are compared with XProf's Trace Viewer (the Stream lines)."""
    path = fresh_copy(FIXTURES / GPU, out / "gpu")
    by_name = collections.defaultdict(lambda: [0, 0.0])
    for r in gviz_rows(tool([path], "kernel_stats")):
        by_name[r["kernel_name"]][0] += int(r["occurrences"])
        by_name[r["kernel_name"]][1] += r["total_duration_us"] * PS_PER_US
    streams = collections.defaultdict(lambda: [0, 0.0])
    for e in trace_events([path]):
        if e["process"].startswith("/device:GPU:") and e["thread"].startswith("Stream #"):
            streams[e["name"]][0] += 1
            streams[e["name"]][1] += e["dur"] * PS_PER_US
    kernels = podprof_json("inspect", path, "--by", "kernel")["kernels"]
    copies = 0
    for k in kernels:
        if k["category"] == "gpu kernel":
            count, total = by_name.pop(k["kernel"])
        else:
            assert k["category"] == "memcpy", k["category"]
            count, total = streams[k["kernel"]]
            copies += 1
        assert count == k["count"], (k["kernel"][:80], count, k["count"])
        assert close(total, k["total_ps"], count), (k["kernel"][:80], total, k["total_ps"])
    assert not by_name, sorted(by_name)
    assert copies == 2 and len(kernels) == 13


# --- (c) a capture JAX writes on CPU -----------------------------------------------------------

JAX_PROGRAM = r'''
import sys
import jax
import jax.numpy as jnp

@jax.jit
def loss(w, x):
    with jax.named_scope("dense"):
        y = jnp.tanh(x @ w)
    with jax.named_scope("loss"):
        return jnp.mean(y * y)

grad = jax.jit(jax.grad(loss))
w, x = jnp.ones((64, 64)), jnp.ones((32, 64))
grad(w, x).block_until_ready()  # compiled before the trace
loss(w, x).block_until_ready()
with jax.profiler.trace(sys.argv[1]):
    for i in range(5):
        with jax.profiler.StepTraceAnnotation("train", step_num=i):
            w = w - 0.01 * grad(w, x)
            l = loss(w, x)
    l.block_until_ready()
'''


@pytest.fixture(scope="module")
def jax_capture():
    """The capture JAX writes of JAX_PROGRAM on CPU (one run for the module's tests)."""
    folder = OUT / "jax_capture"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    (folder / "program.py").write_text(JAX_PROGRAM)
    subprocess.run([sys.executable, folder / "program.py", folder / "trace"], check=True,
                   timeout=120, env={**os.environ, "JAX_PLATFORMS": "cpu"})
    files = list((folder / "trace").glob("plugins/profile/*/*.xplane.pb"))
    assert len(files) == 1, files
    return files[0]


def test_jax_cpu_capture_ops_equal_xprof_trace_viewer(jax_capture, out):
    files = [jax_capture]
    inspected = podprof_json("inspect", files[0], "--by", "kernel")
    assert [c["kind"] for c in inspected["chips"]] == ["cpu"]
    ours = collections.defaultdict(lambda: [0, 0, 0])  # (module, op) -> count, total, min
    for k in inspected["kernels"]:
        o = ours[(k["module"], k["kernel"])]  # one name may be two instructions of a module
        o[0] += k["count"]
        o[1] += k["total_ps"]
        o[2] = min(o[2], k["min_ps"]) if o[0] > k["count"] else k["min_ps"]
    theirs = collections.defaultdict(lambda: [0, 0.0])
    for e in trace_events([files[0]]):
        a = e.get("args", {})
        if e["process"] == "/host:CPU" and "hlo_op" in a:
            t = theirs[(a.get("hlo_module", ""), a["hlo_op"])]
            t[0] += 1
            t[1] += e["dur"] * PS_PER_US
    assert ours and set(theirs) == set(ours), (sorted(theirs), sorted(ours))
    for key, (count, total, least) in ours.items():
        xcount, xtotal = theirs[key]
        # XProf's Trace Viewer leaves out a zero-length event.
        assert xcount == count or (least == 0 and xcount < count), (key, xcount, count)
        assert close(xtotal, total, count), (key, xtotal, total)
    (out / "result.json").write_text(json.dumps({"ops": len(ours), "events": sum(
        v[0] for v in ours.values())}, indent=1))


# --- (d) XProf's server and its Trace Viewer in a browser ---------------------------------------

def http_get(url, timeout=60):
    """Status and body (gunzipped: XProf's server compresses its answers)."""
    req = urllib.request.Request(url, headers={"Accept-Encoding": "gzip"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            body = r.read()
            if r.headers.get("Content-Encoding") == "gzip":
                body = gzip.decompress(body)
            return r.status, body
    except urllib.error.HTTPError as e:
        return e.code, e.read()


BROWSER_SCRIPT = r'''
import {createRequire} from 'node:module';
const [,, webPackage, browserPath, url, shot, profile] = process.argv;
const {chromium} = createRequire(webPackage)('playwright-core');
const context = await chromium.launchPersistentContext(profile, {
  executablePath: browserPath, headless: true, viewport: {width: 1400, height: 900},
  args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking',
         '--disable-component-update', '--disable-sync', '--no-first-run']});
const page = context.pages()[0] || await context.newPage();
const responses = [], failed = [], logged = [];
page.on('response', async r => {
  let size = -1, traceEvents = false;
  try {
    const body = await r.body();
    size = body.length;
    traceEvents = body.includes('"traceEvents"') && body.includes('XLA Ops');
  } catch (e) { /* a redirect or an aborted frame has no body */ }
  responses.push({url: r.url(), status: r.status(), size, traceEvents});
});
page.on('requestfailed', r => failed.push({url: r.url(), error: r.failure()?.errorText}));
page.on('console', m => logged.push(`${m.type()}: ${m.text()}`.slice(0, 300)));
let error = null;
try {
  await page.goto(url, {waitUntil: 'load', timeout: 60000});
  const end = Date.now() + 90000;
  const isTrace = r => r.url.includes('/data/plugin/profile/data?') &&
                       r.url.includes('trace_viewer');
  while (Date.now() < end && !responses.some(r => isTrace(r) && r.size >= 0)) {
    await page.waitForTimeout(250);
  }
  await page.waitForTimeout(4000);  // the viewer draws the tracks
} catch (e) { error = String(e); }
await page.screenshot({path: shot});
console.log(JSON.stringify({error, responses, failed, console: logged.slice(0, 40),
                            frames: page.frames().map(f => f.url())}));
await context.close();
'''


def test_xprof_server_lists_the_runs_and_shows_the_trace(pod, procs, out):
    port, grpc_port = free_port(), free_port()
    server = procs.start("xprof-server", [sys.executable, "-m", "xprof.server", "--logdir",
                                          pod["logdir"], "--port", port, "--grpc_port", grpc_port])
    base = f"http://127.0.0.1:{port}/data/plugin/profile"
    end = time.monotonic() + 60
    while True:
        assert server.poll() is None, procs.log("xprof-server")[-3000:]
        try:
            status, body = http_get(f"{base}/runs", timeout=5)
            if status == 200:
                break
        except OSError:
            pass
        assert time.monotonic() < end, "XProf's server did not answer in 60 s"
        time.sleep(0.3)
    runs = json.loads(body)
    assert sorted(runs) == sorted([pod["demo"]["run"], pod["v6e"]["run"]]), runs
    for name in ("demo", "v6e"):
        run = pod[name]["run"]
        status, body = http_get(f"{base}/run_tools?run={run}")
        assert status == 200 and "hlo_stats" in json.loads(body), body[:500]
        status, body = http_get(f"{base}/hosts?run={run}&tag=trace_viewer@")
        assert status == 200, body[:500]
        hosts = sorted(h["hostname"] for h in json.loads(body))
        assert hosts == sorted(pod[name]["summary"]["host_names"]), hosts
    run = pod["demo"]["run"]
    status, body = http_get(f"{base}/data?run={run}&tag=hlo_stats&host=ALL_HOSTS", timeout=120)
    assert status == 200, body[:500]
    table = json.loads(body)
    table = table[0] if isinstance(table, list) else table
    assert len(table["rows"]) == len(pod["demo"]["stats"]), len(table["rows"])

    # The Trace Viewer page of host-0, in headless Chromium.
    shot = out / "xprof-trace-viewer.png"
    shot.unlink(missing_ok=True)
    profile = out / "chromium-profile"
    shutil.rmtree(profile, ignore_errors=True)
    url = f"{base}/trace_viewer@?run={run}&tag=trace_viewer@&host=host-0"
    web = SOURCE / "web"
    assert shutil.which("node") and (web / "node_modules/playwright-core").is_dir(), \
        "the browser check needs node and web/node_modules/playwright-core " \
        "(scripts/install-deps.sh)"
    (out / "browser.mjs").write_text(BROWSER_SCRIPT)
    r = subprocess.run(["node", out / "browser.mjs", web / "package.json", "/usr/bin/chromium", url,
                        shot, profile], capture_output=True, text=True, timeout=180)
    assert r.returncode == 0, r.stderr[-3000:]
    page = json.loads(r.stdout.strip().splitlines()[-1])
    (out / "browser.json").write_text(json.dumps(page, indent=1))
    assert page["error"] is None, page["error"]
    trace = [x for x in page["responses"]
             if "/data/plugin/profile/data?" in x["url"] and "trace_viewer" in x["url"]]
    assert trace and all(x["status"] == 200 for x in trace), trace
    assert any(x["size"] > 100_000 and x["traceEvents"] for x in trace), trace
    assert any("trace_viewer_index.html" in f for f in page["frames"]), page["frames"]
    assert shot.is_file() and shot.stat().st_size > 20_000
    # Without the internet the page still draws the trace; what it could not fetch is recorded.
    external = sorted({x["url"] for x in page["failed"] if not x["url"].startswith(base)})
    (out / "external-resources.txt").write_text("\n".join(external) + "\n")


# --- (e) XProf's op_profile, roofline_model, HLO Op Stats' rates and overview_page's steps ------
# Each figure both tools define, per op, against `podprof inspect` (the v6e fixture) and
# `podprof stats` (the exports); where they differ by design (docs/INTEROP.md, "XProf's
# op_profile, roofline_model and overview_page"), both values are asserted.

GIB = 2**30  # XProf's roofline speaks GiB/s; podprof GB/s (10^9 bytes)
# podprof's verdicts that are not a roofline's: XProf still places those ops on its roofline
# (HBM or Compute, by their intensity). "stalled", "unit bound" and "throttled" come from
# performance counters, which XProf's roofline does not read.
NOT_ROOFLINE = {"communication", "collective wait", "async wait", "launch/overhead bound",
                "stalled", "unit bound", "throttled", "unknown"}


def near(a, b, rel=1e-9):
    return abs(a - b) <= rel * max(abs(a), abs(b)) + 1e-12


def time_rel(row, trim_ps):
    """How far XProf's time of an op may be from podprof's, relatively: the export trims each
    event by at most `trim_ps` (XProf's µs doubles add their rounding)."""
    return row["count"] * trim_ps / max(1, row["total_ps"] - row["count"] * trim_ps) + 1e-9


def op_profile_ops(paths):
    """XProf's op_profile: its per-program tree's ops, (name, program id) -> node, and the
    tree's whole time. An op is the deepest node with a program id (its fused instructions
    below it have none; a node "X and its duplicate" groups ops above them)."""
    tree = tool(paths, "op_profile")["byProgram"]
    ops = {}

    def walk(node):
        kids = node.get("children", [])
        if node.get("xla", {}).get("programId", "0") != "0" and not any(
                k.get("xla", {}).get("programId", "0") != "0" for k in kids):
            key = (node["name"], node["xla"]["programId"])
            assert key not in ops, f"op_profile lists {key} twice"
            ops[key] = node
            return
        for k in kids:
            walk(k)
    walk(tree)
    return ops, tree["metrics"]["rawTime"]


def roofline_ops(paths):
    """XProf's roofline_model: its peaks (the table's properties) and per op, (name, program
    id) -> row, of the whole profile ('Total') with infeed and outfeed counted."""
    table = tool(paths, "roofline_model")[0]
    rows = {(r["operation"], r["hlo_module_id"]): r for r in gviz_rows(table)
            if r["step"] == "Total" and r["include_infeed_outfeed"] and r["rank"] > 0}
    return table["p"], rows


def host_offload_pairs(ops):
    """The halves of each asynchronous copy between HBM and host memory (XLA's memory space
    S(5) in the op's HLO): copy-start.N and copy-done.N."""
    pairs = collections.defaultdict(list)
    for (name, program), node in ops.items():
        if node["xla"]["category"] in ("copy-start", "copy-done") and \
                "S(5)" in node["xla"]["expression"]:
            pairs[(name.replace("copy-start", "copy").replace("copy-done", "copy"),
                   program)].append((name, program))
    return pairs


def check_op_profile(paths, rows, trim_ps, exported, what):
    """XProf's op_profile against podprof's kernel rows: occurrences, time, FLOPs, category,
    FLOP utilisation (XProf weights it by the op's share of the tree's time) exactly or within
    the trim; HBM bytes and bandwidth as documented."""
    ops, tree_ps = op_profile_ops(paths)
    # An op with another inside it on the device clock XProf counts in its program's time but
    # leaves out of the program's categories (so as not to count its children twice): in the
    # re-exported v6e capture, the ops that overlap as podprof keeps them (host-mapped start,
    # device duration; "Real peers" below), those whose self time HLO Op Stats shows short.
    nested = {k for k, (_, total, self_time) in hlo_ops(paths).items() if self_time < total}
    assert set(ops) == {(r["kernel"], str(r["program_id"])) for r in rows} - nested, what
    assert not nested or exported, (what, nested)
    rows = [r for r in rows if (r["kernel"], str(r["program_id"])) not in nested]
    offload = host_offload_pairs(ops)
    in_pair = {op for pair in offload.values() for op in pair}
    for r in rows:
        key = (r["kernel"], str(r["program_id"]))
        m, xla = ops[key]["metrics"], ops[key]["xla"]
        rel = time_rel(r, trim_ps)
        assert m["occurrences"] == r["count"], (what, key)
        assert near(m["rawTime"], r["total_ps"], rel), (what, key, m["rawTime"], r["total_ps"])
        assert xla["category"] == r["category"], (what, key, xla["category"], r["category"])
        assert m["rawFlops"] == r["flops"] * r["count"], (what, key, m["rawFlops"], r["flops"])
        share = m["rawTime"] / tree_ps
        assert near(m["flops"] / share if share else 0, min(1, r["fraction_of_peak_flops"]),
                    rel), (what, key, m["flops"], r["fraction_of_peak_flops"])
        hbm = m["rawBytesAccessedArray"][0]
        if exported:
            # podprof's export writes each op's bytes_accessed, not XLA's breakdown of them by
            # memory space, from which alone op_profile takes its HBM bytes.
            assert hbm == 0 and m["bandwidthUtils"][0] == 0, (what, key, hbm)
        elif key not in in_pair:
            assert near(hbm, r["bytes_accessed"] * r["count"]), (what, key, hbm)
            if r["insight"]["verdict"] != "async wait":
                assert near(m["bandwidthUtils"][0], min(1, r["fraction_of_peak_hbm"]), rel), \
                    (what, key, m["bandwidthUtils"], r["fraction_of_peak_hbm"])
    # A copy between HBM and host memory: XProf counts its HBM bytes once, on the half that
    # touches HBM; podprof gives each half the bytes_accessed XLA gave it.
    by_key = {(r["kernel"], str(r["program_id"])): r for r in rows}
    for pair in offload.values():
        assert len(pair) == 2, pair
        hbm = sorted(ops[k]["metrics"]["rawBytesAccessedArray"][0] for k in pair)
        ours = [by_key[k]["bytes_accessed"] * by_key[k]["count"] for k in pair]
        assert ours[0] == ours[1] > 0, (pair, ours)
        assert (hbm == [0, 0]) if exported else near(hbm[0], 0) and near(hbm[1], ours[0]), \
            (pair, hbm, ours)
    return len(ops), len(offload), len(nested)


def check_rates(x, r, trim_ps, ridge, what):
    """One op's roofline figures, XProf's row `x` (HLO Op Stats or roofline_model) against
    podprof's kernel row `r`; returns podprof's verdict when XProf's bound differs by design."""
    key = (what, r["kernel"])
    rel = time_rel(r, trim_ps)
    flop_rate = x.get("measured_flop_rate", x.get("model_flop_rate"))
    assert x["occurrences"] == r["count"], key
    assert x["category"] == r["category"], (key, x["category"], r["category"])
    assert near(flop_rate, r["achieved_tflops"] * 1000, rel), (key, flop_rate, r)
    assert near(x["operational_intensity"], r["insight"]["arithmetic_intensity"], 1e-9), key
    xprof_gbps = x["measured_memory_bw"] * GIB / 1e9
    if r["insight"]["verdict"] == "async wait":
        # The half of an asynchronous copy waits for, or issues, a transfer: podprof gives it
        # no bandwidth; XProf divides its bytes by that time.
        assert r["achieved_hbm_gbps"] == 0, key
        assert near(xprof_gbps, r["bytes_accessed"] * r["count"] / x["total_time"] / 1e3,
                    1e-9), (key, xprof_gbps)
    else:
        assert near(xprof_gbps, r["achieved_hbm_gbps"], rel), (key, xprof_gbps, r)
    # XProf's bound is its intensity against the ridge, from podprof's own figures.
    compute = r["flops"] > 0 and r["insight"]["arithmetic_intensity"] >= ridge
    assert x["bound_by"] == ("Compute" if compute else "HBM"), (key, x["bound_by"])
    verdict = r["insight"]["verdict"]
    if verdict in ("compute bound", "memory bound"):
        assert x["bound_by"] == ("Compute" if verdict == "compute bound" else "HBM"), key
        return None
    assert verdict in NOT_ROOFLINE, (key, verdict)
    return verdict


def check_roofline(paths, rows, chip, trim_ps, what):
    """XProf's roofline_model and HLO Op Stats against podprof's rows: the peaks and ridge, and
    per op the FLOP rate, bandwidth, intensity, bound and efficiencies."""
    peaks, ops = roofline_ops(paths)
    assert near(float(peaks["peak_flop_rate"]), chip["peak_tflops"] * 1000, 1e-6), peaks
    # XProf prints its peaks to six significant digits.
    assert near(float(peaks["peak_hbm_bw"]) * GIB / 1e9, chip["peak_hbm_gbps"], 1e-5), peaks
    ridge = rows[0]["insight"]["ridge_point"]
    assert near(float(peaks["hbm_ridge_point"]), ridge, 1e-5), (peaks, ridge)
    assert near(ridge, chip["peak_tflops"] * 1e12 / (chip["peak_hbm_gbps"] * 1e9)), ridge
    hlo = {(r["hlo_op_name"], str(r["program_id"])): r for r in gviz_rows(tool(paths,
                                                                               "hlo_stats"))}
    assert set(ops) == set(hlo) == {(r["kernel"], str(r["program_id"])) for r in rows}, what
    differ = collections.Counter()
    for r in rows:
        key = (r["kernel"], str(r["program_id"]))
        x = ops[key]
        verdict = check_rates(x, r, trim_ps, ridge, what)
        assert check_rates(hlo[key], r, trim_ps, ridge, what + " hlo_stats") == verdict
        if verdict:
            differ[(verdict, x["bound_by"])] += 1
        rel = time_rel(r, trim_ps)
        assert near(x["compute_efficiency"], r["fraction_of_peak_flops"], rel), key
        # Both put an op against the roofline's time for its work (the larger of its FLOPs at
        # the peak rate and its bytes at the peak bandwidth); podprof none for an asynchronous
        # copy's half, whose time is not its transfer's.
        if r["insight"]["verdict"] == "async wait":
            assert r["insight"]["roofline_fraction"] == 0 and r["fraction_of_peak_hbm"] == 0
            assert near(x["roofline_efficiency"], x["max_mem_bw_utilization"]), key
        else:
            assert near(x["max_mem_bw_utilization"], r["fraction_of_peak_hbm"], rel), key
            assert near(x["roofline_efficiency"], r["insight"]["roofline_fraction"], rel), \
                (key, x["roofline_efficiency"], r["insight"]["roofline_fraction"])
    return differ


@pytest.fixture(scope="module")
def v6e_fixture():
    path = fresh_copy(FIXTURES / V6E, OUT / "xprof_tools_v6e")
    inspected = podprof_json("inspect", path, "--by", "kernel")
    return path, inspected


def test_op_profile_and_roofline_of_the_v6e_fixture_equal_podprof_inspect(v6e_fixture, out):
    path, inspected = v6e_fixture
    rows, chip = inspected["kernels"], inspected["chips"][0]
    ops, pairs, nested = check_op_profile([path], rows, 0, False, "v6e")
    differ = check_roofline([path], rows, chip, 0, "v6e")
    # What XProf places on its roofline and podprof names otherwise, here: the asynchronous
    # copies' halves and the all-reduce.
    assert set(differ) == {("async wait", "HBM"), ("communication", "HBM")}, differ
    assert (ops, pairs, nested) == (17, 6, 0)
    (out / "result.json").write_text(json.dumps(
        {"ops": ops, "host_offload_copies": pairs,
         "bound_differs_by_design": {f"{v} / {b}": n for (v, b), n in differ.items()}}, indent=1))


@pytest.mark.parametrize("name", ["v6e", "demo"])
def test_op_profile_and_roofline_of_the_exports_equal_podprof_stats(pod, name, out):
    cap = pod[name]
    trim = TRIM_PS if name == "v6e" else 0
    ops, _, nested = check_op_profile(cap["files"], cap["stats"], trim, True, name)
    first = podprof_json("inspect", cap["files"][0], "--by", "kernel")["chips"][0]
    differ = check_roofline(cap["files"], cap["stats"], first, trim, name)
    assert ops + nested == len(cap["stats"]) and (nested > 0) == (name == "v6e"), (ops, nested)
    if name == "demo":
        # The demo's kernels cover compute and memory bound, and podprof's other verdicts that
        # XProf's roofline places by intensity: collectives, short ops, stalls its counters saw.
        verdicts = {r["insight"]["verdict"] for r in cap["stats"]}
        assert {"compute bound", "memory bound"} <= verdicts, verdicts
        assert {v for v, _ in differ} == {"communication", "launch/overhead bound", "stalled"}, \
            differ
    (out / "result.json").write_text(json.dumps(
        {"ops": ops, "nested_left_out_of_op_profile": nested,
         "bound_differs_by_design": {f"{v} / {b}": n for (v, b), n in differ.items()}},
        indent=1))


def xprof_steps(paths):
    """XProf's step time (overview_page): its summary's strings, and its step rows."""
    tables = tool(paths, "overview_page")
    summary = [t["p"] for t in tables if "steptime_ms_average" in t.get("p", {})]
    graph = [t for t in tables if t.get("cols") and t["cols"][0]["id"] == "stepnum"]
    assert len(summary) == 1 and len(graph) == 1, tables
    return summary[0], gviz_rows(graph[0])


def podprof_steps(agg, cap, out):
    """podprof's `Steps` events of a stored capture (its CSV export, every kernel left out):
    step name -> {(host, chip): [durations in ps, in time order]}."""
    path = out / f"{cap}-steps.csv"
    podprof("export", cap, "--format", "csv", "--kernels", "x^", "-o", path, "--aggregator", agg)
    steps = collections.defaultdict(lambda: collections.defaultdict(list))
    with open(path) as f:
        for row in csv.DictReader(f):
            if row["line"] == "Steps":
                steps[row["kernel"]][(row["host"], row["chip"])].append(
                    (int(row["start_ns"]), int(row["duration_ps"])))
    return steps


def within_print(printed, ms):
    """XProf prints its summary with a few decimals: equal within half its last digit."""
    decimals = len(printed.split(".")[1]) if "." in printed else 0
    return abs(float(printed) - ms) <= 0.5 * 10**-decimals + 1e-9


def test_overview_step_time_of_the_demo_export_equals_podprof_steps(pod, out):
    """XProf takes a step that every host ran (aligned across hosts) and its slowest core;
    podprof's steps are its `Steps` lines, one event per step and chip named by step number."""
    summary, graph = xprof_steps(pod["demo"]["files"])
    steps = podprof_steps(pod["aggregator"], pod["demo"]["id"], out)
    chips = {c for per in steps.values() for c in per}
    assert len(chips) == pod["demo"]["summary"]["chips"]
    everywhere = [max(d for runs in per.values() for _, d in runs) / 1e9
                  for per in steps.values() if set(per) == chips]
    assert len(graph) == len(everywhere) > 100, (len(graph), len(everywhere), len(steps))
    mean = sum(everywhere) / len(everywhere)
    sdv = (sum((s - mean)**2 for s in everywhere) / (len(everywhere) - 1))**0.5
    for field, ours in (("average", mean), ("minimum", min(everywhere)),
                        ("maximum", max(everywhere)), ("standard_deviation", sdv)):
        assert within_print(summary[f"steptime_ms_{field}"], ours), (field, summary, ours)
    (out / "result.json").write_text(json.dumps(
        {"steps": len(everywhere), "steps_some_host_lacks": len(steps) - len(everywhere),
         "xprof": {k: v for k, v in summary.items() if k.startswith("steptime")},
         "podprof_ms": {"average": mean, "minimum": min(everywhere),
                        "maximum": max(everywhere)}}, indent=1))


def test_overview_step_time_of_a_jax_capture_equals_podprof_steps(pod, jax_capture, out):
    """JAX on CPU: XProf's steps are its StepTraceAnnotations, as podprof's; each step's time
    equal to the ns. XProf's op_profile and roofline have no op (no device plane), podprof's
    rows have the ops, without a cost model or peaks."""
    imported = podprof_json("import", fresh_copy(jax_capture, out / "in"),
                            "--aggregator", pod["aggregator"])
    assert not imported["file_errors"], imported["file_errors"]
    steps = podprof_steps(pod["aggregator"], imported["capture"], out)
    ours = sorted(run for per in steps.values() for runs in per.values() for run in runs)
    summary, graph = xprof_steps([jax_capture])
    assert [r["stepnum"] for r in graph] == [f"train {i}" for i in range(5)], graph
    assert len(ours) == 5 and set(steps) == {"train"}, steps
    for row, (_, ps) in zip(graph, ours):
        assert abs(row["stepTimeMs"] * 1e9 - ps) <= 1000, (row, ps)
    mean = sum(ps for _, ps in ours) / len(ours) / 1e9
    assert within_print(summary["steptime_ms_average"], mean), (summary, mean)
    assert within_print(summary["steptime_ms_maximum"], max(ps for _, ps in ours) / 1e9)

    ops, _ = op_profile_ops([jax_capture])
    peaks, roofline = roofline_ops([jax_capture])
    assert not ops and not roofline and float(peaks["peak_flop_rate"]) == 0
    kernels = podprof_json("inspect", jax_capture, "--by", "kernel")
    assert kernels["kernels"] and all(k["flops"] == 0 for k in kernels["kernels"])
    assert kernels["chips"][0]["peak_tflops"] == 0


def test_overview_of_the_v6e_fixture_and_podprof_find_no_steps(pod, v6e_fixture):
    """The v6e capture has no step marker: XProf says so, and podprof has no `Steps` event."""
    summary, graph = xprof_steps([v6e_fixture[0]])
    assert not graph and summary["steptime_ms_average"] == "0.00", summary
    assert "No step time measured" in summary["input_conclusion"], summary
    assert not podprof_steps(pod["aggregator"], pod["v6e"]["id"], OUT / "xprof_pod")
