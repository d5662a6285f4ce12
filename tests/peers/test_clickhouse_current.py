"""The fleet store's SQL on a current ClickHouse engine (chdb 4.4.0, ClickHouse 26.9, pinned in
requirements.txt), with the answers of Debian's clickhouse-server 18.16 for the same rows.

chdb runs ClickHouse in process and serves no HTTP, so podprof cannot talk to it directly.
Instead podprof talks to a real 18.16 server (started here as harness/clickhouse_server.h
starts it) through a recording HTTP proxy, which keeps each request as sent: the statement
in the URL's `query` and its settings, the body (SQL, or an INSERT's RowBinary rows), the
user, and 18.16's answer. What is recorded is everything podprof's fleet code sends:

- the aggregators' replication (fleet/replicator.cc): the connection and database checks,
  every CREATE TABLE (fleet/schema.cc), the upgrade of a `stragglers` table an older podprof
  made (its columns read from system.columns, those it lacks added, `stragglers_all` made
  again), the "asked before sent" SELECTs and the RowBinary INSERTs (fleet/row_binary.h,
  fleet/capture_rows.cc), also on a restart with backfill, when the captures are present
  already and the SELECTs answer with them;
- `podprof fleet history|top|regressions` (fleet/queries.cc), each grouping and filter.

The rows are two `podprof demo` captures of one simulated v7x pod (kernel counters, and a
throttled chip in the second, so counter roll-ups, stragglers and a regression exist) plus the
shared test captures imported with labels, as two pods.

Then the recording is replayed in order into a chdb session: the same settings, the same
statements, each INSERT's body as recorded (FROM INFILE: chdb has no request body), and the
fleet commands' part with the session read-only (`readonly = 2`, as their user is). Every
statement must run, every SELECT must answer what 18.16 answered (JSONCompact: the rows and
the column types; text formats: the lines), and every table must hold the same rows as
18.16's. Values are compared as parsed JSON, so the formatting of a float never matters, only
its value; rows are compared in order where the statement has an ORDER BY, else as sorted
lists. The `_all` tables here are Merge tables: chdb has no cluster, so the Distributed form
(`[fleet] cluster`) is left to tests/fleet/fleet_cli_test.cc on 18.16.
"""
import base64
import http.client
import json
import math
import re
import shutil
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import chdb
from chdb import session as chdb_session

from peerlib import BIN, FIXTURES, free_port, podprof, wait_file

CLICKHOUSE_SERVER = Path("/usr/sbin/clickhouse-server")
TABLES = ["kernels", "kernel_stats", "kernel_rollups", "counter_rollups", "stragglers",
          "capture_hosts", "captures"]
TPU_FIXTURE = "tpu_v6e_4chip_host_offload.xplane.pb"
GPU_FIXTURE = "gpu_8xv100_34.83.195.179_6003.xplane.pb"
# A label that needs quoting in SQL.
NOTE = "note=it's a \\ and a '"
PASSWORDS = {"writer": "w-secret", "reader": "r-secret"}
# The stragglers table as a podprof before the straggler test made it, with a row it wrote.
OLDER_PODPROF = [
    "CREATE TABLE podprof.stragglers (pod String, capture_id String, start_ns UInt64, "
    "host String, chip UInt32, times_last UInt64, instances UInt64, caused_ps Int64, "
    "lateness_ps Int64, steps Array(Int64)) ENGINE = MergeTree "
    "PARTITION BY toYYYYMM(toDateTime(intDiv(start_ns, 1000000000))) "
    "ORDER BY (pod, start_ns, host, chip)",
    "CREATE TABLE podprof.stragglers_all AS podprof.stragglers "
    "ENGINE = Merge(podprof, '^stragglers$')",
    "INSERT INTO podprof.stragglers (pod, capture_id, start_ns, host, chip, times_last, "
    "instances, caused_ps, lateness_ps, steps) VALUES ('pod-a', 'older', "
    "1795000000000000000, 'host-0', 0, 5, 10, 100, 10, [])",
]


class ClickHouse1816:
    """Debian's clickhouse-server from a folder of its own: loopback ports, its own data, users
    `default`, `writer` and `reader` (readonly = 2), as harness/clickhouse_server.h."""

    def __init__(self, procs, folder):
        self.folder = folder
        self.http, tcp = free_port(), free_port()
        (folder / "data").mkdir(parents=True)
        d = str(folder)
        (folder / "config.xml").write_text(
            f"""<?xml version="1.0"?>
<yandex>
<logger><level>warning</level><log>{d}/server.log</log><errorlog>{d}/error.log</errorlog>
<console>0</console></logger>
<http_port>{self.http}</http_port><tcp_port>{tcp}</tcp_port>
<listen_host>127.0.0.1</listen_host>
<path>{d}/data/</path><tmp_path>{d}/tmp/</tmp_path>
<user_files_path>{d}/user_files/</user_files_path>
<format_schema_path>{d}/format_schemas/</format_schema_path>
<mark_cache_size>67108864</mark_cache_size><uncompressed_cache_size>0</uncompressed_cache_size>
<max_concurrent_queries>50</max_concurrent_queries>
<users_config>users.xml</users_config><default_profile>default</default_profile>
<default_database>default</default_database><timezone>UTC</timezone>
</yandex>
""")
        users = "".join(
            f"<{n}><password>{p}</password><networks><ip>127.0.0.1</ip></networks>"
            f"<profile>{prof}</profile><quota>default</quota></{n}>"
            for n, p, prof in [("default", "", "default"), ("writer", PASSWORDS["writer"],
                                                            "default"),
                               ("reader", PASSWORDS["reader"], "readonly")])
        (folder / "users.xml").write_text(
            '<?xml version="1.0"?>\n<yandex>\n<profiles><default/><readonly><readonly>2'
            f"</readonly></readonly></profiles>\n<users>{users}</users>\n"
            "<quotas><default/></quotas>\n</yandex>\n")
        self.proc = procs.start("clickhouse-18.16", [CLICKHOUSE_SERVER,
                                                     f"--config-file={folder / 'config.xml'}"])
        end = time.monotonic() + 60
        while True:
            try:
                if self.sql("SELECT 1") == "1\n":
                    break
            except OSError:
                pass
            assert self.proc.poll() is None, \
                f"clickhouse-server exited {self.proc.returncode}; see {folder}/error.log"
            assert time.monotonic() < end, f"clickhouse-server did not answer; see {folder}"
            time.sleep(0.1)
        self.version = self.sql("SELECT version()").strip()

    def sql(self, text, port=None):
        """Runs `text` as `default` over HTTP (to `port`, the proxy's, when given); its
        answer (an error fails)."""
        c = http.client.HTTPConnection("127.0.0.1", port or self.http, timeout=30)
        try:
            c.request("POST", "/?output_format_json_quote_64bit_integers=0", text.encode())
            r = c.getresponse()
            body = r.read().decode()
        finally:
            c.close()
        assert r.status == 200, f"18.16 refused {text!r}: {body}"
        return body


class RecordingProxy:
    """HTTP between podprof and 18.16: forwards each request as it came and keeps it, with the
    answer, in the order the requests arrived."""

    def __init__(self, upstream_port):
        self.exchanges = []
        lock = threading.Lock()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                with lock:
                    seq = len(proxy.exchanges)
                    proxy.exchanges.append(None)  # its place in the order of arrival
                params = urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query,
                                               keep_blank_values=True)
                auth = self.headers.get("Authorization", "")
                user = (base64.b64decode(auth[6:]).decode().split(":")[0]
                        if auth.startswith("Basic ") else "default")
                up = http.client.HTTPConnection("127.0.0.1", upstream_port, timeout=60)
                try:
                    up.request("POST", self.path, body, {
                        k: v for k, v in self.headers.items()
                        if k.lower() in ("authorization", "content-type")})
                    r = up.getresponse()
                    answer, status = r.read(), r.status
                finally:
                    up.close()
                proxy.exchanges[seq] = {
                    "user": user,
                    "query": params.pop("query", [""])[0],
                    "settings": {k: v[0] for k, v in params.items()},
                    "body": body, "status": status, "answer": answer}
                self.send_response(status)
                self.send_header("Content-Type", "text/plain; charset=UTF-8")
                self.send_header("Content-Length", str(len(answer)))
                self.send_header("Connection", "close")
                self.end_headers()
                self.wfile.write(answer)
                self.close_connection = True

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


def start_fleet_aggregator(procs, folder, name, db, pod, proxy_url):
    """An aggregator on `db` replicating as `pod` through the proxy, queueing at start what
    `db` holds already (backfill)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "writer.pw").write_text(PASSWORDS["writer"] + "\n")
    (folder / "agg.toml").write_text(
        f'[fleet]\nclickhouse_url = "{proxy_url}"\nuser = "writer"\n'
        f'password_file = "{folder / "writer.pw"}"\npod = "{pod}"\n'
        'flush_interval = "100ms"\nbackfill = "1d"\n')
    ready = folder / f"{name}.json"
    ready.unlink(missing_ok=True)
    p = procs.start(name, [BIN / "podprof-aggregator", "--insecure", "--listen=127.0.0.1:0",
                           "--http-listen=127.0.0.1:0", f"--config={folder / 'agg.toml'}",
                           f"--db={db}", f"--ready-file={ready}"])
    info = wait_file(ready, 30, p)
    p.address = f"127.0.0.1:{info['port']}"
    return p


def wait_drained(agg, seconds=60):
    end = time.monotonic() + seconds
    while True:
        s = json.loads(podprof("fleet", "status", "--format", "json", "--aggregator",
                               agg.address))
        if s["pending"] == 0 and s["replicated"] > 0:
            return s
        assert agg.poll() is None, f"{agg.name} exited: {agg.log_path}"
        assert time.monotonic() < end, f"{agg.name}'s backlog did not drain: {s}"
        time.sleep(0.1)


def stop(proc):
    proc.terminate()
    proc.wait(timeout=20)


# Seconds between the starts of the two demo runs, at least.
MIN_CAPTURE_GAP_S = 8


def demo(folder, *args):
    """One `podprof demo` capture of a 2-host v7x pod into folder/podprof.db."""
    for stale in folder.glob("*.json"):
        stale.unlink()  # the ready files of an earlier run in this folder
    got = json.loads(podprof("demo", "--dir", folder, "--hosts", 2, "--generation", "v7x",
                             "--kernel-profiling", "--duration", "300ms", "--format", "json",
                             *args, timeout=180))
    for trace in folder.glob("*.pftrace"):
        trace.unlink()  # the merged timeline: not what this test is about, and large
    assert got["state"] == "complete", got
    return got


def fleet(command, *args):
    """`podprof fleet COMMAND` as the read-only user, its JSON (run through the proxy)."""
    return json.loads(podprof("fleet", command, *args, "--format", "json"))


def record(out, procs):
    """18.16 behind the proxy, the pods replicated to it and every fleet query asked;
    returns (server, exchanges, what the CLI answered)."""
    for sub in ("ch", "demo", "pod-a", "pod-b"):
        shutil.rmtree(out / sub, ignore_errors=True)
    assert CLICKHOUSE_SERVER.exists(), \
        f"{CLICKHOUSE_SERVER} is missing: bash scripts/install-deps.sh installs it"
    ch = ClickHouse1816(procs, out / "ch")
    proxy = RecordingProxy(ch.http)
    try:
        ch.sql("CREATE DATABASE podprof")
        # Through the proxy, so that chdb replays it: the first aggregator's start upgrades it.
        for sql in OLDER_PODPROF:
            ch.sql(sql, port=proxy.port)

        # Pod a: two demo captures of one simulated pod, the second with a throttled chip.
        (out / "demo").mkdir()
        began = time.monotonic()
        first = demo(out / "demo", "--seed", 3)
        # The regressions period below needs the two captures' starts seconds apart (its
        # window is at most their gap wide, with a second of margin each side); a fast demo
        # would otherwise start the second too soon after the first.
        time.sleep(max(0.0, MIN_CAPTURE_GAP_S - (time.monotonic() - began)))
        second = demo(out / "demo", "--seed", 3, "--throttle", "1:0:0.4")
        db_a = out / "demo" / "podprof.db"
        a = start_fleet_aggregator(procs, out / "pod-a", "aggregator-a", db_a, "pod-a",
                                   proxy.url)
        podprof("import", FIXTURES / TPU_FIXTURE, "--label", "job=train", "--label", "team=x",
                "--label", NOTE, "--aggregator", a.address)
        # Pod a's upgrade done before pod b's aggregator starts: two aggregators upgrading one
        # server at once may both see the old stragglers_all and both drop it (harmless, since
        # both statements are IF [NOT] EXISTS, but the recording below counts each once).
        wait_drained(a)
        # Pod b: the test captures, labelled otherwise.
        b = start_fleet_aggregator(procs, out / "pod-b", "aggregator-b",
                                   out / "pod-b" / "podprof.db", "pod-b", proxy.url)
        podprof("import", FIXTURES / TPU_FIXTURE, "--label", "job=serve", "--aggregator",
                b.address)
        podprof("import", FIXTURES / GPU_FIXTURE, "--label", "job=train", "--aggregator",
                b.address)
        wait_drained(b)
        # A restart backfills pod a again: the "asked before sent" SELECTs now find every
        # capture, and only the kernels (a ReplacingMergeTree, repeats by design) are sent.
        stop(a)
        a = start_fleet_aggregator(procs, out / "pod-a", "aggregator-a", db_a, "pod-a",
                                   proxy.url)
        wait_drained(a)
        stop(a)
        stop(b)

        (out / "reader.pw").write_text(PASSWORDS["reader"] + "\n")
        reader = ["--clickhouse", proxy.url, "--clickhouse-user", "reader",
                  "--clickhouse-password-file", out / "reader.pw"]
        # The regressions period puts the first demo capture in the baseline, the second in
        # the current period: p with now - 2p <= first < now - p <= second.
        t1, t2 = capture_start_ns(ch, first), capture_start_ns(ch, second)
        now = time.time_ns()
        lo, hi = max((now - t1) / 2, now - t2) / 1e9, (now - t1) / 1e9
        period = math.ceil((lo + hi) / 2)
        assert lo + 1 < period < hi - 1, (lo, period, hi)
        cli = {  # regressions first: its period is reckoned from now
            "regressions": fleet("regressions", "--since", f"{period}s", "--threshold", 0.05,
                                 *reader),
            "history fusion": fleet("history", "fusion", "--since", "3650d", *reader),
            "history copy-start job=train": fleet("history", "copy-start", "--since", "3650d",
                                                  "--label", "job=train", *reader),
            "history labels and pod": fleet("history", ".", "--since", "3650d", "--pod",
                                            "pod-a", "--label", "job=train", "--label",
                                            "team=x", *reader),
            # Quote() of a backslash and a quote, in a regex and in a label.
            "history escaped": fleet("history", r"copy-start|^fusion\.\d+$", "--since", "3650d",
                                     "--label", NOTE, *reader),
            "top kernel": fleet("top", "--by", "kernel", "--since", "3650d", *reader),
            "top pod": fleet("top", "--by", "pod", "--since", "3650d", *reader),
            "top host": fleet("top", "--by", "host", "--since", "3650d", "--top", 5, *reader),
            "top host pod-b": fleet("top", "--by", "host", "--since", "3650d", "--pod", "pod-b",
                                    *reader),
            "top kernel pod-a": fleet("top", "--since", "3650d", "--pod", "pod-a", *reader),
            "regressions pod-b": fleet("regressions", "--since", "3650d", "--pod", "pod-b",
                                       *reader),
        }
    finally:
        proxy.stop()
    return ch, proxy.exchanges, cli


def capture_start_ns(ch, demo_result):
    rows = ch.sql(f"SELECT start_ns FROM podprof.captures WHERE capture_id = "
                  f"'{demo_result['capture_id']}'").split()
    assert rows, f"{demo_result['capture_id']} did not reach 18.16"
    return int(rows[0])


def kind(x):
    if x["query"]:
        return "insert"
    sql = x["body"].decode().lstrip().upper()
    return "ddl" if sql.startswith(("CREATE", "ALTER", "DROP")) else "select"


def parsed(answer, sql):
    """An answer as comparable values: JSONCompact's column types and rows, or text lines;
    rows sorted unless the statement orders them."""
    text = answer.decode()
    ordered = " ORDER BY " in sql.upper()
    if re.search(r"FORMAT\s+JSONCompact\s*$", sql):
        doc = json.loads(text)
        rows = doc["data"]
        types = [m["type"] for m in doc["meta"]]
        return {"types": types, "rows": rows if ordered else sorted(rows, key=json.dumps)}
    lines = text.splitlines()
    return {"lines": lines if ordered else sorted(lines)}


def replay(exchanges, folder):
    """Runs the recording in a chdb session in order; returns (session, what failed, counts)."""
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    s = chdb_session.Session(str(folder / "db"))
    s.query("CREATE DATABASE podprof")
    failures, counts = [], {"ddl": 0, "insert": 0, "select": 0, "insert_bytes": 0}
    readonly = False
    for i, x in enumerate(exchanges):
        assert x["status"] == 200, f"18.16 refused request {i}: {x['answer'][:500]!r}"
        k = kind(x)
        counts[k] += 1
        # The fleet commands' user is read-only on 18.16 (profile readonly = 2, as
        # docs/FLEET.md asks): so is the session from its first statement on. Its
        # statements come last in the recording (the aggregators have stopped by then).
        if x["user"] == "reader" and not readonly:
            s.query("SET readonly = 2")
            readonly = True
        assert x["user"] == "reader" or not readonly, f"request {i} after the reader's"
        # The statement's settings from the URL, as the HTTP interface applies them.
        for name, value in x["settings"].items():
            assert re.fullmatch(r"[a-z0-9_]+", name + value), (name, value)
            s.query(f"SET {name} = {value}")
        if k == "insert":
            # chdb takes no request body: the recorded rows go in from a file, as they are.
            rows = folder / f"insert-{i:04d}.rowbinary"
            rows.write_bytes(x["body"])
            counts["insert_bytes"] += len(x["body"])
            sql, n = re.subn(r"\s+FORMAT\s+RowBinary\s*$",
                             f" FROM INFILE '{rows}' FORMAT RowBinary", x["query"])
            assert n == 1, f"an INSERT not in RowBinary: {x['query']}"
        else:
            sql = x["body"].decode()
        # The recording, for a reader: each statement as podprof sent it, 18.16's answer.
        (folder / f"{i:04d}-{k}.sql").write_text(
            (x["query"] if k == "insert" else sql) + "\n")
        (folder / f"{i:04d}-{k}.answer-18.16").write_bytes(x["answer"])
        try:
            # TabSeparated where the statement names no format: the HTTP interface's default.
            got = s.query(sql, "TabSeparated").bytes()
        except Exception as e:  # chdb's ChdbError: ClickHouse's own message
            failures.append(f"request {i} ({k}, as {x['user']}): {sql[:400]}\n  -> {e}")
            continue
        if k == "select":
            want, have = parsed(x["answer"], sql), parsed(got, sql)
            if want != have:
                failures.append(f"request {i} answers differently: {sql[:400]}\n"
                                f"  18.16: {json.dumps(want)[:1500]}\n"
                                f"  26.9:  {json.dumps(have)[:1500]}")
        elif got.strip():
            failures.append(f"request {i} ({k}) answered {got[:300]!r}: {sql[:200]}")
    return s, failures, counts


def table_rows(run, table):
    """Every row of `table` (run: SQL -> the answer's bytes) as JSON values, sorted. kernels
    is a ReplacingMergeTree whose repeats either engine may have merged away already: it is
    read FINAL, which collapses them the same way on both."""
    final = " FINAL" if table == "kernels" else ""
    sql = f"SELECT * FROM podprof.{table}{final} FORMAT JSONCompact"
    return parsed(run(sql), sql)


def test_fleet_sql_runs_on_current_clickhouse_as_on_18_16(out, procs):
    started = time.monotonic()
    ch, exchanges, cli = record(out, procs)
    recorded = time.monotonic() - started

    # What the recording covers: every table created and written, the replicator's checks
    # with captures present, and each fleet command's query.
    bodies = [x["body"].decode(errors="replace") for x in exchanges if not x["query"]]
    inserts = [x["query"] for x in exchanges if x["query"]]
    for t in TABLES:
        assert any(f"CREATE TABLE IF NOT EXISTS podprof.{t} (" in b for b in bodies), t
        assert any(f"podprof.{t}_all AS podprof.{t} ENGINE = Merge" in b for b in bodies), t
        assert any(q.startswith(f"INSERT INTO podprof.{t} (") for q in inserts), t
    upgrade = [b for b in bodies if b.startswith(("ALTER TABLE", "DROP TABLE"))]
    assert upgrade == [f"ALTER TABLE podprof.stragglers ADD COLUMN {c}" for c in
                       ("expected_last Float64 DEFAULT -1", "p_value Float64 DEFAULT 1",
                        "significant UInt8")] + ["DROP TABLE IF EXISTS podprof.stragglers_all"], \
        upgrade
    present = [x for x in exchanges if not x["query"]
               and x["body"].startswith(b"SELECT DISTINCT capture_id")]
    assert any(x["answer"].strip() for x in present), "no check found captures present"
    queries = [b for b in bodies if "_all WHERE" in b]
    assert len(queries) == len(cli), "one query per fleet command"
    assert all(x["user"] == "reader" for x in exchanges
               if x["body"].decode(errors="replace") in queries)
    # The rows make the queries mean something: both pods, a labelled history, a period
    # against the one before, with one kernel in both.
    assert {r["pod"] for r in cli["top pod"]["rows"]} == {"pod-a", "pod-b"}, cli["top pod"]
    assert cli["history copy-start job=train"]["points"], cli
    assert cli["history labels and pod"]["points"], cli
    assert cli["history escaped"]["points"], cli
    assert cli["regressions"]["kernels"], cli["regressions"]
    for name, answer in cli.items():
        (out / f"cli-{name.replace(' ', '_').replace('=', '-')}.json").write_text(
            json.dumps(answer, indent=1))

    session, failures, counts = replay(exchanges, out / "chdb")
    try:
        engine = session.query("SELECT version()", "TabSeparated").bytes().decode().strip()
        # Every table holds the same rows on both engines.
        for t in TABLES:
            want = table_rows(lambda q: ch.sql(q).encode(), t)
            have = table_rows(lambda q: session.query(q, "TabSeparated").bytes(), t)
            assert want["rows"], f"no rows in {t}"
            if want != have:
                failures.append(f"table {t} differs: 18.16 {len(want['rows'])} rows "
                                f"{want['types']}, 26.9 {len(have['rows'])} rows "
                                f"{have['types']}")
        summary = {"clickhouse_18": ch.version, "chdb": chdb.__version__, "engine": engine,
                   **counts, "record_s": round(recorded, 1),
                   "total_s": round(time.monotonic() - started, 1), "failures": failures}
        (out / "replay.json").write_text(json.dumps(summary, indent=1))
        print(json.dumps({k: v for k, v in summary.items() if k != "failures"}))
    finally:
        session.close()
    assert not failures, "\n\n".join(failures)
    assert engine.startswith("26."), engine
