"""The Python client held to the tool registry (tools/registry.h, issue #59): every public
method of podprof.Client is some tool's `python` or a NotATool "python NAME" with its reason,
and every name the registry gives is a method there is. The registry is read from the built
binary's `podprof tools --format json`, so this needs no aggregator."""
import inspect

import podprof
from peerlib import podprof_json


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
