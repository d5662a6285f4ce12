"""The Python client held to the tool registry (tools/registry.h, issue #59): every public
method of podprof.Client is some tool's `python` or a NotATool "python NAME" with its reason,
and every name the registry gives is a method there is; and every `podprof` command's
`--format json` has the keys the registry says it has (an aggregator over a hand-made store).
The registry is read from the built binary's `podprof tools --format json`."""
import inspect
import json

import pytest

import podprof
from peerlib import dcn_store_pod, podprof as cli, podprof_json


def _registry():
    return podprof_json("tools")


def _public_methods():
    return {name for name, member in inspect.getmembers(podprof.Client, inspect.isfunction)
            if not name.startswith("_")}


def test_every_client_method_is_a_tool_or_says_why_not():
    registry = _registry()
    named = {t["python"] for t in registry["tools"] if t["python"]}
    not_tools = {n["what"][len("python "):] for n in registry["not_tools"]
                 if n["what"].startswith("python ")}
    methods = _public_methods()
    assert "kernels" in methods and "start_capture" in methods  # the listing works
    missing = sorted(methods - named - not_tools)
    assert not missing, (f"podprof.Client methods with no tool and no NotATool \"python NAME\" "
                         f"in tools/registry_entries.cc: {missing}")
    stale = sorted((named | not_tools) - methods)
    assert not stale, f"the registry names podprof.Client methods that do not exist: {stale}"


def test_each_tool_comes_with_its_schema_and_example():
    for t in _registry()["tools"]:
        schema = t["input_schema"]
        assert schema["type"] == "object", t["name"]
        assert set(schema["required"]) == {p["name"] for p in t["params"] if p["required"]}
        assert set(t["example"]) <= set(schema["properties"]), t["name"]
        assert t["role"] in ("viewer", "operator"), t["name"]


# --- the CLI's JSON held to the registry ------------------------------------------------------

# How each tool's `podprof` command is asked on podprof-test-dcn-store's store (two multi-slice
# captures, dcn-1 and dcn-slow, whose kernels include fusion.1).
CLI_ARGS = {
    "list_captures": ["captures"],
    "get_kernel_stats": ["stats", "dcn-1"],
    "get_stragglers": ["stragglers", "dcn-1"],
    "get_dcn_transfers": ["dcn", "dcn-1"],
    "get_kernel_history": ["history", "fusion.1"],
    "describe_kernel": ["kernel", "fusion.1", "--capture", "dcn-1"],
    "diff_sessions": ["diff", "dcn-1", "dcn-slow"],
    "query_sql": ["sql", "dcn-1", "SELECT host, count(*) AS n FROM events GROUP BY host"],
    "list_agents": ["agents"],
    "get_telemetry": ["telemetry"],
}
# The commands this store cannot answer, and where their JSON is tested instead.
NOT_ASKED_HERE = {
    "get_fleet_history": "needs ClickHouse: tests/python/test_fleet.py",
    "get_fleet_top": "needs ClickHouse: tests/python/test_fleet.py",
    "get_fleet_regressions": "needs ClickHouse: tests/python/test_fleet.py",
    "start_capture": "needs agents: test_client.py holds `podprof capture --format json` to it",
    "take_snapshot": "needs agents; `podprof snapshot` is `podprof capture`'s command and writer",
}


@pytest.fixture(scope="module")
def store():
    for pod in dcn_store_pod("tools-cli"):
        yield pod["address"]


def test_every_commands_json_has_the_keys_the_registry_gives(store):
    tools = [t for t in _registry()["tools"] if t["cli"]]
    asked = 0
    for t in tools:
        if t["name"] in NOT_ASKED_HERE:
            continue
        assert t["name"] in CLI_ARGS, f"{t['name']} (podprof {t['cli']}) is neither asked here " \
                                      f"nor in NOT_ASKED_HERE"
        args = CLI_ARGS[t["name"]]
        assert " ".join(args).startswith(t["cli"]), (t["name"], args)
        answer = json.loads(cli(*args, "--aggregator", store, "--format", "json"))
        if t["cli_json_is_array"]:
            assert isinstance(answer, list) and answer, (t["name"], answer)
            answer = answer[0]
        assert isinstance(answer, dict), t["name"]
        missing = [k for k in t["cli_result_keys"] if k not in answer]
        assert not missing, f"podprof {' '.join(args)} --format json lacks {missing}"
        asked += 1
    assert asked == len(CLI_ARGS)
