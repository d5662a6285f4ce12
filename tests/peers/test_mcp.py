"""The aggregator's MCP endpoint driven by the real `mcp` SDK's client (pinned in .venv).

Over loopback plaintext, against the demo pod (`podprof demo --keep`, host-1's chip 0
throttled to 0.3 of its speed by the test): the tools are listed from the registry, a capture
is started and followed to its end, the straggler verdict names the chip the test slowed, and
a SQL query over the capture's collectives finds the same chip last most often. Over mutual
TLS (an aggregator of its own, certificates from scripts/make-certs.sh): a viewer certificate
reads but is refused the operator's start_capture, which an operator's certificate gets past.
"""
import asyncio
import json
import os
import shutil
import signal
import ssl
import subprocess
import time

import httpx2
import pytest
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client

from peerlib import BIN, OUT, SOURCE, Processes, wait_file

THROTTLED = ("host-1", 0)


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, timeout=120))


async def with_session(url, body, client=None):
    """Calls `body(session)` on an initialized MCP session to `url`."""
    async with streamable_http_client(url, http_client=client) as (read, write):
        async with ClientSession(read, write) as session:
            init = await session.initialize()
            assert init.server_info.name == "podprof-aggregator"
            return await body(session)


def answer(result):
    """A tool call's structured answer; fails the test with its text when it is an error."""
    assert not result.is_error, result.content[0].text
    return result.structured_content


@pytest.fixture(scope="module")
def demo():
    folder = OUT / "mcp-demo"
    shutil.rmtree(folder, ignore_errors=True)
    out = subprocess.run([BIN / "podprof", "demo", "--keep", "--dir", folder, "--throttle",
                          f"{THROTTLED[0][-1]}:{THROTTLED[1]}:0.3", "--format", "json"],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    d = json.loads(out.stdout)
    try:
        info = json.loads((folder / "aggregator.json").read_text())
        yield {"url": f"http://127.0.0.1:{info['http_port']}/mcp", "capture": d["capture_id"]}
    finally:
        for pid in d["pids"]:
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass


def test_an_agent_lists_captures_finds_the_straggler_and_asks_sql(demo):
    async def body(s):
        tools = {t.name: t for t in (await s.list_tools()).tools}
        for name in ("list_captures", "get_stragglers", "query_sql", "start_capture"):
            assert name in tools
        assert "operator" in tools["start_capture"].description
        assert tools["query_sql"].input_schema["required"] == ["capture", "query"]
        # Capture the demo pod again, from the agent, and follow it to its end.
        started = answer(await s.call_tool("start_capture", {"duration_ms": 1000,
                                                             "labels": {"by": "mcp"}}))
        capture = started["result"]["capture"]
        deadline = time.monotonic() + 90
        while True:
            got = answer(await s.call_tool("get_capture", {"capture": capture}))
            if got["result"]["status"] not in ("running", "pending"):
                break
            assert time.monotonic() < deadline, got["result"]
            await asyncio.sleep(0.5)
        assert got["result"]["status"] == "complete", got["result"]
        assert got["provenance"]["capture"] == capture and got["provenance"]["hosts"] == 4
        listed = answer(await s.call_tool("list_captures", {"limit": 1}))
        assert len(listed["result"]["captures"]) == 1 and listed["page"]["totals"]["captures"] >= 1
        # Small by default, and paged: two kernels of the capture's rows.
        stats = answer(await s.call_tool("get_kernel_stats", {"capture": capture,
                                                              "page_size": 2}))
        assert len(stats["result"]["rows"]) == 2 and stats["page"]["next_offset"] == 2
        assert stats["page"]["totals"]["rows"] > 2
        stragglers = answer(await s.call_tool("get_stragglers", {"capture": capture}))
        assert stragglers["result"]["straggler_named"] is True
        assert stragglers["result"]["verdict"].startswith(f"{THROTTLED[0]} chip {THROTTLED[1]}")
        # The same question in SQL: who arrived last at the collectives most often.
        sql = answer(await s.call_tool("query_sql", {
            "capture": capture,
            "query": "SELECT host, chip, count(*) AS times FROM collectives WHERE last = 1 "
                     "GROUP BY host, chip ORDER BY times DESC LIMIT 1"}))
        assert sql["result"]["columns"] == ["host", "chip", "times"]
        assert tuple(sql["result"]["rows"][0][:2]) == THROTTLED
        assert sql["provenance"]["clock_error_ns"] > 0
        # A statement the engine refuses is the tool's error, naming what was refused.
        refused = await s.call_tool("query_sql", {"capture": capture,
                                                  "query": "ATTACH DATABASE 'x' AS y"})
        assert refused.is_error and "ATTACH" in refused.content[0].text
        return capture

    run(with_session(demo["url"], body))


# --- mutual TLS -------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def tls_aggregator():
    folder = OUT / "mcp-tls"
    shutil.rmtree(folder, ignore_errors=True)
    certs = folder / "certs"
    certs.mkdir(parents=True)
    sh = ["bash", str(SOURCE / "scripts/make-certs.sh"), "--dir", str(certs)]
    for args in (["ca"], ["aggregator", "agg", "127.0.0.1", "localhost"],
                 ["operator", "alice"], ["viewer", "bob"]):
        subprocess.run(sh + args, check=True, capture_output=True)
    (folder / "agg.toml").write_text(
        f'[tls]\ncert = "{certs}/agg.crt"\nkey = "{certs}/agg.key"\nca = "{certs}/ca.crt"\n')
    procs = Processes(folder)
    try:
        ready = folder / "agg.json"
        p = procs.start("aggregator", [BIN / "podprof-aggregator",
                                       f"--config={folder / 'agg.toml'}", "--listen=127.0.0.1:0",
                                       "--http-listen=127.0.0.1:0", f"--db={folder / 'p.db'}",
                                       f"--ready-file={ready}"])
        info = wait_file(ready, 30, p)
        yield {"url": f"https://127.0.0.1:{info['http_port']}/mcp", "certs": certs}
    finally:
        procs.stop()


def tls_client(agg, who):
    c = agg["certs"]
    ctx = ssl.create_default_context(cafile=str(c / "ca.crt"))
    ctx.load_cert_chain(str(c / f"{who}.crt"), str(c / f"{who}.key"))
    return httpx2.AsyncClient(verify=ctx, timeout=30)


def test_a_viewer_certificate_is_refused_the_operators_tools(tls_aggregator):
    async def as_viewer(s):
        assert "start_capture" in {t.name for t in (await s.list_tools()).tools}
        listed = answer(await s.call_tool("list_captures", {}))
        assert listed["result"]["captures"] == []
        refused = await s.call_tool("start_capture", {"duration_ms": 1000})
        assert refused.is_error
        assert "operator" in refused.content[0].text and "403" in refused.content[0].text

    async def as_operator(s):
        # Past the role check, to the pod's own answer: no agents to capture.
        r = await s.call_tool("start_capture", {"duration_ms": 1000})
        assert r.is_error and "403" not in r.content[0].text

    async def both():
        async with tls_client(tls_aggregator, "bob") as bob:
            await with_session(tls_aggregator["url"], as_viewer, bob)
        async with tls_client(tls_aggregator, "alice") as alice:
            await with_session(tls_aggregator["url"], as_operator, alice)

    run(both())
