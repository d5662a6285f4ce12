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

What XProf showed and what differs by design is in docs/INTEROP.md, "Real peers".
"""
import collections
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

def tool(paths, name):
    """XProf's tool `name` of the XSpace files `paths`, parsed. XProf caches converted results
    beside the files; every call here converts afresh."""
    data, _ = raw_to_tool_data.xspace_to_tool_data([str(p) for p in paths], name,
                                                   {"use_saved_result": False})
    assert data, f"XProf's {name} of {paths} is empty"
    return json.loads(data)


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


def test_jax_cpu_capture_ops_equal_xprof_trace_viewer(out):
    shutil.rmtree(out / "trace", ignore_errors=True)
    (out / "program.py").write_text(JAX_PROGRAM)
    subprocess.run([sys.executable, out / "program.py", out / "trace"], check=True, timeout=120,
                   env={**os.environ, "JAX_PLATFORMS": "cpu"})
    files = list((out / "trace").glob("plugins/profile/*/*.xplane.pb"))
    assert len(files) == 1, files
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
